"""Events: lossless JSON, mapping to dp_accounting, and messages naming bad fields."""

from __future__ import annotations

import json

import dp_accounting
import pytest

from dpfl.errors import SpecError
from dpfl.privacy.events import (
    ApproxDPEvent,
    ComposedEvent,
    GaussianEvent,
    GDPEvent,
    GroupEvent,
    LaplaceEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffleEvent,
    VoteEvent,
    event_kinds,
    from_json,
    to_dp_accounting,
    to_json,
)

EXAMPLES = [
    GaussianEvent(1.1),
    LaplaceEvent(2.0),
    GDPEvent(0.5),
    PoissonSampledEvent(0.01, GaussianEvent(1.1)),
    SelfComposedEvent(PoissonSampledEvent(0.5, GaussianEvent(3.0)), 100),
    ComposedEvent((GaussianEvent(1.0), GDPEvent(0.3))),
    VoteEvent(noise_std=25.0),
    VoteEvent(noise_std=40.0, sensitivity=2**0.5, counts=(3.0, 1.0, 0.0)),
    ShuffleEvent(local_epsilon=1.5, num_users=1000),
    GroupEvent(SelfComposedEvent(GaussianEvent(5.0), 10), 32),
    ParallelEvent((GaussianEvent(2.0), PoissonSampledEvent(0.1, GaussianEvent(1.0)))),
    ApproxDPEvent(epsilon=1.5, delta=1e-6),
    SampledWithoutReplacementEvent(100, 10, GaussianEvent(0.5)),
]


def test_every_kind_has_an_example():
    assert sorted({e.kind for e in EXAMPLES} | {"self_composed", "composed"}) == event_kinds()


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.kind)
def test_json_round_trip_is_lossless(event):
    text = json.dumps(to_json(event))
    back = from_json(json.loads(text))
    assert back == event
    assert hash(back) == hash(event)


def test_json_shape_is_stable():
    assert to_json(PoissonSampledEvent(0.1, GaussianEvent(2.0))) == {
        "kind": "poisson_sampled",
        "sampling_rate": 0.1,
        "event": {"kind": "gaussian", "noise_multiplier": 2.0},
    }


def test_maps_to_dp_accounting_where_an_event_exists():
    assert to_dp_accounting(SelfComposedEvent(PoissonSampledEvent(0.1, GaussianEvent(2.0)), 5)) == (
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(2.0)), 5
        )
    )
    assert to_dp_accounting(GDPEvent(0.5)) == dp_accounting.GaussianDpEvent(2.0)
    assert to_dp_accounting(VoteEvent(noise_std=4.0, sensitivity=2.0)) == dp_accounting.GaussianDpEvent(2.0)
    assert to_dp_accounting(
        SampledWithoutReplacementEvent(100, 10, GaussianEvent(0.5))
    ) == dp_accounting.SampledWithoutReplacementDpEvent(100, 10, dp_accounting.GaussianDpEvent(0.5))
    assert to_dp_accounting(ShuffleEvent(local_epsilon=1.0, num_users=10)) is None
    assert to_dp_accounting(ComposedEvent((GaussianEvent(1.0), GroupEvent(GaussianEvent(1.0), 2)))) is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"kind": "gaussian", "noise_multiplier": -1},
            "`noise_multiplier` must be a finite number > 0; got -1.",
        ),
        (
            {
                "kind": "poisson_sampled",
                "sampling_rate": 1.5,
                "event": {"kind": "gaussian", "noise_multiplier": 1},
            },
            "`sampling_rate` must be in (0, 1]; got 1.5.",
        ),
        ({"kind": "laplacian", "noise_multiplier": 1}, "`event.kind` must be one of approx_dp, composed,"),
        (
            {"kind": "gaussian", "noise_multiplier": 1, "sigma": 2},
            "`event.sigma` is not a field of a 'gaussian' event.",
        ),
        (
            {
                "kind": "sampled_without_replacement",
                "population_size": 5,
                "sample_size": 6,
                "event": {"kind": "gaussian", "noise_multiplier": 1},
            },
            "`sample_size` must be an integer in [1, population_size = 5]; got 6.",
        ),
        (
            {"kind": "self_composed", "event": {"kind": "gdp", "mu": 1}, "count": 0},
            "`count` must be an integer ≥ 1",
        ),
    ],
)
def test_bad_json_names_the_field(data, message):
    with pytest.raises(SpecError) as info:
        from_json(data)
    assert str(info.value).startswith(message)


def test_gdp_event_neighbouring_is_optional_and_old_json_reads_as_add_remove():
    stored = {"kind": "gdp", "mu": 0.5}  # a ledger written before the field existed
    assert from_json(stored) == GDPEvent(0.5) and GDPEvent(0.5).neighbouring == "add_remove"
    assert to_json(GDPEvent(0.5)) == stored  # unchanged JSON at the default
    replace = GDPEvent(0.5, neighbouring="replace_one")
    assert to_json(replace) == stored | {"neighbouring": "replace_one"}
    assert from_json(to_json(replace)) == replace
    with pytest.raises(
        SpecError, match=r"^`neighbouring` must be one of add_remove, replace_one; got 'swap'"
    ):
        GDPEvent(0.5, neighbouring="swap")
