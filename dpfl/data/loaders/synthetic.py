"""Generated datasets: FedProx's heterogeneous Synthetic(α, β) and a logistic-model generator.

Both are deterministic for a seed (numpy ``Generator`` on a named stream) and need no files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.preprocessing import rng_for
from dpfl.data.registry import DATASETS
from dpfl.errors import SpecError

__all__ = ["load_logistic", "load_synthetic"]

_SYNTHETIC_FEATURES = 60
_SYNTHETIC_CLASSES = 10
_SYNTHETIC_TRAIN_FRACTION = 0.9


def _check_seed(seed: object) -> None:
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise SpecError("dataset.seed", f"must be an integer >= 0; got {seed!r}.")


def _check_positive_int(field: str, value: object, minimum: int) -> None:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise SpecError(f"dataset.{field}", f"must be an integer >= {minimum}; got {value!r}.")


def _check_non_negative(field: str, value: object) -> None:
    if not isinstance(value, int | float | np.number) or isinstance(value, bool) or not value >= 0:
        raise SpecError(f"dataset.{field}", f"must be a number >= 0; got {value!r}.")


@DATASETS.register(
    "synthetic",
    description="FedProx Synthetic(alpha, beta): 60 features, 10 classes, one generated model and "
    "input distribution per silo (natural silos), lognormal silo sizes.",
    source_url="https://arxiv.org/abs/1812.06127",
    license="generated (MIT code: litian96/FedProx)",
    num_classes=_SYNTHETIC_CLASSES,
    natural_silos=30,
    needs_files=False,
)
def load_synthetic(
    *,
    search_dirs: Sequence[Path],
    cache_dir: Path | None,
    download: bool,
    alpha: float = 1.0,
    beta: float = 1.0,
    num_silos: int = 30,
    seed: int = 0,
) -> Dataset:
    """Returns Synthetic(α, β) of Li et al. 2020 (FedProx, §5.1), with the silos as natural silos.

    Generative model, per silo k (as in ``data/synthetic_1_1/generate_synthetic.py`` of the
    FedProx code, which reads the paper's N(0, α) and N(0, β) as standard deviations):

    - ``u_k ~ N(0, α²)`` and ``B_k ~ N(0, β²)``;
    - ``W_k ∈ R^{60×10}`` with entries ``~ N(u_k, 1)``, ``b_k ∈ R^{10}`` with entries ``~ N(u_k, 1)``;
    - ``v_k ∈ R^{60}`` with entries ``~ N(B_k, 1)``; ``Σ = diag(j^{-1.2})``, j = 1..60;
    - ``x ~ N(v_k, Σ)`` and ``y = argmax(softmax(W_kᵀ x + b_k))``;
    - silo size ``n_k = floor(LogNormal(4, 2)) + 50``.

    α controls how much the silos' models differ, β how much their inputs differ. Each silo
    keeps its first 90% of rows for training and the rest for testing (FedProx's split of a
    shuffled silo; the rows are i.i.d. within a silo, so no shuffle is needed).

    Args:
        alpha: model heterogeneity α >= 0 (FedProx uses 0, 0.5 and 1).
        beta: input heterogeneity β >= 0.
        num_silos: number of silos (FedProx: 30).
        seed: seed of the generator.
    """
    _check_non_negative("alpha", alpha)
    _check_non_negative("beta", beta)
    _check_positive_int("num_silos", num_silos, 1)
    _check_seed(seed)
    rng = rng_for(seed, "synthetic")
    d, c = _SYNTHETIC_FEATURES, _SYNTHETIC_CLASSES
    sizes = np.floor(rng.lognormal(4.0, 2.0, num_silos)).astype(np.int64) + 50
    u = rng.normal(0.0, alpha, num_silos)
    big_b = rng.normal(0.0, beta, num_silos)
    v = rng.normal(big_b[:, None], 1.0, (num_silos, d))
    w = rng.normal(u[:, None, None], 1.0, (num_silos, d, c))
    b = rng.normal(u[:, None], 1.0, (num_silos, c))
    std = np.arange(1, d + 1, dtype=np.float64) ** -0.6  # sqrt of Σ_jj = j^-1.2

    silo = np.repeat(np.arange(num_silos, dtype=np.int64), sizes)
    x = v[silo] + rng.standard_normal((len(silo), d)) * std
    starts = np.cumsum(sizes) - sizes
    # argmax of softmax(z) is argmax of z. Rows are grouped by silo, so each silo's block is
    # one matrix product with its own model (a loop over silos, not over rows).
    y = np.concatenate(
        [
            (x[s : s + n] @ w[k] + b[k]).argmax(axis=1)
            for k, (s, n) in enumerate(zip(starts, sizes, strict=True))
        ]
    ).astype(np.int64)
    rank = np.arange(len(silo)) - np.repeat(starts, sizes)
    is_train = rank < np.repeat((_SYNTHETIC_TRAIN_FRACTION * sizes).astype(np.int64), sizes)
    x = x.astype(np.float32)
    return Dataset(
        x_train=x[is_train],
        y_train=y[is_train],
        x_test=x[~is_train],
        y_test=y[~is_train],
        num_classes=c,
        name="synthetic",
        silo_train=silo[is_train],
        silo_test=silo[~is_train],
        silo_names=tuple(f"silo_{k}" for k in range(num_silos)),
    )


@DATASETS.register(
    "logistic",
    description="Logistic-model data of the GDP-LocalNewton paper: x ~ N(0, I), "
    "y ~ Bernoulli(sigmoid(w*.x)).",
    source_url="reference/001_gdp_localnewton.md §4.1",
    license="generated",
    num_classes=2,
    needs_files=False,
)
def load_logistic(
    *,
    search_dirs: Sequence[Path],
    cache_dir: Path | None,
    download: bool,
    num_samples: int = 50_000,
    num_test: int = 10_000,
    num_features: int = 10,
    true_weights: str = "uniform",
    seed: int = 0,
) -> Dataset:
    """Returns data drawn from a logistic model, as in Cao et al. (GDP-LocalNewton) §4.

    ``x ~ N(0, I_d)``, ``y ~ Bernoulli(sigmoid(w*·x))`` with labels in {0, 1}. The paper's
    simulation uses d = 10, n = 50,000 training and 10,000 test rows, and ``w*`` with entries
    ``U(-0.5, 0.5)`` (reference/001_gdp_localnewton.md §4.1); ``true_weights="normal"``
    draws ``w* ~ N(0, I_d)`` instead.

    Args:
        num_samples: number of training rows.
        num_test: number of test rows.
        num_features: dimension d.
        true_weights: ``"uniform"`` (U(-0.5, 0.5), the paper's) or ``"normal"`` (N(0, 1)).
        seed: seed of the generator (the same ``w*`` for train and test).
    """
    _check_positive_int("num_samples", num_samples, 1)
    _check_positive_int("num_test", num_test, 1)
    _check_positive_int("num_features", num_features, 1)
    if true_weights not in ("uniform", "normal"):
        raise SpecError("dataset.true_weights", f"must be 'uniform' or 'normal'; got {true_weights!r}.")
    _check_seed(seed)
    rng = rng_for(seed, "logistic")
    if true_weights == "uniform":
        w_star = rng.uniform(-0.5, 0.5, num_features)
    else:
        w_star = rng.standard_normal(num_features)
    x = rng.standard_normal((num_samples + num_test, num_features))
    p = 1.0 / (1.0 + np.exp(-(x @ w_star)))
    y = (rng.random(len(x)) < p).astype(np.int64)
    x = x.astype(np.float32)
    return Dataset(
        x_train=x[:num_samples],
        y_train=y[:num_samples],
        x_test=x[num_samples:],
        y_test=y[num_samples:],
        num_classes=2,
        name="logistic",
        feature_names=tuple(f"x{j}" for j in range(num_features)),
    )
