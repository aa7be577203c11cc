"""The pruned RDP ε equals the full accountant's, from few orders, for the events it admits."""

from __future__ import annotations

import numpy as np
import pytest

import dpfl.privacy.accountants.rdp_pruned as rdp_pruned
from dpfl.errors import AccountingError
from dpfl.privacy.accountants import DEFAULT_ORDERS, RDPAccountant
from dpfl.privacy.accountants.rdp import event_rdp
from dpfl.privacy.accountants.rdp_pruned import (
    applies,
    cache_clear,
    kl_floor,
    prunable,
    pruned_epsilon,
    pruned_epsilon_curve,
    pruned_epsilon_curves,
)
from dpfl.privacy.calibration import epsilon, sgd_event
from dpfl.privacy.events import (
    ComposedEvent,
    GaussianEvent,
    GroupEvent,
    LaplaceEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    VoteEvent,
)
from dpfl.privacy.ledger import Ledger


def _random_events(n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        q = float(10 ** rng.uniform(-3, 0))
        sigma = float(10 ** rng.uniform(-0.5, 1.3))
        steps = int(10 ** rng.uniform(0, 4))
        delta = float(10 ** rng.uniform(-9, -3))
        yield sgd_event(noise_multiplier=sigma, sampling_rate=q, steps=steps), delta


@pytest.mark.parametrize("conversion", ["tight", "classic"])
def test_it_equals_the_full_accountant_on_random_dp_sgd_schedules(conversion):
    for event, delta in _random_events(40, seed=7 if conversion == "tight" else 8):
        try:
            full = epsilon(event, delta=delta, conversion=conversion)
        except AccountingError:
            with pytest.raises(AccountingError):
                pruned_epsilon(event, delta=delta, orders=DEFAULT_ORDERS, conversion=conversion)
            continue
        eps, order = pruned_epsilon(event, delta=delta, orders=DEFAULT_ORDERS, conversion=conversion)
        assert eps == pytest.approx(full, rel=1e-12, abs=1e-15), (event, delta)
        assert order in DEFAULT_ORDERS


def test_it_equals_the_full_accountant_on_compositions_and_parallel_releases():
    sampled = PoissonSampledEvent(0.03, GaussianEvent(0.9))
    events = [
        ComposedEvent((SelfComposedEvent(sampled, 200), SelfComposedEvent(GaussianEvent(4.0), 3))),
        ParallelEvent((SelfComposedEvent(sampled, 500), SelfComposedEvent(GaussianEvent(2.0), 10))),
        GaussianEvent(50.0),  # enough noise for the KL test to give ε = 0 at the smallest order
    ]
    for event in events:
        for delta in (1e-5, 1e-8):
            eps, _ = pruned_epsilon(event, delta=delta, orders=DEFAULT_ORDERS)
            assert eps == pytest.approx(epsilon(event, delta=delta), rel=1e-12, abs=1e-15)
    assert pruned_epsilon(GaussianEvent(1e5), delta=1e-5, orders=DEFAULT_ORDERS)[0] == 0.0


def test_it_computes_few_orders_and_fewer_from_a_nearby_start(monkeypatch):
    computed: list[int] = []
    real = rdp_pruned.event_rdp

    def counting(event, orders):
        computed.append(len(orders))
        return real(event, orders)

    monkeypatch.setattr(rdp_pruned, "event_rdp", counting)
    event = sgd_event(noise_multiplier=1.05, sampling_rate=0.05, steps=50)
    eps, order = pruned_epsilon(event, delta=1e-5, orders=DEFAULT_ORDERS)
    cold = sum(computed)
    computed.clear()
    nearby = sgd_event(noise_multiplier=1.06, sampling_rate=0.051, steps=50)
    pruned_epsilon(nearby, delta=1e-5, orders=DEFAULT_ORDERS, near=order)
    warm = sum(computed)
    assert eps == pytest.approx(epsilon(event, delta=1e-5), rel=1e-12)
    assert cold <= 40 and warm <= 15, (cold, warm)  # of 161 orders
    assert warm < cold


def test_only_divergences_of_fixed_distributions_are_pruned():
    gaussian = GaussianEvent(1.0)
    assert prunable(SelfComposedEvent(PoissonSampledEvent(0.1, gaussian), 5))
    assert prunable(ParallelEvent((gaussian, ComposedEvent((gaussian, gaussian)))))
    # group privacy's curve is a bound (3^c·D at 2^c·α), not a divergence: its shape is not assumed
    assert not prunable(GroupEvent(gaussian, 4))
    assert not prunable(ComposedEvent((gaussian, GroupEvent(gaussian, 2))))
    assert not prunable(PoissonSampledEvent(0.1, LaplaceEvent(1.0)))


def test_orders_must_increase():
    with pytest.raises(ValueError, match="increasing"):
        pruned_epsilon(GaussianEvent(1.0), delta=1e-5, orders=(3.0, 2.0))


@pytest.mark.parametrize("seed", range(6))
def test_the_curve_over_rounds_equals_the_full_accountants(seed):
    rng = np.random.default_rng(seed)
    events = [
        PoissonSampledEvent(
            float(10 ** rng.uniform(-3, -0.5)), GaussianEvent(float(10 ** rng.uniform(-0.3, 1)))
        )
        for _ in range(int(rng.integers(1, 4)))
    ]
    rounds = int(rng.integers(1, 300))
    counts = rng.integers(0, 3, size=(rounds, len(events))).astype(float)
    counts[: int(rng.integers(0, 5))] = 0  # rounds before the first release: ε = 0
    delta = float(10 ** rng.uniform(-8, -4))
    full = RDPAccountant().epsilon_curve(events, counts, delta=delta)
    pruned = pruned_epsilon_curve(events, counts, delta=delta, orders=DEFAULT_ORDERS)
    np.testing.assert_allclose(pruned, full, rtol=1e-12, atol=1e-15)


def test_the_ledger_takes_the_pruned_curve_only_where_it_applies():
    ledger = Ledger()
    for r in range(1, 41):
        ledger.record(r, "silo-0", PoissonSampledEvent(0.05, GaussianEvent(1.1)))
        ledger.record(r, "silo-1", PoissonSampledEvent(0.02, GaussianEvent(0.9)))
    by_round = ledger.epsilon_by_round(delta=1e-5)
    reference = [
        RDPAccountant().epsilon_curve(
            [PoissonSampledEvent(q, GaussianEvent(s))], np.ones((40, 1)), delta=1e-5
        )
        for q, s in ((0.05, 1.1), (0.02, 0.9))
    ]
    np.testing.assert_allclose(by_round, np.maximum(*reference), rtol=1e-12)
    assert applies("rdp", [PoissonSampledEvent(0.05, GaussianEvent(1.1))])
    assert not applies("pate", [GaussianEvent(1.0)])  # data-dependent votes: not divergences
    assert not applies("pld", [GaussianEvent(1.0)])
    assert not applies("rdp", [VoteEvent(noise_std=10.0, sensitivity=1.0)])


def test_a_start_where_every_order_fails_to_converge_still_finds_the_minimum():
    # dp_accounting gives no value (inf) at orders near 1 for this (q, σ): a search that starts
    # there has no finite ε yet, and every other order must still be looked at
    event = sgd_event(noise_multiplier=1.0, sampling_rate=0.4476, steps=20)
    eps, order = pruned_epsilon(event, delta=1e-5, orders=DEFAULT_ORDERS, near=1.1)
    assert eps == pytest.approx(epsilon(event, delta=1e-5), rel=1e-12)
    assert order == 2.4


@pytest.mark.parametrize(
    ("event", "delta", "near"),
    [
        # dp_accounting's fractional orders are an upper bound, not a divergence: rdp(1.9) >
        # rdp(2) here, and secants through them once ruled out the minimum at order 3
        (sgd_event(noise_multiplier=10.0, sampling_rate=0.3, steps=10_000), 1e-5, None),
        (sgd_event(noise_multiplier=5.0, sampling_rate=0.45, steps=1000), 1e-5, None),
        (SelfComposedEvent(PoissonSampledEvent(0.4596, GaussianEvent(497.07)), 96_230), 4.43e-8, 4.3),
        # the KL test gives ε = 0 at an order the search had no reason to compute
        (PoissonSampledEvent(0.03, GaussianEvent(1.0)), 0.04, None),
        (SelfComposedEvent(PoissonSampledEvent(0.001, GaussianEvent(0.3)), 11), 0.1, None),
    ],
)
def test_cases_a_fuzzer_found_equal_the_full_accountant(event, delta, near):
    eps, _ = pruned_epsilon(event, delta=delta, orders=DEFAULT_ORDERS, near=near)
    assert eps == pytest.approx(epsilon(event, delta=delta), rel=1e-12, abs=1e-15)


def test_the_kl_floor_is_below_every_exact_order():
    rng = np.random.default_rng(3)
    integers = tuple(float(a) for a in DEFAULT_ORDERS if a == int(a))
    for _ in range(30):
        event = sgd_event(
            noise_multiplier=float(10 ** rng.uniform(-1, 2)),
            sampling_rate=float(10 ** rng.uniform(-4, 0)),
            steps=int(10 ** rng.uniform(0, 3)),
        )
        assert kl_floor(event) <= event_rdp(event, integers).min() * (1 + 1e-9)


@pytest.fixture
def searches(monkeypatch) -> list[int]:
    """Counts the branch-and-bound searches (`rdp_pruned._minimum` calls, each still run) and
    their rows."""
    rows: list[int] = []
    real = rdp_pruned._minimum

    def counted(*args, **kwargs):
        rows.append(kwargs["rows"])
        return real(*args, **kwargs)

    monkeypatch.setattr(rdp_pruned, "_minimum", counted)
    return rows


def _silos(seed: int, num: int) -> list[tuple[list[PoissonSampledEvent], np.ndarray]]:
    """Returns `num` silo histories of one Poisson-sampled Gaussian step a round, each its own q and σ."""
    rng = np.random.default_rng(seed)
    rounds = int(rng.integers(10, 120))
    return [
        (
            [PoissonSampledEvent(float(rng.uniform(0.02, 0.1)), GaussianEvent(float(rng.uniform(0.8, 2.0))))],
            np.ones((rounds, 1)),
        )
        for _ in range(num)
    ]


@pytest.mark.parametrize("seed", range(3))
def test_histories_searched_together_give_each_ones_curve(seed, searches):
    histories = _silos(seed, 8)
    cache_clear()
    together = pruned_epsilon_curves(histories, delta=1e-5, orders=DEFAULT_ORDERS)
    assert searches == [8 * len(histories[0][1])]  # one search, a row per round per silo
    cache_clear()
    alone = [pruned_epsilon_curve(e, c, delta=1e-5, orders=DEFAULT_ORDERS) for e, c in histories]
    assert len(searches) == 1 + len(histories)
    for (events, counts), curve, own in zip(histories, together, alone, strict=True):
        np.testing.assert_allclose(curve, own, rtol=1e-9, atol=0)
        full = RDPAccountant().epsilon_curve(events, counts, delta=1e-5)
        np.testing.assert_allclose(curve, full, rtol=1e-12, atol=1e-15)


def test_a_ledgers_silos_are_accounted_in_one_search(searches):
    ledger = Ledger()
    histories = _silos(7, 25)
    for silo, (events, counts) in enumerate(histories):
        for r in range(1, len(counts) + 1):
            ledger.record(r, f"silo-{silo}", events[0])
    cache_clear()
    curves = ledger.epsilon_curves(delta=1e-5)
    assert len(searches) == 1  # was one per silo
    for silo, (events, counts) in enumerate(histories):
        full = RDPAccountant().epsilon_curve(events, counts, delta=1e-5)
        np.testing.assert_allclose(curves[f"silo-{silo}"], full, rtol=1e-12, atol=1e-15)
    # remembered each under its own history: the projection's curves serve the run's records
    assert (
        rdp_pruned.remembered_epsilon_curve(
            histories[3][0], histories[3][1], delta=1e-5, orders=DEFAULT_ORDERS
        )
        is not None
    )
