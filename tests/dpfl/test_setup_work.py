"""The set-up of configs/isrl_mnist.yaml (issue 43): the same σ and planned ε as before its work was
removed, pinned, and the work itself counted: the branch-and-bound searches of the accountant
(`rdp_pruned._minimum`) that calibrate 25 silos and plan their ε, and no PCA fitted on the rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dpfl.privacy.accountants.rdp_pruned as rdp_pruned
from dpfl.data import transforms
from dpfl.data.prepared import clear_prepared
from dpfl.privacy.calibration.remembered import RESULTS
from dpfl.runner import prepare, project
from dpfl.spec import load_spec
from tests.factories import data_dir

SPEC = Path(__file__).resolve().parents[2] / "configs" / "isrl_mnist.yaml"
# σ per silo and planned ε (rounds 1, 8, …, 50) of the spec as computed before issue 43's changes
# (one search per silo and per check), read from the projection that code stored
SIGMA = [
    1.0304525700978904, 1.0508938925201463, 1.0784089673660162, 1.04631362764095, 1.0578095278378048,
    1.029448117076119, 1.0498258199585344, 1.0771688998712745, 1.0451008128367132, 1.0565153671581142,
    1.0329442847425863, 1.0541360006583975, 1.0817559300289168, 1.0492946513576882, 1.0608035508100992,
    1.0307111598309608, 1.0512513142826776, 1.0788241430903125, 1.0464873598728877, 1.057995105916536,
    1.0327840150629002, 1.0537726683538053, 1.0815449992050252, 1.0489413491001751, 1.0606149950001331,
]  # fmt: skip
PLANNED = [
    1.514556009197495, 1.9512006585162784, 2.192354077407108, 2.388391226508986,
    2.5602426241664276, 2.7171858250347256, 2.8630676776525075, 2.9999997409926467,
]  # fmt: skip


@pytest.fixture
def work(monkeypatch) -> dict[str, list[int]]:
    """Counts, each still computed: the accountant's searches (their rows) and the PCA fits."""
    seen: dict[str, list[int]] = {"searches": [], "pca_fits": []}
    search, fit = rdp_pruned._minimum, transforms.pca_components

    def counted_search(*args, **kwargs):
        seen["searches"].append(kwargs["rows"])
        return search(*args, **kwargs)

    def counted_fit(x_train, num_components):
        seen["pca_fits"].append(num_components)
        return fit(x_train, num_components)

    monkeypatch.setattr(rdp_pruned, "_minimum", counted_search)
    monkeypatch.setattr(transforms, "pca_components", counted_fit)
    return seen


def test_the_mnist_spec_projects_the_same_sigma_and_epsilon_with_less_work(work):
    spec = load_spec(SPEC.read_text())
    clear_prepared()
    rdp_pruned.cache_clear()
    RESULTS.clear()  # nothing remembered from other tests: the whole calibration runs
    try:
        privacy = project(prepare(spec, data_dirs=[data_dir()]))
    finally:
        clear_prepared()
    np.testing.assert_allclose(privacy.noise_multiplier, SIGMA, rtol=1e-9, atol=0)
    np.testing.assert_allclose(privacy.planned_epsilon[::7], PLANNED, rtol=1e-9, atol=0)
    assert privacy.planned_epsilon[-1] <= 3.0
    assert work["pca_fits"] == []  # the shipped fit (dpfl.data.fits)
    # planning: every round of every silo in one search (was 25, one per silo)
    assert work["searches"][-1] == 25 * 50
    # calibration: the silos' whole-grid checks together (was 71 searches, one per check)
    assert len(work["searches"]) - 1 == 14
    assert work["searches"].count(24) == 2
