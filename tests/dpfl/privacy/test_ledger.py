"""The ledger: per-party cumulative ε, the run's ε, JSON, and agreement with dp_accounting."""

from __future__ import annotations

import json

import dp_accounting
import numpy as np
import pytest

from dpfl.errors import UnsupportedEventError
from dpfl.privacy.accountants import make_accountant, rdp, rdp_pruned
from dpfl.privacy.events import (
    ComposedEvent,
    GaussianEvent,
    GroupEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    VoteEvent,
)
from dpfl.privacy.ledger import Ledger


def _isrl_like_ledger(rounds=20):
    ledger = Ledger()
    for r in range(1, rounds + 1):
        for silo, q in enumerate((0.05, 0.1, 0.1)):
            ledger.record(r, f"silo-{silo}", PoissonSampledEvent(q, GaussianEvent(1.1)))
    return ledger


def test_curve_equals_an_independent_dp_accounting_computation():
    ledger = _isrl_like_ledger()
    curves = ledger.epsilon_curves(delta=1e-5)
    for r in (1, 7, 20):
        acc = dp_accounting.rdp.RdpAccountant()
        acc.compose(dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.1)), r)
        assert curves["silo-1"][r - 1] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-6)


def test_run_epsilon_is_the_least_private_party():
    ledger = _isrl_like_ledger()
    curves = ledger.epsilon_curves(delta=1e-5)
    assert curves["silo-0"][-1] < curves["silo-1"][-1] == curves["silo-2"][-1]
    assert ledger.epsilon(delta=1e-5) == curves["silo-1"][-1]
    assert np.all(np.diff(ledger.epsilon_by_round(delta=1e-5)) > 0)


def test_a_party_that_skips_a_round_keeps_its_epsilon():
    ledger = Ledger()
    ledger.record(1, "a", GaussianEvent(5.0))
    ledger.record(2, "b", GaussianEvent(5.0))
    ledger.record(3, "a", GaussianEvent(5.0))
    curves = ledger.epsilon_curves(delta=1e-5)
    assert ledger.rounds == [1, 2, 3]
    assert curves["a"][0] == curves["a"][1] == pytest.approx(0.7945, rel=1e-3)
    assert curves["b"][0] == 0


@pytest.mark.parametrize("accountant", ["rdp", "pld", "gdp", "pate"])
def test_curve_last_round_equals_composing_everything(accountant):
    ledger = Ledger()
    for r in range(1, 6):
        ledger.record_round(r, {"server": [VoteEvent(noise_std=3.0, counts=(9, 1, 0)), GaussianEvent(4.0)]})
    acc = make_accountant(accountant)
    for e in ledger.entries:
        acc.compose(e.event)
    assert ledger.epsilon(delta=1e-5, accountant=accountant) == pytest.approx(acc.epsilon(1e-5), rel=1e-9)


def test_json_round_trip_keeps_epsilon():
    ledger = _isrl_like_ledger(5)
    back = Ledger.from_json(json.loads(json.dumps(ledger.to_json())))
    assert back.entries == ledger.entries
    assert back.epsilon(delta=1e-5) == ledger.epsilon(delta=1e-5)


def test_empty_ledger_has_zero_epsilon():
    assert Ledger().epsilon(delta=1e-5) == 0.0


@pytest.mark.parametrize("accountant", ["rdp", "pld", "gdp"])
def test_unsupported_event_in_a_ledger_is_named(accountant):
    ledger = Ledger()
    ledger.record(1, "silo-0", GaussianEvent(2.0))
    ledger.record(2, "silo-0", GroupEvent(PoissonSampledEvent(0.1, LaplaceEvent(1.0)), 2))
    with pytest.raises(UnsupportedEventError, match=f"accountant '{accountant}' cannot account"):
        ledger.epsilon(delta=1e-5, accountant=accountant)


def test_party_events_fold_repeats_and_keep_epsilon():
    ledger = _isrl_like_ledger(30)
    folded = ledger.party_events()
    assert folded["silo-0"] == ComposedEvent(
        (SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(1.1)), 30),)
    )
    for party, event in folded.items():
        acc = make_accountant("rdp")
        acc.compose(event)
        assert acc.epsilon(1e-5) == pytest.approx(ledger.epsilon_curves(delta=1e-5)[party][-1], rel=1e-12)


