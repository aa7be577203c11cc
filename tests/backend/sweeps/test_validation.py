"""Every point of a sweep is checked the way its run's setup checks it (issue 18, bug 1): a point
the worker would refuse makes the sweep a 422 naming the field and the point, and nothing is
created."""

from __future__ import annotations

import pytest

from backend.runs import service as runs_service
from dpfl.data import prepared
from dpfl.data.prepared import clear_prepared

pytestmark = pytest.mark.service

BASE = {
    "dataset": {"name": "digits", "silos": 4},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 2,
    "privacy": {"epsilon": 3.0, "delta": 1e-5},
}
USERS = (
    "is required for uldp_avg: say who owns each record, e.g. `users: {kind: zipf, count: 100}` "
    "(kinds: uniform, balanced, zipf, natural)."
)


@pytest.mark.parametrize(
    ("base", "grid", "loc", "msg"),
    [
        (
            BASE,
            {"algorithm": ["isrl_mbsgd", "gdp_localnewton"], "seed": [0, 1]},
            ["body", "base", "model", "name"],
            "must be `logreg` for gdp_localnewton; got 'mlp'. (point 3 of 4: algorithm=\"gdp_localnewton\", "
            "seed=0)",
        ),
        (
            BASE,
            {"algorithm": ["uldp_naive", "uldp_avg"]},
            ["body", "base", "dataset", "users"],
            f'{USERS} (point 2 of 2: algorithm="uldp_avg")',
        ),
        (
            BASE | {"algorithm": "ae_dpfl", "params": {"queries": 20, "student_epochs": 1}},
            {"params.public_pool": [100, 1000]},
            ["body", "grid", "params.public_pool"],
            "must be between 0 and 358 (the dataset has 359 test records and at least one must stay for "
            "testing); got 1000. (point 2 of 2: params.public_pool=1000)",
        ),
        (
            BASE | {"algorithm": "isrl_mbsgd"},
            {"model.hidden": [[16], "abc"]},
            ["body", "grid", "model.hidden"],
            "must list positive integer widths, e.g. [64]; got 'abc'. (point 2 of 2: model.hidden=\"abc\")",
        ),
    ],
)
def test_a_point_the_worker_would_refuse_is_422_and_creates_nothing(client, base, grid, loc, msg):
    res = client.post("/api/sweeps", json={"base": base, "grid": grid})
    assert (res.status_code, res.json()) == (
        422,
        {"detail": [{"loc": loc, "msg": msg, "type": "value_error"}], "error": "SpecError"},
    )
    assert client.get("/api/sweeps").json()["total"] == 0
    assert client.get("/api/runs").json()["total"] == 0


def test_each_point_of_an_epsilon_grid_is_calibrated_on_data_loaded_once(client):
    # every point is projected as its worker will project it (its own σ), but the data they
    # share is loaded and partitioned once (with PCA on MNIST: seconds each)
    runs_service._planned.cache_clear()
    clear_prepared()
    base = BASE | {"algorithm": "isrl_mbsgd"}
    res = client.post("/api/sweeps", json={"base": base, "grid": {"privacy.epsilon": [1, 2, 3, 4]}})
    assert (res.status_code, res.json()["num_runs"]) == (201, 4)
    assert runs_service._planned.cache_info().misses == 4
    assert len(prepared._MEMORY) == 1
    runs = [client.get(f"/api/runs/{i}").json() for i in res.json()["run_ids"]]
    sigmas = [min(r["noise_multiplier"]) for r in runs]  # one σ per silo, each calibrated
    assert sigmas == sorted(sigmas, reverse=True) and len(set(sigmas)) == 4
    for run, target in zip(runs, [1, 2, 3, 4], strict=True):
        assert target * 0.99 < run["projected_epsilon"] <= target
