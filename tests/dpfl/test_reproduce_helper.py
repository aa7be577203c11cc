"""A sweep's projections shared with a helper process (`dpfl.reproduce.helper`): the same numbers
as this process alone, the helper's RDP values learnt here, and its failures left to `runner.start`."""

from __future__ import annotations

from dpfl import runner
from dpfl.privacy.accountants import rdp
from dpfl.privacy.calibration.stored import store_of
from dpfl.privacy.dpa import RdpAccountant
from dpfl.privacy.events import to_dp_accounting
from dpfl.reproduce.helper import ProjectionHelper
from dpfl.reproduce.local import run_sweeps
from dpfl.reproduce.manifest import Sweep
from dpfl.spec import parse_spec
from dpfl.sweep import Point
from tests.factories import data_dir

SPEC = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 2.0, "batch_size": 64, "clip": 1.0},
    "dataset": {"name": "digits", "silos": 3},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 4,
    "privacy": {"epsilon": 1.0, "delta": 1.0e-5},
    "eval_every": 2,
}


def specs(epsilons=(1.0, 2.0, 4.0), seeds=(0, 1)) -> list:
    return [
        parse_spec(SPEC | {"privacy": SPEC["privacy"] | {"epsilon": e}, "seed": s})
        for e in epsilons
        for s in seeds
    ]


def test_the_helper_projects_its_classes_and_this_process_learns_their_rdp_values(tmp_path):
    runs = specs()
    rdp.cache_clear()
    with ProjectionHelper(runs, data_dirs=[data_dir()], cache_dir=tmp_path) as helper:
        helper.share(runs)
        # The helper is given the last class (ε = 4) at once; this process claims the others
        # before the helper (still starting) could take a second one.
        for spec in runs:
            helper.claim(spec)
    assert len(list((tmp_path / "projections").iterdir())) == 2  # ε = 4, seeds 0 and 1
    for spec in runs[4:]:
        algorithm = runner.prepare(spec, data_dirs=[data_dir()])
        stored = runner.project(algorithm, store=store_of(tmp_path))  # read, not computed here
        events = list(algorithm.plan(stored.noise_multiplier).party_events().values())
        learnt = rdp.known_values(events)
        assert sum(len(values) for values in learnt.values()) >= 3
        for event, values in learnt.items():
            for order, value in values.items():
                alone = RdpAccountant(orders=[order])
                alone.compose(to_dp_accounting(event))
                assert value == float(alone.rdp[0]), (event, order)  # dp-accounting's own value
        rdp.cache_clear()
        own = runner.project(algorithm)  # computed here, from nothing
        assert (own.noise_multiplier, own.planned_epsilon) == (
            stored.noise_multiplier,
            stored.planned_epsilon,
        )


def test_a_sweep_with_the_helper_gives_the_numbers_of_one_without(tmp_path):
    points = specs(epsilons=(0.5, 1.0, 3.0, 8.0))
    sweep = _sweep(points)
    alone = run_sweeps([sweep], data_dirs=[data_dir()])  # no download folder: no helper
    shared = run_sweeps([sweep], data_dirs=[data_dir()], cache_dir=tmp_path)
    assert len(list((tmp_path / "projections").iterdir())) == len(points)
    assert [o.status for o in shared] == ["succeeded"] * len(points)
    for a, b in zip(alone, shared, strict=True):
        assert (b.epsilon, b.sigma, b.accuracy, b.loss, b.curve) == (
            a.epsilon,
            a.sigma,
            a.accuracy,
            a.loss,
            a.curve,
        )
        assert b.epsilon <= b.target_epsilon * (1 + 1e-9)


def test_a_run_the_helper_cannot_project_fails_with_its_own_message(tmp_path):
    good = specs(epsilons=(1.0,), seeds=(0,))
    # the last class, so the helper's: an approximate accountant cannot calibrate σ
    bad = parse_spec(SPEC | {"privacy": SPEC["privacy"] | {"epsilon": 1.0, "accountant": "gdp"}, "seed": 0})
    shared = run_sweeps([_sweep([*good, bad])], data_dirs=[data_dir()], cache_dir=tmp_path)
    alone = run_sweeps([_sweep([*good, bad])], data_dirs=[data_dir()])
    assert [o.status for o in shared] == ["succeeded", "failed"]
    assert shared[1].error.startswith("`privacy.accountant` must account every planned release exactly")
    assert [(o.status, o.error, o.epsilon) for o in shared] == [(o.status, o.error, o.epsilon) for o in alone]


def _sweep(runs) -> Sweep:
    grid = {
        "privacy.epsilon": sorted({r.privacy.epsilon for r in runs}),
        "seed": sorted({r.seed for r in runs}),
    }
    return Sweep("tiny", SPEC, grid, "privacy.epsilon", [Point({}, r.to_json()) for r in runs])