@pytest.mark.parametrize("accountant", ["rdp", "pld", "gdp"])
def test_epsilon_after_some_rounds_is_the_full_curve_read_there(accountant):
    ledger = _isrl_like_ledger(12)
    ledger.record(14, "late", GaussianEvent(3.0))  # a party that starts late; round 13 has no release
    full = ledger.epsilon_curves(delta=1e-5, accountant=accountant)
    rounds = ledger.rounds
    after = [2, 5, 13, 14, 20]  # 13: carried from 12; 20: after the last release
    read = {r: rounds.index(max(x for x in rounds if x <= r)) for r in after}
    some = ledger.epsilon_curves(delta=1e-5, accountant=accountant, after=after)
    for party, curve in full.items():
        expected = [curve[read[r]] for r in after]
        assert some[party] == pytest.approx(expected, rel=1e-6), party
    assert some["late"][:3].tolist() == [0.0, 0.0, 0.0]  # no release yet
    by_round = ledger.epsilon_by_round(delta=1e-5, accountant=accountant, after=after)
    assert by_round.tolist() == np.max(np.stack(list(some.values())), axis=0).tolist()
    assert ledger.epsilon(delta=1e-5, accountant=accountant) == pytest.approx(
        ledger.epsilon_by_round(delta=1e-5, accountant=accountant)[-1], rel=1e-9
    )


def test_epsilon_after_refuses_rounds_out_of_order():
    with pytest.raises(ValueError, match="`after` must be increasing"):
        _isrl_like_ledger(3).epsilon_curves(delta=1e-5, after=[3, 2])


def test_epsilon_after_takes_any_iterable_and_keeps_every_party():
    ledger = Ledger()
    ledger.record(1, "a", GaussianEvent(1.0))
    ledger.record(3, "a", GaussianEvent(1.0))
    ledger.record(5, "late", GaussianEvent(1.0))  # releases only after the asked rounds
    some = ledger.epsilon_curves(delta=1e-5, after=iter([1, 2]))
    assert set(some) == {"a", "late"} and some["late"].tolist() == [0.0, 0.0]
    assert some["a"][0] == some["a"][1] > 0
    assert ledger.epsilon_by_round(delta=1e-5, after=iter([1, 2])).tolist() == some["a"].tolist()
    # asked only before any release: nothing merged, 0 for every party
    assert {p: c.tolist() for p, c in ledger.epsilon_curves(delta=1e-5, after=[0]).items()} == {
        "a": [0.0],
        "late": [0.0],
    }


def test_epsilon_after_some_rounds_reads_a_remembered_full_history_without_accounting_again():
    # A run's projection accounts every round of its plan; its final ledger, the same history,
    # then asks for ε after its records' rounds and after its last.
    ledger = _isrl_like_ledger(30)
    ledger.record(32, "late", GaussianEvent(3.0))
    after = [3, 10, 31, 32]
    rdp_pruned.cache_clear()
    full = ledger.epsilon_curves(delta=1e-5)
    computed = rdp.event_rdp.cache_info().misses
    read = ledger.epsilon_curves(delta=1e-5, after=after)
    assert rdp.event_rdp.cache_info().misses == computed  # no RDP value computed for it
    with pytest.raises(ValueError, match="`after` must be increasing"):  # remembered or not
        ledger.epsilon_curves(delta=1e-5, after=[10, 3])
    rdp_pruned.cache_clear()
    fresh = ledger.epsilon_curves(delta=1e-5, after=after)  # nothing remembered: the asked rounds alone
    rounds = ledger.rounds
    for party, curve in full.items():
        expected = [curve[rounds.index(max(x for x in rounds if x <= r))] for r in after]
        assert read[party].tolist() == expected, party
        assert read[party] == pytest.approx(fresh[party], rel=1e-9), party
    assert read["late"].tolist()[:3] == [0.0, 0.0, 0.0]
    assert ledger.epsilon(delta=1e-5) == full["silo-1"][-1]
    # another δ is another question: accounted afresh
    assert ledger.epsilon_curves(delta=1e-6, after=after)["silo-1"][-1] > read["silo-1"][-1]


def test_a_party_yet_to_release_has_zero_epsilon_after_a_round_whether_or_not_its_curve_is_remembered():
    # Under the classic conversion a full curve's rows before a party's first release hold the
    # conversion's ε of nothing, log(1/δ)/(α − 1) > 0; ε after a round the party had not yet
    # released in is 0, read from remembered curves as when accounted afresh.
    ledger = Ledger()
    for r in range(1, 11):
        ledger.record(r, "a", GaussianEvent(2.0))
    ledger.record(8, "late", GaussianEvent(2.0))
    asked = {"delta": 1e-5, "conversion": "classic", "after": [3, 5, 9]}
    rdp_pruned.cache_clear()
    fresh = ledger.epsilon_curves(**asked)
    ledger.epsilon_curves(delta=1e-5, conversion="classic")
    read = ledger.epsilon_curves(**asked)
    assert fresh["late"].tolist()[:2] == read["late"].tolist()[:2] == [0.0, 0.0]
    assert read["late"][2] == pytest.approx(fresh["late"][2], rel=1e-9) and read["late"][2] > 0
    assert read["a"] == pytest.approx(fresh["a"], rel=1e-9)
