"""RunSpec: the whole description of a run, validated, hashable and JSON/YAML round-trippable.

Unknown keys and out-of-range values are refused with a `SpecError` whose field is the
dotted path (`privacy.delta`, `params.lr`, `dataset.partition.alpha`) and whose message
gives the value found and what is allowed. Algorithm parameters are validated by the
algorithm's own `Params` model (`dpfl.algorithms`), under the path `params.*`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dpfl.errors import SpecError

__all__ = [
    "DatasetSpec",
    "ModelSpec",
    "PartitionSpec",
    "PrivacySpec",
    "RunSpec",
    "apply_overrides",
    "load_spec",
    "parse_spec",
    "spec_error",
]

MAX_ROUNDS = 10_000
MAX_SILOS = 1_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PartitionSpec(_Strict):
    """How the training set is split across silos (options are the kind's; see dpfl.data.partition)."""

    kind: str = "iid"
    alpha: float | None = Field(None, gt=0)
    labels_per_silo: int | None = Field(None, ge=1)
    min_size: int | None = Field(None, ge=0)

    def options(self) -> dict[str, Any]:
        """Returns the kind's options that were set."""
        return {k: v for k, v in self.model_dump(exclude={"kind"}).items() if v is not None}


class DatasetSpec(_Strict):
    """A registered dataset, its loader options, feature transforms and partition into silos."""

    name: str = "digits"
    silos: int = Field(10, ge=1, le=MAX_SILOS)
    partition: PartitionSpec = PartitionSpec()
    features: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)


class ModelSpec(BaseModel):
    """A registered model and its options (e.g. `hidden: [64]` for `mlp`)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = "mlp"

    def options(self) -> dict[str, Any]:
        """Returns the model's own options (everything but `name`)."""
        return dict(self.model_extra or {})


class PrivacySpec(_Strict):
    """The privacy target: either ε (σ is calibrated) or a noise multiplier (ε is projected).

    `calibration: paper` uses the paper's own closed-form noise where an algorithm offers one;
    the ledger still records the ε a sound accountant gives for what was released.
    """

    epsilon: float | None = Field(None, gt=0, le=1000)
    noise_multiplier: float | None = Field(None, gt=0, le=1e5)
    delta: float = Field(1e-5, gt=0, lt=1)
    accountant: str = "rdp"
    calibration: Literal["accountant", "paper"] = "accountant"

    @model_validator(mode="after")
    def _one_target(self) -> PrivacySpec:
        if (self.epsilon is None) == (self.noise_multiplier is None):
            raise ValueError(
                "must have exactly one of `epsilon` (σ is calibrated) and `noise_multiplier` (ε is projected)"
            )
        return self


class RunSpec(_Strict):
    """Everything that determines a run: the same spec and seed give the same numbers."""

    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict)
    dataset: DatasetSpec = DatasetSpec()
    model: ModelSpec = ModelSpec()
    rounds: int = Field(20, ge=1, le=MAX_ROUNDS)
    participation: int | None = Field(None, ge=1, le=MAX_SILOS)
    privacy: PrivacySpec | None = None
    eval_every: int = Field(1, ge=1)
    seed: int = Field(0, ge=0, lt=2**31)

    @model_validator(mode="after")
    def _participation_fits(self) -> RunSpec:
        if self.participation is not None and self.participation > self.dataset.silos:
            raise ValueError(
                f"`participation` must be ≤ `dataset.silos` ({self.dataset.silos}); got {self.participation}"
            )
        return self

    @property
    def silos_per_round(self) -> int:
        """Returns M, the silos that take part in each round (all N by default)."""
        return self.participation or self.dataset.silos

    def to_json(self) -> dict[str, Any]:
        """Returns the spec as a JSON-ready dict (defaults filled in)."""
        return self.model_dump(mode="json")

    def digest(self) -> str:
        """Returns a stable hash of the spec (same spec, same digest)."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __hash__(self) -> int:
        return hash(self.digest())


def spec_error(exc: ValidationError, *, prefix: str = "") -> SpecError:
    """Returns the first pydantic error as a SpecError naming the field, the value and the rule."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "")
    message = err["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if err["type"] == "extra_forbidden":
        return SpecError(loc, "is not a known field.")
    if err["type"] == "missing":
        return SpecError(loc, "is required.")
    found = err.get("input")
    if err["type"] == "value_error" or isinstance(found, Mapping):
        if message.startswith("`"):  # a model-level rule that names its own field
            field, _, rest = message[1:].partition("` ")
            return SpecError(".".join(p for p in (loc, field) if p), f"{rest}.")
        return SpecError(loc or "spec", f"{message}.")
    return SpecError(loc, f"{message[0].lower()}{message[1:]}; got {found!r}.")


def parse_spec(data: Mapping[str, Any]) -> RunSpec:
    """Returns the validated RunSpec for `data`; raises SpecError naming the bad field."""
    if not isinstance(data, Mapping):
        raise SpecError("spec", f"must be a mapping of fields; got {type(data).__name__}.")
    try:
        return RunSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise spec_error(exc) from None


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Returns `data` with each `a.b.c=value` applied (the value parsed as YAML: 5, 1e-3, [64])."""
    out = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SpecError("--set", f"must look like field.path=value; got {item!r}.")
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SpecError(key, f"cannot be set: {part!r} is not a mapping.")
        node[leaf] = yaml.safe_load(raw)
    return out


def load_spec(text: str, *, overrides: Sequence[str] = ()) -> RunSpec:
    """Returns the RunSpec written as YAML or JSON in `text`, with `field=value` overrides applied."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError("spec", f"is not valid YAML or JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise SpecError("spec", f"must be a mapping of fields; got {type(data).__name__}.")
    return parse_spec(apply_overrides(data, overrides))
