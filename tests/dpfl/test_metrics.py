"""Balanced accuracy (`dpfl.metrics`): exact values on known predictions, the classes it averages
over, and the datasets that report it."""

from __future__ import annotations

import pytest
import torch

from dpfl.data import dataset_info, headline_metric
from dpfl.metrics import balanced_accuracy


def test_a_constant_classifier_scores_one_over_the_classes_present():
    # Creditcard-like: 2 frauds in 1,000 rows; always "not fraud" is 99.8 % accurate, 0.5 balanced
    labels = torch.zeros(1000, dtype=torch.long)
    labels[[17, 400]] = 1
    never = torch.zeros(1000, dtype=torch.long)
    assert float((never == labels).double().mean()) == 0.998
    assert balanced_accuracy(labels, never) == 0.5
    assert balanced_accuracy(labels, torch.ones(1000, dtype=torch.long)) == 0.5
    assert balanced_accuracy(torch.tensor([0, 1, 2, 2]), torch.tensor([2, 2, 2, 2])) == 1 / 3


def test_the_mean_of_each_present_classs_recall():
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 3, 3, 3, 3])  # class 2 absent: not averaged over
    predicted = torch.tensor([0, 0, 0, 1, 1, 2, 3, 3, 0, 0])
    # recalls 3/4, 1/2, 2/4; a prediction of the absent class 2 counts only as class 1's miss
    assert balanced_accuracy(labels, predicted) == (3 / 4 + 1 / 2 + 2 / 4) / 3
    assert balanced_accuracy(labels, labels) == 1.0
    assert balanced_accuracy(torch.tensor([1]), torch.tensor([0])) == 0.0


def test_two_classes_it_is_the_roc_auc_of_hard_labels():
    # hard-label ROC-AUC = (TPR + TNR) / 2: TPR = 2/3, TNR = 4/5
    labels = torch.tensor([1, 1, 1, 0, 0, 0, 0, 0])
    predicted = torch.tensor([1, 1, 0, 0, 0, 0, 0, 1])
    assert balanced_accuracy(labels, predicted) == pytest.approx((2 / 3 + 4 / 5) / 2, abs=1e-15)


@pytest.mark.parametrize(
    ("labels", "predicted", "message"),
    [
        (torch.tensor([0, 1]), torch.tensor([0]), r"two \[N\] tensors; got \(2,\) and \(1,\)"),
        (torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long), "at least one label"),
    ],
)
def test_mismatched_or_empty_inputs_are_refused(labels, predicted, message):
    with pytest.raises(ValueError, match=message):
        balanced_accuracy(labels, predicted)


def test_creditcard_reports_balanced_accuracy_and_the_others_accuracy():
    assert dataset_info("creditcard").metric == "balanced_accuracy"
    assert dataset_info("mnist").metric == "accuracy"


def test_the_headline_metric_of_a_name_not_registered_is_accuracy():
    assert headline_metric("creditcard") == "balanced_accuracy"
    assert (headline_metric("mnist"), headline_metric("csv")) == ("accuracy", "accuracy")
    assert headline_metric("my-upload") == "accuracy"  # an upload, listed under its own name
