"""Every way the ledger reads a history's ε agrees with dp-accounting's own composition, over random
ledgers: mixed events, parties whose first release comes at different rounds, parties that share a
history (accounted once), ε after every round or after a few (fresh, or read from remembered
curves). Issue 38: one way to compute ε, with caches in front of it."""

from __future__ import annotations

import functools

import dp_accounting
import numpy as np
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfl.privacy.accountants import rdp_pruned
from dpfl.privacy.accountants.rdp import DEFAULT_ORDERS
from dpfl.privacy.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent, to_dp_accounting
from dpfl.privacy.ledger import Ledger

DELTA = 1e-5
EVENTS = [
    GaussianEvent(1.5),
    GaussianEvent(4.0),
    PoissonSampledEvent(0.01, GaussianEvent(0.9)),
    PoissonSampledEvent(0.1, GaussianEvent(1.2)),
    PoissonSampledEvent(0.5, GaussianEvent(2.0)),
    SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(1.0)), 3),
]


@st.composite
def ledgers(draw) -> Ledger:
    rounds = draw(st.integers(1, 12))
    own = draw(st.integers(1, 3))
    histories = []
    for _ in range(own):
        first = draw(st.integers(1, rounds))
        history = []
        for r in range(first, rounds + 1):
            released = draw(st.lists(st.sampled_from(range(len(EVENTS))), min_size=0, max_size=2))
            if r == first and not released:
                released = [draw(st.sampled_from(range(len(EVENTS))))]
            history += [(r, EVENTS[i]) for i in released]
        histories.append(history)
    # parties that share another's history: the ledger accounts each distinct history once
    copies = draw(st.lists(st.integers(0, own - 1), max_size=2))
    ledger = Ledger()
    for p, history in enumerate([*histories, *(histories[i] for i in copies)]):
        for r, event in history:
            ledger.record(r, f"party-{p}", event)
    return ledger


@functools.cache
def event_rdp(event) -> np.ndarray:
    """Returns dp-accounting's RDP curve of one release at our orders (what its accountant adds per
    release: its composition is the sum of these)."""
    accountant = dp_accounting.rdp.RdpAccountant(orders=list(DEFAULT_ORDERS))
    accountant.compose(to_dp_accounting(event))
    return accountant._rdp.copy()


def reference(ledger: Ledger, party: str, after: int) -> float:
    """Returns dp-accounting's ε of the party's releases up to round `after` (0 before any)."""
    released = [e.event for e in ledger.entries if e.party == party and e.round <= after]
    if not released:
        return 0.0
    rdp = np.sum([event_rdp(event) for event in released], axis=0)
    return compute_epsilon(list(DEFAULT_ORDERS), rdp, DELTA)[0]


@settings(max_examples=20, deadline=None, derandomize=True)
@given(ledgers(), st.data())
def test_every_path_to_a_historys_epsilon_equals_dp_accountings_composition(ledger, data):
    rounds = ledger.rounds
    after = sorted(data.draw(st.sets(st.sampled_from(rounds), min_size=1)))
    expected = {p: np.array([reference(ledger, p, r) for r in rounds]) for p in ledger.parties}

    rdp_pruned._CURVES.clear()  # no remembered history: the `after` rounds are accounted afresh
    fresh_after = ledger.epsilon_curves(delta=DELTA, after=after)  # a merged history, accounted
    full = ledger.epsilon_curves(delta=DELTA)
    remembered_after = ledger.epsilon_curves(delta=DELTA, after=after)  # read from the full curves
    at = [rounds.index(r) for r in after]
    for party, want in expected.items():
        np.testing.assert_allclose(full[party], want, rtol=1e-9, atol=1e-12, err_msg=party)
        np.testing.assert_allclose(fresh_after[party], want[at], rtol=1e-9, atol=1e-12, err_msg=party)
        np.testing.assert_allclose(remembered_after[party], want[at], rtol=1e-9, atol=1e-12, err_msg=party)
    run = ledger.epsilon_by_round(delta=DELTA, after=after)
    np.testing.assert_allclose(run, np.max([expected[p][at] for p in expected], axis=0), rtol=1e-9)


def test_a_history_past_the_pruned_length_takes_the_same_epsilon():
    # over 300 rounds the ledger accounts whole curves rather than the pruned search
    rng = np.random.default_rng(7)
    ledger = Ledger()
    for r in range(1, 321):
        for p, first in enumerate((1, 40)):
            if r >= first:
                ledger.record(r, f"party-{p}", EVENTS[int(rng.integers(len(EVENTS)))])
    after = [1, 39, 40, 200, 320]
    rdp_pruned._CURVES.clear()
    fresh_after = ledger.epsilon_curves(delta=DELTA, after=after)
    full = ledger.epsilon_curves(delta=DELTA)
    for party in ledger.parties:
        want = np.array([reference(ledger, party, r) for r in after])
        np.testing.assert_allclose(full[party][[r - 1 for r in after]], want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(fresh_after[party], want, rtol=1e-9, atol=1e-12)
    assert fresh_after["party-1"][:2].tolist() == [0.0, 0.0]
