"""Test metrics of a classifier's hard predictions, computed once here for every evaluation.

Accuracy is the share of predictions equal to the label. On an imbalanced test set it says little
(Creditcard's test rows are 0.17 % frauds: always predicting "not fraud" scores 0.998), so each
evaluation also records **balanced accuracy**, the mean per-class recall over the classes present
in the labels:

    BA = (1/|K|) Σ_{k ∈ K} |{i : yᵢ = k, ŷᵢ = k}| / |{i : yᵢ = k}|,   K = {k : some yᵢ = k}

(Brodersen et al. 2010; scikit-learn's ``balanced_accuracy_score`` without ``adjusted``). A constant
classifier scores 1/|K|: 0.5 on a binary task. For two classes it equals the ROC-AUC of hard
labels, which is what the ULDP-FL authors' code reports as "accuracy" on Creditcard
(reference/004_uldp_fl.md §4.2). A dataset names the metric its papers report
(`dpfl.data.DatasetInfo.metric`); reproductions report that one.
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["HEADLINE_METRICS", "METRIC_NAMES", "HeadlineMetric", "balanced_accuracy", "in_metric"]

HeadlineMetric = Literal["accuracy", "balanced_accuracy"]
HEADLINE_METRICS: tuple[HeadlineMetric, ...] = ("accuracy", "balanced_accuracy")
"""The test metrics a dataset can name as the one its results are reported in."""

METRIC_NAMES: dict[str, str] = {"accuracy": "accuracy", "balanced_accuracy": "balanced accuracy"}
"""Each headline metric as figures and tables name it."""


def in_metric(metric: str, *, accuracy: float | None, balanced_accuracy: float | None) -> float | None:
    """Returns a result's value in `metric` (its dataset's headline metric): its balanced accuracy
    for ``balanced_accuracy``, else its accuracy; None where that one was not recorded."""
    return balanced_accuracy if metric == "balanced_accuracy" else accuracy


def balanced_accuracy(labels: torch.Tensor, predictions: torch.Tensor) -> float:
    """Returns the mean per-class recall of ``predictions`` over the classes present in ``labels``.

    Args:
        labels: the true classes, integers [N], N ≥ 1.
        predictions: the predicted classes, integers [N] (a class absent from the labels lowers
            the recall of the class it was predicted for, and adds no class of its own).

    Raises:
        ValueError: the two differ in shape, or there is no label.
    """
    labels, predictions = torch.as_tensor(labels).long(), torch.as_tensor(predictions).long()
    if labels.shape != predictions.shape or labels.dim() != 1:
        raise ValueError(
            f"labels and predictions must be two [N] tensors; got {tuple(labels.shape)} and "
            f"{tuple(predictions.shape)}"
        )
    if labels.numel() == 0:
        raise ValueError("balanced accuracy needs at least one label; got none")
    classes = int(labels.max()) + 1
    support = torch.bincount(labels, minlength=classes)
    hits = torch.bincount(labels[predictions == labels], minlength=classes)
    present = support > 0
    return float((hits[present].double() / support[present].double()).mean())
