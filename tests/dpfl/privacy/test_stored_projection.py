"""Projections stored on disk (dpfl.privacy.calibration.stored): a fresh process running a spec
again reads its σ and planned ε instead of calibrating, for simulation runs only."""

from __future__ import annotations

import json

from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD
from dpfl.privacy.accountants import RDPAccountant, rdp, rdp_pruned
from dpfl.privacy.calibration import remembered
from dpfl.privacy.calibration.stored import storable
from dpfl.runner import prepare, project, run
from tests.factories import isrl_digits_spec


def _projected(spec, store):
    return project(prepare(spec), store=store)


def test_a_second_projection_reads_what_the_first_stored(tmp_path):
    spec = isrl_digits_spec(rounds=5)
    first = _projected(spec, tmp_path)
    (stored,) = tmp_path.glob("*.json")
    data = json.loads(stored.read_text())
    assert {k: data[k] for k in ("noise_multiplier", "planned")} == {
        "noise_multiplier": first.noise_multiplier,
        "planned": first.planned_epsilon,
    }
    # beside them, dp_accounting's RDP values of each silo's Poisson-sampled Gaussian, by order
    assert len(data["rdp"]) == 2 and data["rdp"][0][0]["kind"] == "poisson_sampled"
    assert len(first.noise_multiplier) == 10 and abs(first.planned_epsilon[-1] - 3.0) < 0.01
    # what is read is what the file holds: changed there, the projection changes with it
    stored.write_text(
        json.dumps({"noise_multiplier": [s * 2 for s in first.noise_multiplier], "planned": [1.0] * 5})
    )
    remembered.RESULTS.clear()
    again = _projected(spec, tmp_path)
    assert again.noise_multiplier == [s * 2 for s in first.noise_multiplier]
    assert again.planned_epsilon == [1.0] * 5
    # another target is another key, calibrated afresh beside the first
    other = _projected(isrl_digits_spec(rounds=5, privacy={"epsilon": 1.0, "delta": 1e-5}), tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 2
    assert abs(other.planned_epsilon[-1] - 1.0) < 0.01
    assert all(a > b for a, b in zip(other.noise_multiplier, first.noise_multiplier, strict=True))


def test_a_run_from_a_stored_projection_equals_one_without(tmp_path):
    spec = isrl_digits_spec(rounds=5)
    plain = run(spec)
    run(spec, cache_dir=tmp_path)  # stores the projection
    remembered.RESULTS.clear()
    stored = run(spec, cache_dir=tmp_path)
    assert stored.privacy.noise_multiplier == plain.privacy.noise_multiplier
    assert stored.privacy.planned_epsilon == plain.privacy.planned_epsilon
    assert [r.metrics for r in stored.rounds] == [r.metrics for r in plain.rounds]
    assert stored.epsilon == plain.epsilon and abs(stored.epsilon - 3.0) < 0.01


def test_a_fresh_process_accounts_a_stored_runs_ledger_from_the_stored_rdp_values(tmp_path, monkeypatch):
    spec = isrl_digits_spec(rounds=5)
    plain = run(spec, cache_dir=tmp_path)  # stores the projection and its RDP values
    computed: list[tuple[float, ...]] = []

    class Counted(rdp._DpaRdp):
        """dp_accounting's RDP accountant, counting the orders it is asked to compute."""

        def __init__(self, *, orders):
            computed.append(tuple(orders))
            super().__init__(orders=orders)

    monkeypatch.setattr(rdp, "_DpaRdp", Counted)
    rdp_pruned.cache_clear()  # as a fresh process: no RDP value, curve or σ in memory
    remembered.RESULTS.clear()
    again = run(spec, cache_dir=tmp_path)
    assert computed == []
    assert again.epsilon == plain.epsilon and abs(again.epsilon - 3.0) < 0.01
    assert [r.epsilon for r in again.rounds] == [r.epsilon for r in plain.rounds]
    # a store without them (written before they were kept): the ledger asks dp_accounting again
    (stored,) = (tmp_path / "projections").glob("*.json")
    stored.write_text(json.dumps({k: v for k, v in json.loads(stored.read_text()).items() if k != "rdp"}))
    rdp_pruned.cache_clear()
    remembered.RESULTS.clear()
    assert run(spec, cache_dir=tmp_path).epsilon == plain.epsilon
    assert len(computed) > 0
    rdp_pruned.cache_clear()
    monkeypatch.undo()
    afresh = run(spec)  # no store: every value from dp_accounting
    assert [r.epsilon for r in afresh.rounds] == [r.epsilon for r in plain.rounds]


def test_protected_runs_neither_read_nor_write_a_store(tmp_path):
    spec = isrl_digits_spec(rounds=5, privacy={"epsilon": 3.0, "delta": 1e-5, "noise_source": "entropy"})
    run(spec, cache_dir=tmp_path)
    assert not (tmp_path / "projections").exists()
    run(isrl_digits_spec(rounds=5), cache_dir=tmp_path)
    assert len(list((tmp_path / "projections").glob("*.json"))) == 1


def test_a_stored_projection_that_does_not_fit_the_run_is_ignored(tmp_path):
    spec = isrl_digits_spec(rounds=5)
    first = _projected(spec, tmp_path)
    (stored,) = tmp_path.glob("*.json")
    for bad in (
        {"noise_multiplier": first.noise_multiplier, "planned": [1.0] * 4},  # a round short
        {"noise_multiplier": first.noise_multiplier[:3], "planned": [1.0] * 5},  # 3 silos of 10
        {"noise_multiplier": [0.0] * 10, "planned": [1.0] * 5},
        {"noise_multiplier": True, "planned": [1.0] * 5},
        {"planned": [1.0] * 5},
    ):
        stored.write_text(json.dumps(bad))
        remembered.RESULTS.clear()
        again = _projected(spec, tmp_path)
        assert again.noise_multiplier == first.noise_multiplier
        assert again.planned_epsilon == first.planned_epsilon


def test_only_this_packages_algorithms_and_accountants_are_stored():
    class Plugin(ISRLMinibatchSGD):  # defined outside dpfl: its source is not in the key
        pass

    assert storable(ISRLMinibatchSGD, RDPAccountant)
    assert not storable(Plugin, RDPAccountant)
    assert not storable(ISRLMinibatchSGD, type("PluginAccountant", (RDPAccountant,), {}))
