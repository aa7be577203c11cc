"""Grid expansion: points, the non-private rule, per-algorithm params and where errors point (no database)."""

from __future__ import annotations

import pytest

from dpfl.algorithms import registered_algorithms
from dpfl.sweep import PointError, expand, locate

BASE = {
    "params": {"lr": 0.5, "batch_size": 64},
    "params_by_algorithm": {"isrl_mbsgd": {"clip": 1.0}},
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 3,
    "privacy": {"delta": 1e-5},
}


def test_fedavg_is_kept_once_per_seed_without_privacy():
    grid = {"algorithm": ["isrl_mbsgd", "fedavg"], "privacy.epsilon": [0.5, 1, 2], "seed": [0, 1]}
    points = expand(BASE, grid, max_points=500)
    assert [p.overrides for p in points] == [
        {"algorithm": "isrl_mbsgd", "privacy.epsilon": eps, "seed": seed}
        for eps in (0.5, 1, 2)
        for seed in (0, 1)
    ] + [{"algorithm": "fedavg", "seed": 0}, {"algorithm": "fedavg", "seed": 1}]
    isrl, fed = points[0].data, points[-1].data
    assert isrl["privacy"] == {"delta": 1e-5, "epsilon": 0.5}
    assert isrl["params"] == {"lr": 0.5, "batch_size": 64, "clip": 1.0}
    assert "privacy" not in fed and fed["params"] == {"lr": 0.5, "batch_size": 64}
    assert "params_by_algorithm" not in isrl and "params_by_algorithm" not in fed


def test_grid_params_win_over_per_algorithm_params_and_values_are_copied():
    base = BASE | {"algorithm": "isrl_mbsgd", "model": {"name": "mlp"}}
    points = expand(base, {"params.clip": [0.1, 2.0], "model.hidden": [[16]]}, max_points=500)
    assert [p.data["params"]["clip"] for p in points] == [0.1, 2.0]
    points[0].data["model"]["hidden"].append(32)
    assert points[1].data["model"]["hidden"] == [16]
    assert base["model"] == {"name": "mlp"}  # the base is never changed


def test_an_empty_grid_is_the_base_alone():
    (point,) = expand(BASE | {"algorithm": "fedavg"}, {}, max_points=1)
    assert point.overrides == {} and point.data["algorithm"] == "fedavg"


def test_too_many_points_names_the_count_and_the_limit():
    with pytest.raises(PointError) as caught:
        expand(BASE | {"algorithm": "isrl_mbsgd"}, {"seed": list(range(6))}, max_points=5)
    assert caught.value.loc == ("grid",)
    assert caught.value.reason == (
        "has 6 points; a sweep may have at most 5 on this server. Give fewer values or split the sweep."
    )


def test_duplicates_do_not_count_against_the_limit():
    grid = {"algorithm": ["fedavg"], "privacy.epsilon": [1, 2, 3, 4, 5, 6]}
    assert len(expand(BASE, grid, max_points=1)) == 1


@pytest.mark.parametrize(
    ("base", "grid", "loc", "reason"),
    [
        (BASE, {"seed": 3}, ("grid", "seed"), "must be a list of values; got 3."),
        (BASE, {"seed": []}, ("grid", "seed"), "must list at least one value; got []."),
        (
            BASE,
            {"a..b": [1]},
            ("grid", "a..b"),
            "must be a dotted spec field such as `privacy.epsilon`; got 'a..b'.",
        ),
        (
            BASE,
            {"privacy": [{"epsilon": 1}], "privacy.delta": [1e-6]},
            ("grid", "privacy.delta"),
            "overlaps the grid key `privacy`; sweep each field once.",
        ),
        (
            BASE,
            {"algorithm": ["isrl_mbsgd", "nope"]},
            ("grid", "algorithm"),
            "unknown algorithm 'nope'; registered: " + ", ".join(registered_algorithms()),
        ),
        (
            BASE | {"params_by_algorithm": {"nope": {}}},
            {"algorithm": ["fedavg"]},
            ("base", "params_by_algorithm", "nope"),
            "unknown algorithm 'nope'; registered: " + ", ".join(registered_algorithms()),
        ),
        (
            BASE | {"model_by_algorithm": {"gdp_gd": "logreg"}},
            {"algorithm": ["gdp_gd"]},
            ("base", "model_by_algorithm", "gdp_gd"),
            "must be a mapping of model fields; got 'logreg'.",
        ),
        (
            BASE,
            {"model_by_algorithm.gdp_gd.name": ["logreg"]},
            ("grid", "model_by_algorithm.gdp_gd.name"),
            "cannot be swept; set `model_by_algorithm` in `base`.",
        ),
        (
            BASE | {"algorithm": "isrl_mbsgd", "rounds": 3},
            {"rounds.x": [1]},
            ("grid", "rounds.x"),
            "cannot be set: `rounds` is 3 in the base, not a mapping.",
        ),
    ],
)
def test_malformed_grid_is_refused_naming_the_key(base, grid, loc, reason):
    with pytest.raises(PointError) as caught:
        expand(base, grid, max_points=500)
    assert (caught.value.loc, caught.value.reason) == (loc, reason)


def test_errors_are_located_in_the_grid_the_base_or_the_per_algorithm_params():
    grid = {"algorithm": ["isrl_mbsgd"], "privacy.epsilon": [1], "params.lr": [0.1]}
    (point,) = expand(BASE, grid, max_points=500)
    assert locate("privacy.epsilon", point, BASE) == ("grid", "privacy.epsilon")
    assert locate("privacy", point, BASE) == (
        "grid",
        "privacy.epsilon",
    )  # a rule over the whole privacy target
    assert locate("params.lr", point, BASE) == ("grid", "params.lr")
    assert locate("params.clip", point, BASE) == ("base", "params_by_algorithm", "isrl_mbsgd", "clip")
    assert locate("params.batch_size", point, BASE) == ("base", "params", "batch_size")
    assert locate("dataset.silos", point, BASE) == ("base", "dataset", "silos")
    assert locate("spec", point, BASE) == ("base",)


def test_a_per_algorithm_model_replaces_the_base_model_for_its_points_only():
    # a sweep may set logistic-regression algorithms beside MLP ones
    base = BASE | {
        "model": {"name": "mlp", "hidden": [32]},
        "model_by_algorithm": {"gdp_gd": {"name": "logreg"}},
    }
    grid = {"algorithm": ["isrl_mbsgd", "gdp_gd"], "privacy.mu": [1.0]}
    isrl, gdp = expand(base, grid, max_points=500)
    assert isrl.data["model"] == {"name": "mlp", "hidden": [32]}
    assert gdp.data["model"] == {"name": "logreg"}
    assert "model_by_algorithm" not in gdp.data and "model_by_algorithm" not in isrl.data
    assert locate("model.name", gdp, base) == ("base", "model_by_algorithm", "gdp_gd", "name")
    assert locate("model.name", isrl, base) == ("base", "model", "name")
