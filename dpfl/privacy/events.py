"""Privacy events: each release of a mechanism, as an immutable record an accountant can read.

A run's privacy cost is a list of events per party. Events are plain data: they serialise to
JSON (`to_json` / `from_json`) without loss and map to `dp_accounting.DpEvent`s wherever one
exists (`to_dp_accounting`), so a stored ledger can be re-accounted later by any accountant.

Contract, as in `dp_accounting/dp_event.py`: an event kind or field is never removed and a
meaning never changes; new fields are added only as optional. Stored ledgers must stay
re-accountable forever.

Neighbouring relation: add-or-remove one protected unit (a record, a user, an agent; the unit
is the notion of the algorithm that recorded the event), unless the event says otherwise in its
optional `neighbouring` field (`replace_one`: the noise is calibrated to a mean over a known
number of records, so it covers replacing one, not adding or removing one), or its kind does
(`sampled_without_replacement` is replace-one by definition). JSON omits the
field at its default, so stored ledgers read and write as before. Sensitivity is folded into the noise
multiplier: σ = noise standard deviation ÷ L2 (Gaussian) or L1 (Laplace) sensitivity.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from dpfl.errors import SpecError
from dpfl.privacy.dpa import dp_event

__all__ = [
    "ApproxDPEvent",
    "ComposedEvent",
    "Event",
    "GDPEvent",
    "GaussianEvent",
    "GroupEvent",
    "LaplaceEvent",
    "ParallelEvent",
    "PoissonSampledEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ShuffleEvent",
    "VoteEvent",
    "event_kinds",
    "from_json",
    "gaussian_noise_multipliers",
    "public_event",
    "to_dp_accounting",
    "to_json",
    "with_withheld",
    "withheld_fields",
]

_KINDS: dict[str, type[Event]] = {}


def _register(kind: str):
    def add(cls: type[Event]) -> type[Event]:
        if kind in _KINDS:
            raise ValueError(f"event kind {kind!r} is already registered to {_KINDS[kind].__name__}")
        _KINDS[kind] = cls
        cls.kind = kind
        return cls

    return add


def event_kinds() -> list[str]:
    """Returns the registered event kinds, as they appear in JSON."""
    return sorted(_KINDS)


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise SpecError(name, f"must be a finite number > 0; got {value!r}.")


@dataclasses.dataclass(frozen=True)
class Event:
    """Base of all events. Subclasses are frozen, hashable and compared by value."""

    kind: ClassVar[str] = ""
    # Fields computed from private data without noise, which only an accountant may read: they
    # are stored apart from the public ledger and never served (`public_event`).
    withheld: ClassVar[tuple[str, ...]] = ()


@_register("gaussian")
@dataclasses.dataclass(frozen=True)
class GaussianEvent(Event):
    """One release of f(D) + N(0, σ²Δ²·I), with Δ the L2 sensitivity of f.

    Attributes:
        noise_multiplier: σ, the noise standard deviation in units of the L2 sensitivity.
    """

    noise_multiplier: float

    def __post_init__(self) -> None:
        _positive("noise_multiplier", self.noise_multiplier)


@_register("laplace")
@dataclasses.dataclass(frozen=True)
class LaplaceEvent(Event):
    """One release of f(D) + Lap(b)^d with b = σ·Δ₁, Δ₁ the L1 sensitivity of f.

    Attributes:
        noise_multiplier: σ = b / Δ₁; the release is (1/σ)-DP.
    """

    noise_multiplier: float

    def __post_init__(self) -> None:
        _positive("noise_multiplier", self.noise_multiplier)


NEIGHBOURING = ("add_remove", "replace_one")


@_register("gdp")
@dataclasses.dataclass(frozen=True)
class GDPEvent(Event):
    """A μ-GDP release (Dong, Roth & Su 2022): as hard to tell apart as N(0,1) from N(μ,1).

    A Gaussian release with noise multiplier σ is exactly (1/σ)-GDP.

    Attributes:
        mu: μ > 0.
        neighbouring: the relation μ holds for: `add_remove` (the default, and the meaning of
            every event stored without the field) or `replace_one`.
    """

    mu: float
    neighbouring: str = dataclasses.field(default="add_remove", metadata={"omit_default": True})

    def __post_init__(self) -> None:
        _positive("mu", self.mu)
        if self.neighbouring not in NEIGHBOURING:
            raise SpecError(
                "neighbouring", f"must be one of {', '.join(NEIGHBOURING)}; got {self.neighbouring!r}."
            )


@_register("poisson_sampled")
@dataclasses.dataclass(frozen=True)
class PoissonSampledEvent(Event):
    """The inner event applied to a Poisson sample: each unit is included with probability q.

    Attributes:
        sampling_rate: q in (0, 1].
        event: the mechanism run on the sample.
    """

    sampling_rate: float
    event: Event

    def __post_init__(self) -> None:
        if not (0 < self.sampling_rate <= 1):
            raise SpecError("sampling_rate", f"must be in (0, 1]; got {self.sampling_rate!r}.")


@_register("sampled_without_replacement")
@dataclasses.dataclass(frozen=True)
class SampledWithoutReplacementEvent(Event):
    """The inner event applied to a sample of fixed size m drawn uniformly without replacement from
    a population of N units (as a Flower strategy samples its clients each round).

    Neighbouring relation: always replace-one (N is public), whatever the inner event: this is
    dp_accounting's `SampledWithoutReplacementDpEvent`, whose RDP bound (Wang, Balle &
    Kasiviswanathan 2019, Thm 27) holds only for replacing one unit. The inner event's noise
    multiplier is therefore in units of the replace-one sensitivity (for a mean of m clipped
    updates, 2C/m, not C/m). Accounted only by `rdp`; PLD, GDP and closed forms refuse it.

    Attributes:
        population_size: N ≥ 1, the units sampled from.
        sample_size: m in [1, N], the units in each sample.
        event: the mechanism run on the sample.
    """

    population_size: int
    sample_size: int
    event: Event

    def __post_init__(self) -> None:
        if not (isinstance(self.population_size, int) and self.population_size >= 1):
            raise SpecError("population_size", f"must be an integer ≥ 1; got {self.population_size!r}.")
        if not (isinstance(self.sample_size, int) and 1 <= self.sample_size <= self.population_size):
            raise SpecError(
                "sample_size",
                f"must be an integer in [1, population_size = {self.population_size}]; "
                f"got {self.sample_size!r}.",
            )


@_register("self_composed")
@dataclasses.dataclass(frozen=True)
class SelfComposedEvent(Event):
    """The inner event repeated `count` times (adaptive composition)."""

    event: Event
    count: int

    def __post_init__(self) -> None:
        if not (isinstance(self.count, int) and self.count >= 1):
            raise SpecError("count", f"must be an integer ≥ 1; got {self.count!r}.")


@_register("composed")
@dataclasses.dataclass(frozen=True)
class ComposedEvent(Event):
    """Several events in sequence (adaptive composition)."""

    events: tuple[Event, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))


@_register("parallel")
@dataclasses.dataclass(frozen=True)
class ParallelEvent(Event):
    """Mechanisms run on disjoint parts of the data (e.g. each silo's DP-SGD on its own records).

    One protected record lies in one part, so the whole is as private as the least private
    part: its RDP curve is the pointwise maximum of the parts' curves (parallel composition).
    ULDP-GROUP-k needs this record-level curve of the whole cross-silo mechanism before group
    privacy is applied to it (reference/004_uldp_fl.md §3.2, Thm 4).
    """

    events: tuple[Event, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
        if not self.events:
            raise SpecError("events", "must list at least one event.")


@_register("vote")
@dataclasses.dataclass(frozen=True)
class VoteEvent(Event):
    """One noisy-argmax query: argmax_j (v_j + N(0, noise_std²)) over a vote histogram v.

    This is the GNMax aggregator of PATE (Papernot et al. 2018) as used by AE-DPFL and
    kNN-DPFL (reference/003_voting_dpfl.md §3.2). Data-independently it is post-processing of
    a Gaussian release with noise multiplier noise_std / sensitivity. With `counts` recorded,
    the `pate` accountant can also give the tighter data-dependent bound (PATE 2018, Thm 6).

    Attributes:
        noise_std: σ, the noise standard deviation on each vote count.
        sensitivity: L2 sensitivity of the vote histogram to one protected unit (1 for
            agent-level votes; √2 for instance-level AE-DPFL).
        counts: the noiseless histogram, needed only for the data-dependent analysis. It is
            private data without noise: withheld from every public form of the ledger
            (`public_event`) and read only by the `pate` accountant.
    """

    withheld: ClassVar[tuple[str, ...]] = ("counts",)
    noise_std: float
    sensitivity: float = 1.0
    counts: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        _positive("noise_std", self.noise_std)
        _positive("sensitivity", self.sensitivity)
        if self.counts is not None:
            object.__setattr__(self, "counts", tuple(float(c) for c in self.counts))

    @property
    def noise_multiplier(self) -> float:
        """σ in units of the sensitivity: the data-independent Gaussian equivalent."""
        return self.noise_std / self.sensitivity


@_register("shuffle")
@dataclasses.dataclass(frozen=True)
class ShuffleEvent(Event):
    """n users each run an ε₀-LDP local randomizer and a trusted shuffler permutes the outputs.

    Accounted with the numerical amplification bound of Feldman, McMillan & Talwar (2021).

    Attributes:
        local_epsilon: ε₀ of each user's local randomizer.
        num_users: n, the number of users whose outputs are shuffled together.
    """

    local_epsilon: float
    num_users: int

    def __post_init__(self) -> None:
        _positive("local_epsilon", self.local_epsilon)
        if not (isinstance(self.num_users, int) and self.num_users >= 1):
            raise SpecError("num_users", f"must be an integer ≥ 1; got {self.num_users!r}.")


@_register("approx_dp")
@dataclasses.dataclass(frozen=True)
class ApproxDPEvent(Event):
    """A release known only to be (ε, δ)-DP, as a theorem states it (e.g. Cheu et al. 2021 for
    the shuffled binomial vector sum of `sdp_mbsgd`, reference/000_isrl_dp.md §3.2).

    Its composition is that of its dominating pair, privacy loss +∞ with probability δ and
    ±ε otherwise (Kairouz, Oh & Viswanath 2015), which the `pld` accountant composes exactly.
    An (ε, δ) guarantee with δ > 0 bounds no Rényi divergence, so RDP-based accountants refuse
    it. The neighbouring relation is the one the theorem uses.

    Attributes:
        epsilon: ε > 0.
        delta: δ in [0, 1).
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        _positive("epsilon", self.epsilon)
        if not (isinstance(self.delta, (int, float)) and 0 <= self.delta < 1):
            raise SpecError("delta", f"must be in [0, 1); got {self.delta!r}.")


@_register("group")
@dataclasses.dataclass(frozen=True)
class GroupEvent(Event):
    """The inner event, accounted for neighbouring datasets that differ in up to k units.

    Used for ULDP-GROUP-k: a record-level mechanism protects a user who owns up to k records
    only through group privacy (reference/004_uldp_fl.md §3.1, Lemmas 8 and 9).
    """

    event: Event
    group_size: int

    def __post_init__(self) -> None:
        if not (isinstance(self.group_size, int) and self.group_size >= 1):
            raise SpecError("group_size", f"must be an integer ≥ 1; got {self.group_size!r}.")


def to_json(event: Event) -> dict[str, Any]:
    """Returns the event as a JSON-ready dict: {"kind": ..., fields...}, nested events inline."""
    out: dict[str, Any] = {"kind": event.kind}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if field.metadata.get("omit_default") and value == field.default:
            continue  # an optional field at its default: the JSON of events stored before it
        if isinstance(value, Event):
            value = to_json(value)
        elif isinstance(value, tuple) and value and isinstance(value[0], Event):
            value = [to_json(e) for e in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[field.name] = value
    return out


def from_json(data: dict[str, Any]) -> Event:
    """Returns the event a `to_json` dict describes; raises SpecError naming a bad field."""
    if not isinstance(data, dict) or "kind" not in data:
        raise SpecError("event", f"must be an object with a 'kind'; got {data!r}.")
    kind = data["kind"]
    cls = _KINDS.get(kind)
    if cls is None:
        raise SpecError("event.kind", f"must be one of {', '.join(event_kinds())}; got {kind!r}.")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names - {"kind"}
    if unknown:
        raise SpecError(f"event.{sorted(unknown)[0]}", f"is not a field of a {kind!r} event.")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        if name == "kind":
            continue
        if name == "event":
            value = from_json(value)
        elif name == "events":
            value = tuple(from_json(v) for v in value)
        elif name == "counts" and value is not None:
            value = tuple(value)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise SpecError(f"event.{kind}", str(exc)) from None


def gaussian_noise_multipliers(event: Event) -> list[float]:
    """Returns the noise multipliers of every Gaussian release inside `event` (nested events walked)."""
    out = [event.noise_multiplier] if isinstance(event, GaussianEvent) else []
    for sub in (getattr(event, "event", None), *getattr(event, "events", ())):
        if isinstance(sub, Event):
            out += gaussian_noise_multipliers(sub)
    return out


def public_event(event: Event) -> Event:
    """Returns the event without its withheld fields (a vote's noiseless histogram): what may be served."""
    if not event.withheld:
        return event
    return dataclasses.replace(event, **{name: None for name in event.withheld})


def withheld_fields(event: Event) -> dict[str, Any] | None:
    """Returns the event's withheld fields as JSON (None when it has none set): what only an
    accountant may read, stored apart from the public ledger."""
    values = {name: getattr(event, name) for name in event.withheld if getattr(event, name) is not None}
    return {name: list(v) if isinstance(v, tuple) else v for name, v in values.items()} or None


def with_withheld(data: dict[str, Any], withheld: dict[str, Any] | None) -> dict[str, Any]:
    """Returns an event's public JSON with its withheld fields put back (for the accountant path)."""
    return data if not withheld else {**data, **withheld}


def to_dp_accounting(event: Event) -> dp_event.DpEvent | None:
    """Returns the equivalent `dp_accounting.DpEvent`, or None where none exists.

    A vote maps to its data-independent Gaussian equivalent and μ-GDP to a Gaussian with
    σ = 1/μ; both are exact for the accountants that use them. Shuffle and group events have
    no dp_accounting counterpart.
    """
    if isinstance(event, GaussianEvent):
        return dp_event.GaussianDpEvent(event.noise_multiplier)
    if isinstance(event, LaplaceEvent):
        return dp_event.LaplaceDpEvent(event.noise_multiplier)
    if isinstance(event, GDPEvent):
        return dp_event.GaussianDpEvent(1.0 / event.mu)
    if isinstance(event, VoteEvent):
        return dp_event.GaussianDpEvent(event.noise_multiplier)
    if isinstance(event, PoissonSampledEvent):
        inner = to_dp_accounting(event.event)
        return None if inner is None else dp_event.PoissonSampledDpEvent(event.sampling_rate, inner)
    if isinstance(event, SampledWithoutReplacementEvent):
        inner = to_dp_accounting(event.event)
        if inner is None:
            return None
        return dp_event.SampledWithoutReplacementDpEvent(event.population_size, event.sample_size, inner)
    if isinstance(event, SelfComposedEvent):
        inner = to_dp_accounting(event.event)
        return None if inner is None else dp_event.SelfComposedDpEvent(inner, event.count)
    if isinstance(event, ComposedEvent):
        inner_events = [to_dp_accounting(e) for e in event.events]
        if any(e is None for e in inner_events):
            return None
        return dp_event.ComposedDpEvent(inner_events)
    return None
