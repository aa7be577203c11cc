"""External runs: the description, rounds and end of a run executed outside DP-FL Explorer.

A researcher's own loop, Opacus or Flower logs a run through `dpfl.track` (or the HTTP API
directly): a description (`ExternalRun`), then each round's metrics and releases
(`ReportedRound`), then how it ended (`RunEnd`). The releases are our ledger's event JSON
(`dpfl.privacy.events.to_json`), per party; `dpfl.privacy.translation` converts dp-accounting's
`DpEvent`s into them. The server recomputes the run's ε from those events with our accountants,
exactly as for a run of its own, and shows the ε the tool reported only beside it.

Validation is as strict as for our own runs, and the same on both sides (the client library
checks before it sends or writes a file, the server again): each error is a `SpecError` naming
the field by its dotted path from the body (`events.silo_0.0.event.sampling_rate`), so nothing
is stored from a body that has one bad value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dpfl.algorithms.base import NOTIONS
from dpfl.errors import SpecError, UnknownNameError
from dpfl.privacy.accountants import accountant_class
from dpfl.privacy.events import Event, event_kinds, from_json
from dpfl.spec import spec_error

__all__ = [
    "MAX_EVENTS_PER_PARTY",
    "MAX_PARTIES",
    "ExternalImport",
    "ExternalRun",
    "ReportedRound",
    "RunEnd",
    "parse_end",
    "parse_event",
    "parse_external",
    "parse_import",
    "parse_round",
]

MAX_PARTIES = 1_000  # parties in one round: Flower's largest simulations sample fewer clients
MAX_EVENTS_PER_PARTY = 1_000  # one event per optimizer step of a round is the most a loop needs
MAX_IMPORT_ROUNDS = 10_000
_MAX_DEPTH = 8  # nested events: composed(poisson_sampled(self_composed(gaussian))) is 4 deep
PARTY_PATTERN = r"^[A-Za-z0-9_:\-]{1,64}$"  # no dots: a party is one segment of an error's field path
_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

Label = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\x00]*$")]
Epsilon = Annotated[float, Field(ge=0, description="finite, ≥ 0")]


class ExternalRun(BaseModel):
    """POST /api/runs with `source: external`: what a run executed elsewhere is.

    Its labels are free text (it ran no registered algorithm on no registered dataset); its
    `notion` and `delta` say what its ledger's ε means; `accountant` is ours, the one that
    recomputes its headline ε (a sound, data-independent one); `reported_epsilon` is what the
    tool itself printed, kept only to be shown beside ours.
    """

    model_config = _STRICT

    source: Literal["external"]
    algorithm: Label = Field(description="a label: what ran (e.g. `opacus dp-sgd`)")
    dataset: Label = Field(description="a label: what it ran on")
    notion: Literal[NOTIONS] = Field(description="the unit a release protects; `none`: not private")  # type: ignore[valid-type]
    delta: float | None = Field(None, gt=0, lt=1, description="δ of the ε; required unless notion is none")
    accountant: str = Field(
        "rdp", description="our accountant that recomputes its ε (sound, data-independent)"
    )
    rounds: int | None = Field(None, ge=1, le=1_000_000, description="rounds planned, if known")
    params: dict[str, Any] = Field(default_factory=dict, description="free-form: its hyper-parameters")
    reported_epsilon: Epsilon | None = Field(None, description="the ε its own tool reported")
    reported_by: str | None = Field(
        None, max_length=200, description="what reported it, e.g. `opacus 1.5, prv accountant`"
    )
    name: str = Field("", max_length=200)

    @model_validator(mode="after")
    def _check(self) -> ExternalRun:
        if self.notion != "none" and self.delta is None:
            raise ValueError(
                f"`delta` is required for a private run (notion {self.notion!r}); give δ in (0, 1)"
            )
        try:
            cls = accountant_class(self.accountant)
        except UnknownNameError as exc:
            raise ValueError(f"`accountant` {exc}") from None
        if cls.data_dependent:
            raise ValueError(
                f"`accountant` must be data-independent: {self.accountant!r} reads private data; "
                "use rdp or pld"
            )
        return self


class ReportedRound(BaseModel):
    """POST /api/runs/{id}/rounds: one round's metrics and releases.

    `events` maps each party (a silo, a client, `server`) to the releases it made in this round,
    as our ledger's event JSON. `accuracy` and `loss` are the model's test metrics; other
    numbers go in `metrics` and are shown as reported, "not private" (nobody here knows what
    data they were computed on).
    """

    model_config = _STRICT

    round: int = Field(ge=1, le=10_000_000)
    accuracy: float | None = Field(None, ge=0, le=1)
    loss: float | None = None
    metrics: dict[Annotated[str, Field(max_length=64)], float] = Field(default_factory=dict, max_length=100)
    events: dict[Annotated[str, Field(pattern=PARTY_PATTERN)], list[dict[str, Any]]] = Field(
        default_factory=dict, max_length=MAX_PARTIES, description="party ↦ the events it released"
    )
    reported_epsilon: Epsilon | None = Field(None, description="the ε its tool reported after this round")


class RunEnd(BaseModel):
    """POST /api/runs/{id}/finish: how the run ended, and the ε its tool reported at the end."""

    model_config = _STRICT

    status: Literal["succeeded", "failed", "cancelled"] = "succeeded"
    reported_epsilon: Epsilon | None = None
    error: str | None = Field(None, max_length=2_000)


class ExternalImport(BaseModel):
    """POST /api/runs/import: a whole run as `dpfl.track` writes it without a server."""

    model_config = _STRICT

    run: ExternalRun
    rounds: list[ReportedRound] = Field(default_factory=list, max_length=MAX_IMPORT_ROUNDS)
    end: RunEnd | None = None


def _validated(model: type[BaseModel], data: Any, prefix: str = "") -> Any:
    if not isinstance(data, Mapping):
        raise SpecError(prefix or "body", f"must be a JSON object; got {type(data).__name__}.")
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise spec_error(exc, prefix=prefix) from None


def parse_external(data: Any, *, prefix: str = "") -> ExternalRun:
    """Returns the validated description; raises SpecError naming the field."""
    return _validated(ExternalRun, data, prefix)


def parse_round(data: Any, *, prefix: str = "") -> tuple[ReportedRound, dict[str, list[Event]]]:
    """Returns the validated round and its releases, party ↦ events; raises SpecError naming the field."""
    reported = _validated(ReportedRound, data, prefix)
    return reported, _releases(reported, prefix)


def _releases(reported: ReportedRound, prefix: str) -> dict[str, list[Event]]:
    releases: dict[str, list[Event]] = {}
    for party, raw in reported.events.items():
        where = ".".join(p for p in (prefix, "events", party) if p)
        if len(raw) > MAX_EVENTS_PER_PARTY:
            raise SpecError(where, f"must list at most {MAX_EVENTS_PER_PARTY} events; got {len(raw)}.")
        releases[party] = [parse_event(e, f"{where}.{i}") for i, e in enumerate(raw)]
    return releases


def parse_end(data: Any, *, prefix: str = "") -> RunEnd:
    """Returns the validated end; raises SpecError naming the field."""
    return _validated(RunEnd, data, prefix)


def parse_import(
    data: Any,
) -> tuple[ExternalRun, list[tuple[ReportedRound, dict[str, list[Event]]]], RunEnd | None]:
    """Returns a whole run's description, rounds (ascending, each once) and end, every field checked."""
    whole = _validated(ExternalImport, data)
    rounds = [(r, _releases(r, f"rounds.{i}")) for i, r in enumerate(whole.rounds)]
    for i in range(1, len(rounds)):
        if rounds[i][0].round <= rounds[i - 1][0].round:
            raise SpecError(
                f"rounds.{i}.round",
                f"must be greater than the round before it ({rounds[i - 1][0].round}); "
                f"got {rounds[i][0].round}.",
            )
    run, end = whole.run, whole.end
    return run, rounds, end


