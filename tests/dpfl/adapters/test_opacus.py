"""The Opacus adapter on real Opacus accountants, logged to a file: each round logs the steps taken
since the last, as dp-accounting's sampled Gaussian events; a reset history is refused."""

from __future__ import annotations

import json

import dp_accounting
import pytest
from opacus.accountants import PRVAccountant, RDPAccountant

from dpfl import track
from dpfl.adapters.opacus import OpacusLedger, history_events
from dpfl.errors import SpecError
from dpfl.privacy.events import (
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    to_dp_accounting,
    to_json,
)

RUN = {"algorithm": "opacus dp-sgd", "dataset": "digits", "notion": "record", "delta": 1e-5}


def steps(accountant, count: int, *, noise_multiplier: float, sample_rate: float) -> None:
    for _ in range(count):
        accountant.step(noise_multiplier=noise_multiplier, sample_rate=sample_rate)


def test_each_round_logs_the_steps_since_the_last_and_opacus_own_epsilon(tmp_path):
    a, b = RDPAccountant(), PRVAccountant()
    path = tmp_path / "run.json"
    with track.start_run(**RUN, path=path) as run:
        ledger = OpacusLedger(run)
        steps(a, 4, noise_multiplier=1.1, sample_rate=0.05)
        steps(b, 3, noise_multiplier=0.9, sample_rate=0.1)
        first = ledger.log_round(1, {"client_0": a, "client_1": b}, accuracy=0.5)
        # client_0 changes σ mid-round (Opacus appends an entry); client_1 takes no step
        steps(a, 2, noise_multiplier=1.1, sample_rate=0.05)
        steps(a, 3, noise_multiplier=1.5, sample_rate=0.05)
        second = ledger.log_round(2, {"client_0": a}, accuracy=0.6)
    sampled = PoissonSampledEvent(0.05, GaussianEvent(1.1))
    assert first["events"] == {
        "client_0": [to_json(SelfComposedEvent(sampled, 4))],
        "client_1": [to_json(SelfComposedEvent(PoissonSampledEvent(0.1, GaussianEvent(0.9)), 3))],
    }
    assert second["events"] == {
        "client_0": [
            to_json(SelfComposedEvent(sampled, 2)),
            to_json(SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(1.5)), 3)),
        ]
    }
    assert a.history == [(1.1, 0.05, 6), (1.5, 0.05, 3)]  # as Opacus merged them
    # the reported ε is the larger of the two engines' own (RDP and PRV) at the run's δ, client_1's
    # counted though it sat the round out
    assert second["reported_epsilon"] == max(a.get_epsilon(1e-5), b.get_epsilon(1e-5))
    assert json.loads(path.read_text())["end"] == {"status": "succeeded"}


def test_events_compose_to_opacus_rdp_history_in_dp_accounting():
    """The events of a history are the dp-accounting composition of Opacus's RDP accountant: the
    same ε (to dp-accounting's and Opacus's different α grids, 2e-3 as in test_accountants)."""
    a = RDPAccountant()
    steps(a, 30, noise_multiplier=1.0, sample_rate=0.02)
    steps(a, 10, noise_multiplier=2.0, sample_rate=1.0)
    events = history_events(a.history)
    assert events[1] == SelfComposedEvent(GaussianEvent(2.0), 10)  # q = 1: nothing to amplify
    ours = dp_accounting.rdp.RdpAccountant()
    for event in events:
        ours.compose(to_dp_accounting(event))
    assert ours.get_epsilon(1e-5) == pytest.approx(a.get_epsilon(1e-5), rel=2e-3)


def test_a_new_engine_for_a_client_logs_its_whole_history(tmp_path):
    with track.start_run(**RUN, path=tmp_path / "run.json") as run:
        ledger = OpacusLedger(run, report_epsilon=False)
        for r, count in ((1, 5), (2, 2)):  # a fresh accountant each round, as some FL loops make
            fresh = RDPAccountant()
            steps(fresh, count, noise_multiplier=1.2, sample_rate=0.1)
            logged = ledger.log_round(r, {"client_0": fresh})
            assert logged["events"]["client_0"][0]["count"] == count
            assert "reported_epsilon" not in logged


def test_a_reset_history_or_a_step_without_noise_is_refused_naming_the_client(tmp_path):
    a = RDPAccountant()
    with track.start_run(**RUN, path=tmp_path / "run.json") as run:
        ledger = OpacusLedger(run)
        steps(a, 3, noise_multiplier=1.0, sample_rate=0.1)
        ledger.log_round(1, {"client_0": a})
        a.history = [(1.0, 0.1, 1)]
        with pytest.raises(SpecError) as reset:
            ledger.log_round(2, {"client_0": a})
        assert reset.value.field == "engines.client_0"
        assert "does not extend the one logged before" in reset.value.reason
        silent = RDPAccountant()
        steps(silent, 2, noise_multiplier=0.0, sample_rate=0.1)
        with pytest.raises(SpecError) as noiseless:
            ledger.log_round(2, {"client_1": silent})
        assert str(noiseless.value) == (
            "`engines.client_1.0` took 2 steps with noise_multiplier 0.0: a release without noise has no "
            "finite ε; train this client with noise_multiplier > 0."
        )
        with pytest.raises(SpecError, match="must be an Opacus PrivacyEngine or accountant"):
            ledger.log_round(2, {"client_2": object()})
        assert [r["round"] for r in run.rounds] == [1]  # nothing of a refused round is written
