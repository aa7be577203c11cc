"""RunSpec: the whole description of a run, validated, hashable and JSON/YAML round-trippable.

Unknown keys and out-of-range values are refused with a `SpecError` whose field is the
dotted path (`privacy.delta`, `params.lr`, `dataset.partition.alpha`) and whose message
gives the value found and what is allowed. Algorithm parameters are validated by the
algorithm's own `Params` model (`dpfl.algorithms`), under the path `params.*`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
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
    "PrivacyTarget",
    "RunSpec",
    "UsersSpec",
    "apply_overrides",
    "check_privacy",
    "load_spec",
    "parse_spec",
    "spec_error",
    "spec_fields",
    "yaml_load",
]

MAX_ROUNDS = 10_000
# A run's curve needs a few points, not one per round: evaluation cost as much as training did.
DEFAULT_EVALUATIONS = 20
MAX_SILOS = 1_000


class _Strict(BaseModel):
    # strict: a string or a bool is never taken for a number ("2" and true are refused for
    # `rounds`); an int is still a float. YAML exponents without a dot are numbers (yaml_load).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PartitionSpec(_Strict):
    """How the training set is split across silos (options are the kind's; see dpfl.data.partition)."""

    kind: str = "iid"
    alpha: float | None = Field(None, gt=0)
    labels_per_silo: int | None = Field(None, ge=1)
    min_size: int | None = Field(None, ge=0)

    def options(self) -> dict[str, Any]:
        """Returns the kind's options that were set."""
        return {k: v for k, v in self.model_dump(exclude={"kind"}).items() if v is not None}


class UsersSpec(_Strict):
    """Which user owns each training record, for user-level DP across silos (dpfl.data.users).

    `kind`: `uniform` (each record's user drawn uniformly), `balanced` (equal records per user),
    `zipf` (records per user ∝ rank^-zipf_alpha) or `natural` (the dataset's own user column).
    With `silo_alpha` set, users come first and each user's records go to silos by a Zipf law
    over a random order of silos (the paper's MNIST setting), replacing `dataset.partition`;
    otherwise the partition fixes the silos and users are drawn inside them, `zipf` users
    keeping `main_silo_probability` of their records in one main silo (the FLamby setting).
    """

    kind: str = Field("uniform", description="a registered user kind (`dpfl.data.users.USER_KINDS`)")
    count: int | None = Field(None, ge=1, le=1_000_000)
    zipf_alpha: float = Field(0.5, ge=0, le=10)
    silo_alpha: float | None = Field(None, ge=0, le=10)
    main_silo_probability: float = Field(0.8, ge=0, le=1)

    @model_validator(mode="after")
    def _count_given(self) -> UsersSpec:
        if (self.count is None) != (self.kind == "natural"):
            raise ValueError(
                "`count` is required for allocated users and must be omitted for `natural` "
                "(the dataset's user column decides)"
            )
        if self.silo_alpha is not None and self.kind == "natural":
            raise ValueError("`silo_alpha` must be omitted for `natural` users")
        return self


class DatasetSpec(_Strict):
    """A registered dataset, its loader options, feature transforms and partition into silos."""

    name: str = "digits"
    silos: int = Field(10, ge=1, le=MAX_SILOS)
    partition: PartitionSpec = PartitionSpec()
    users: UsersSpec | None = None

    @model_validator(mode="after")
    def _one_way_to_silos(self) -> DatasetSpec:
        users_first = self.users is not None and self.users.silo_alpha is not None
        if users_first and self.partition != PartitionSpec():
            raise ValueError(
                "`partition` must be left at its default when `users.silo_alpha` is set "
                "(users' records are then dealt to silos by the Zipf law)"
            )
        if users_first and self.records_per_silo is not None:
            raise ValueError("`records_per_silo` must be omitted when `users.silo_alpha` is set")
        return self

    features: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    records_per_silo: int | None = Field(
        None,
        ge=1,
        le=10_000_000,
        description="each silo keeps this many of its records, drawn from the seed, and the rest are "
        "left out (the ISRL-DP paper's 1,238 per silo); a smaller silo keeps all of its own",
    )
    labels: Literal["parity"] | None = Field(
        None,
        description="`parity`: once the silos are drawn, even classes become label 1 and odd ones 0 "
        "(the ISRL-DP paper's even-vs-odd MNIST task); omitted: the dataset's own classes",
    )


class ModelSpec(BaseModel):
    """A registered model and its options (e.g. `hidden: [64]` for `mlp`)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = "mlp"

    def options(self) -> dict[str, Any]:
        """Returns the model's own options (everything but `name`)."""
        return dict(self.model_extra or {})


TARGETS = ("epsilon", "mu", "noise_multiplier")


class PrivacyTarget(BaseModel):
    """What a privacy block asks for: its kind (one of `TARGETS`), its value, and the spec field
    that holds it, which every refusal about the target names."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["epsilon", "mu", "noise_multiplier"]
    value: float

    @property
    def field(self) -> str:
        """Returns the dotted spec field of the target, e.g. `privacy.epsilon`."""
        return f"privacy.{self.kind}"


class PrivacySpec(_Strict):
    """The privacy target: ε (σ is calibrated), μ (a μ-GDP target) or a noise multiplier (ε is projected).

    `calibration: paper` uses the paper's own closed-form noise where an algorithm offers one;
    the ledger still records the ε a sound accountant gives for what was released.

    `mu` is for algorithms of notion `gdp`, whose releases are Gaussian: σ is set so that the
    least private party composes to exactly μ, and the accountant defaults to `gdp` (the exact
    μ → (ε, δ) conversion, Dong, Roth & Su 2022, Cor. 2.13).
    """

    epsilon: float | None = Field(None, gt=0, le=1000)
    mu: float | None = Field(None, gt=0, le=1000)
    noise_multiplier: float | None = Field(None, gt=0, le=1e5)
    delta: float = Field(1e-5, gt=0, lt=1)
    accountant: str = "rdp"
    calibration: Literal["accountant", "paper"] = "accountant"
    # Where the mechanisms' randomness comes from: `auto` is the spec's seed in simulation and OS
    # entropy on a dataset with a privacy budget (protected); `seeded` is refused there.
    noise_source: Literal["auto", "seeded", "entropy"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _gdp_accountant_for_mu(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("mu") is not None and "accountant" not in data:
            return {**data, "accountant": "gdp"}
        return data

    @model_validator(mode="after")
    def _one_target(self) -> PrivacySpec:
        if sum(getattr(self, kind) is not None for kind in TARGETS) != 1:
            raise ValueError(
                "must have exactly one of `epsilon` (σ is calibrated), `mu` (μ-GDP target) and "
                "`noise_multiplier` (ε is projected)"
            )
        return self

    @property
    def target(self) -> PrivacyTarget:
        """Returns the one target this block gives (its validator guarantees exactly one)."""
        kind = next(k for k in TARGETS if getattr(self, k) is not None)
        return PrivacyTarget(kind=kind, value=getattr(self, kind))


class RunSpec(_Strict):
    """Everything that determines a run: the same spec and seed give the same numbers."""

    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict)
    dataset: DatasetSpec = DatasetSpec()
    model: ModelSpec = ModelSpec()
    rounds: int = Field(20, ge=1, le=MAX_ROUNDS)
    participation: int | None = Field(None, ge=1, le=MAX_SILOS)
    privacy: PrivacySpec | None = None
    eval_every: int | None = Field(
        None,
        ge=1,
        description="evaluate every this many rounds, and always after the last; "
        f"default: often enough for at most {DEFAULT_EVALUATIONS} evaluations",
    )
    seed: int = Field(0, ge=0, lt=2**31)

    @property
    def evaluation_interval(self) -> int:
        """Returns the rounds between evaluations: `eval_every`, or the default's ⌈rounds / 20⌉."""
        return self.eval_every or math.ceil(self.rounds / DEFAULT_EVALUATIONS)

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


class _Loader(yaml.SafeLoader):
    """YAML as safe_load reads it, but with YAML 1.2's floats: `1e-5` is a number, not a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def yaml_load(text: str) -> Any:
    """Returns the YAML (or JSON) document in `text`, reading `1e-5` as a float (YAML 1.2)."""
    return yaml.load(text, Loader=_Loader)  # safe: a SafeLoader subclass


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
        node[leaf] = yaml_load(raw)
    return out


def spec_fields(text: str) -> dict[str, Any]:
    """Returns the spec's fields written as YAML or JSON in `text`, unparsed (a paper config's
    `reproduce` block, its sweep for `dpfl.reproduce`, left out)."""
    try:
        data = yaml_load(text)
    except yaml.YAMLError as exc:
        raise SpecError("spec", f"is not valid YAML or JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise SpecError("spec", f"must be a mapping of fields; got {type(data).__name__}.")
    return {k: v for k, v in data.items() if k != "reproduce"}


def load_spec(text: str, *, overrides: Sequence[str] = ()) -> RunSpec:
    """Returns the RunSpec written as YAML or JSON in `text`, with `field=value` overrides applied."""
    return parse_spec(apply_overrides(spec_fields(text), overrides))


def check_privacy(spec: RunSpec, notion: str) -> None:
    """Refuses a privacy block that an algorithm of `notion` does not take, naming the field."""
    privacy = spec.privacy
    if notion == "none":
        if privacy is not None:
            raise SpecError("privacy", f"must be omitted: {spec.algorithm} is not private.")
        return
    if privacy is None:
        raise SpecError("privacy", f"is required for {spec.algorithm}: give `epsilon` or `noise_multiplier`.")
    if privacy.mu is not None and notion != "gdp":
        raise SpecError(
            "privacy.mu",
            f"is a μ-GDP target, offered by algorithms of notion `gdp`; give `epsilon` or "
            f"`noise_multiplier` for {spec.algorithm}.",
        )