# --- events: our ledger's JSON, checked field by field with the path of each --------------------

_NESTED = {"event"}
_LISTS = {"events"}


def parse_event(data: Any, path: str, depth: int = 0) -> Event:
    """Returns the event the JSON describes; raises SpecError naming the field by its full path.

    `dpfl.privacy.events.from_json` checks each event's rules (σ > 0, q in (0, 1], ...); this
    adds what a body from anywhere needs first: a known kind, numbers that are finite numbers
    (not strings or booleans), nested events that are objects, and a bounded depth.
    """
    if depth > _MAX_DEPTH:
        raise SpecError(path, f"nests events deeper than {_MAX_DEPTH} levels.")
    if not isinstance(data, dict):
        raise SpecError(path, f"must be an event object with a 'kind'; got {type(data).__name__}.")
    kind = data.get("kind")
    if kind not in event_kinds():
        raise SpecError(f"{path}.kind", f"must be one of {', '.join(event_kinds())}; got {kind!r}.")
    for name, value in data.items():
        where = f"{path}.{name}"
        if name == "kind":
            continue
        if name in _NESTED:
            parse_event(value, where, depth + 1)
        elif name in _LISTS:
            if not isinstance(value, list):
                raise SpecError(where, f"must be a list of events; got {type(value).__name__}.")
            for i, sub in enumerate(value):
                parse_event(sub, f"{where}.{i}", depth + 1)
        elif name == "neighbouring":
            if not isinstance(value, str):
                raise SpecError(where, f"must be a string; got {value!r}.")
        elif name == "counts":
            if value is not None and not (isinstance(value, list) and all(_number(v) for v in value)):
                raise SpecError(where, "must be a list of finite numbers or null.")
        elif not _number(value):
            raise SpecError(where, f"must be a finite number; got {value!r}.")
    try:
        return from_json(data)
    except SpecError as exc:  # this level's own rule (nested levels were checked above)
        missing = re.search(r"required (?:positional |keyword-only )?arguments?: '(\w+)'", exc.reason)
        if missing:  # from_json passes on the dataclass's TypeError for a missing field
            raise SpecError(f"{path}.{missing.group(1)}", f"is required in a {kind!r} event.") from None
        field = exc.field.removeprefix("event.")
        raise SpecError(f"{path}.{field}" if field != kind else path, exc.reason) from None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
