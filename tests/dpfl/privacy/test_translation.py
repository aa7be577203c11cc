"""dp-accounting's events translated into ours (`dpfl.privacy.translation`): exact, or refused."""

from __future__ import annotations

import dp_accounting
import pytest

from dpfl.errors import SpecError
from dpfl.privacy.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    to_dp_accounting,
)
from dpfl.privacy.ledger import Ledger
from dpfl.privacy.translation import from_dp_accounting

DPA_STEPS = dp_accounting.SelfComposedDpEvent(
    dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.3)), 150
)


def test_each_translatable_event_round_trips_through_to_dp_accounting():
    ours = from_dp_accounting(
        dp_accounting.ComposedDpEvent(
            [DPA_STEPS, dp_accounting.LaplaceDpEvent(2.0), dp_accounting.NoOpDpEvent()]
        )
    )
    assert ours == ComposedEvent(
        (SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.3)), 150), LaplaceEvent(2.0))
    )
    assert to_dp_accounting(ours.events[0]) == DPA_STEPS


def test_the_translated_history_has_dp_accountings_rdp_epsilon():
    book = Ledger()
    accountant = dp_accounting.rdp.RdpAccountant()
    for r in range(1, 4):
        book.record(r, "client_0", from_dp_accounting(DPA_STEPS))
        accountant.compose(DPA_STEPS)
    assert book.epsilon(delta=1e-5, accountant="rdp") == pytest.approx(accountant.get_epsilon(1e-5), abs=1e-9)


def test_sampling_without_replacement_has_dp_accountings_replace_one_rdp_epsilon():
    """A fixed-size sample without replacement (Flower's client sampling) is accounted by
    dp-accounting under its only relation, replace-one."""
    dpa = dp_accounting.SampledWithoutReplacementDpEvent(20, 5, dp_accounting.GaussianDpEvent(0.8))
    ours = from_dp_accounting(dpa)
    assert ours == SampledWithoutReplacementEvent(20, 5, GaussianEvent(0.8))
    assert to_dp_accounting(ours) == dpa
    book = Ledger()
    for r in range(1, 4):
        book.record(r, "server", ours)
    accountant = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    accountant.compose(dpa, 3)
    assert book.epsilon(delta=1e-5, accountant="rdp") == pytest.approx(accountant.get_epsilon(1e-5), abs=1e-6)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            dp_accounting.NonPrivateDpEvent(),
            "`event` is a NonPrivateDpEvent: a release without privacy has no ε to account.",
        ),
        (
            dp_accounting.SampledWithReplacementDpEvent(100, 10, dp_accounting.GaussianDpEvent(1.0)),
            "`event` is a SampledWithReplacementDpEvent, which has no exact counterpart in the dpfl "
            "ledger; log it as Gaussian, Laplace, Poisson-sampled, sampled-without-replacement, "
            "self-composed or composed events.",
        ),
    ],
)
def test_an_event_without_an_exact_counterpart_is_refused_naming_it(event, message):
    with pytest.raises(SpecError) as caught:
        from_dp_accounting(event)
    assert str(caught.value) == message


def test_a_nested_refusal_names_the_path():
    with pytest.raises(SpecError) as caught:
        from_dp_accounting(dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.NonPrivateDpEvent()))
    assert caught.value.field == "event.event"
