"""The algorithm interface and its registry.

An algorithm is a class registered under a stable name. It declares its `Params` (a pydantic
model whose JSON Schema drives the browser's form), its privacy `notion` and its `paper`.
The runner writes the round loop once (`dpfl.runner.run`); an algorithm only says what one
round does and what it releases. Algorithms do no I/O.

Hooks, in the order the runner calls them:

- `plan(noise_multiplier)` → Ledger: every release the run will make under that noise, as
  decided before seeing any data (participation, sampling rates, steps). The runner
  calibrates σ on it and shows the projected ε before anything runs. Raises SpecError for a
  non-private algorithm given a privacy target.
- `paper_noise_multiplier(epsilon, delta)` → σ per silo: the paper's own closed form, for
  `calibration: paper`; None where the paper gives none.
- `check_noise(noise_multiplier)`: refuses, with a SpecError naming the field, what only the
  calibrated σ shows (e.g. a count noise that must exceed σ/2). `runner.project` calls it once σ
  is known, so such a spec is refused at submission; `setup` calls it too (a σ given by hand).
- `setup(noise_multiplier)`: initial state; `noise_multiplier` is None for non-private runs.
- `round(r)` → RoundOutput: one round (r counts from 1); `releases` lists the events each
  party released in it, which the runner records in the ledger.
- `round_many(runs, r)` (a classmethod) → one RoundOutput per run: round r of runs that differ
  only in σ and seed, trained together; a loop over `round` unless the class is `batched`.
- `global_params` → the model the server holds now, flat [P], for evaluation.
- `privacy_caveat()` → what the ledger does not cover (e.g. a step size read from raw data),
  or None; the runner marks such a run's privacy as not guaranteed.

Three class attributes say what a run discloses: `private_metrics` names the round metrics that
are private (everything else is a diagnostic, labelled "not private"), `trusted` names a
component the guarantee trusts, and `public_inputs` the public data its parties train on (a
caveat that breaks nothing). Four say what a spec must give it (`models`, `binary_labels`,
`requires_users`, and `default_datasets` for its default params), checked by `dpfl.runner.check`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, ValidationError
from torch import nn

from dpfl.engine import ParamLayout
from dpfl.errors import SpecError
from dpfl.federation import FederatedData
from dpfl.models import MODELS, build_model
from dpfl.privacy.events import Event
from dpfl.privacy.ledger import Ledger
from dpfl.registry import Registry
from dpfl.spec import RunSpec, spec_error

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Params",
    "RoundOutput",
    "algorithm_class",
    "participants",
    "registered_algorithms",
    "silo_party",
]

NOTIONS = ("none", "record", "user", "agent", "instance", "gdp")


class Params(BaseModel):
    """Base of every algorithm's parameters: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class RoundOutput:
    """What one round produced: metrics (e.g. clip fraction) and each party's releases."""

    metrics: dict[str, float] = field(default_factory=dict)
    releases: dict[str, list[Event]] = field(default_factory=dict)


class Algorithm(abc.ABC):
    """One federated algorithm: declare Params, notion and paper; implement the hooks."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[Params]] = Params
    notion: ClassVar[str] = "none"
    paper: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # The ledger party of silo i, for algorithms whose silos are each accounted on their own and
    # release under their own σ_i only: `calibration: accountant` then gives every silo the
    # smallest σ_i its own ledger needs. None: one σ for all, the least private party's.
    party_of_silo: ClassVar[Callable[[int], str] | None] = None
    # Round metrics that are functions of released values and public data only; every other
    # metric is a diagnostic, served apart and labelled "not private" (dpfl.privacy.disclosure).
    private_metrics: ClassVar[frozenset[str]] = frozenset()
    # A component the guarantee trusts (secure aggregation, a shuffler), in one sentence; None
    # when the guarantee holds against every other party.
    trusted: ClassVar[str | None] = None
    # Public data the private parties' training reads besides their own (a public pool they adapt
    # to), in one sentence that says why the ledger needs nothing for it; None when there is none.
    public_inputs: ClassVar[str | None] = None
    # The neighbouring relation of the guarantee: `add_remove` one unit of the notion, or
    # `replace_one` where the noise is scaled by a known number of records (the GDP family).
    neighbouring: ClassVar[str] = "add_remove"
    # What a spec must give the algorithm, declared so that one check (`dpfl.runner.check`)
    # refuses the rest before any data is loaded, the same in the CLI, the API and the worker,
    # and the catalogue (GET /api/algorithms) can say it. `models`: the model names it trains
    # (None: any); `binary_labels`: a dataset of two classes; `requires_users`: `dataset.users`.
    models: ClassVar[frozenset[str] | None] = None
    binary_labels: ClassVar[bool] = False
    requires_users: ClassVar[bool] = False
    # The datasets its *default* params run on (None: every one that meets the above). Advertised,
    # not enforced: a spec's own params are checked against the loaded data.
    default_datasets: ClassVar[frozenset[str] | None] = None
    # True when `round_many` trains several runs in one vectorised computation (a run axis
    # beside the silos); the runs of a sweep that share a `dpfl.batching.batch_key` are then
    # batched. False: `round_many` is a loop, and such runs train one by one.
    batched: ClassVar[bool] = False
    # True when the server holds records of the test split as an unlabelled public pool and reads
    # their labels for a private metric (the voting family): only public by declaration on a
    # dataset with a budget.
    pool_from_test: ClassVar[bool] = False
    # How the auditor covers it (a `dpfl.audit.coverage.Coverage`): how a plugin declares its
    # coverage; the built-in algorithms' is `dpfl.audit.fuzz.COVERAGE`. None: not auditable yet.
    audit_coverage: ClassVar[Any] = None

    def __init__(self, spec: RunSpec, data: FederatedData, model: nn.Module):
        self.spec = spec
        # Two kinds of randomness, kept apart: public choices (the partition, the model's
        # initialisation, a voting pool) come from `spec.seed`, which is published with the run;
        # every draw of a mechanism (participation, sampling, noise) from `noise_key`, which is
        # the spec's seed in simulation and a 128-bit secret in a protected run (`runner.start`).
        self.noise_key: int = spec.seed
        self.params = self.parse_params(spec.params)
        self.data = data
        self.model = model
        self.layout = ParamLayout.of(model)

    def use_data(self, data: FederatedData, *, field: str) -> None:
        """Replaces the run's data; when its inputs changed shape (a frozen feature map, chosen by
        `field`), builds the model afresh for them, as the runner builds it."""
        if data.input_shape != self.data.input_shape:
            name = self.spec.model.name
            if MODELS[name].images:
                raise SpecError(
                    field, f"needs a model of flat inputs: {name!r} convolves images; use mlp or logreg."
                )
            self.model = build_model(
                name,
                input_shape=data.input_shape,
                num_classes=data.num_classes,
                seed=self.spec.seed,
                **self.spec.model.options(),
            )
            self.layout = ParamLayout.of(self.model)
        self.data = data

    @property
    def private(self) -> bool:
        """Whether the algorithm releases anything under differential privacy."""
        return self.notion != "none"

    @classmethod
    def notion_of(cls, params: Params) -> str:
        """Returns the privacy notion a run with these params has (the class's, unless a param chooses)."""
        return cls.notion

    @classmethod
    def cost_warning(cls, spec: RunSpec, params: Params) -> str | None:
        """Returns why this setting is known to be slow, with what it cost when measured, or None:
        the new-run form shows it before submit (a slow start or round holds a worker)."""
        return None

    @classmethod
    def parse_params(cls, raw: dict) -> Params:
        """Returns the validated params; raises SpecError naming `params.<field>`."""
        try:
            return cls.Params.model_validate(raw)
        except ValidationError as exc:
            raise spec_error(exc, prefix="params") from None

    @classmethod
    def resolve(cls, spec: RunSpec) -> RunSpec:
        """Returns `spec` with every param written out, its defaults included: the values the run
        uses, as a stored run shows them (a filter on `params.lr`, a clone, a reader see them);
        the same run. Raises SpecError naming `params.<field>`."""
        return spec.model_copy(update={"params": cls.parse_params(spec.params).model_dump(mode="json")})

    def plan(self, noise_multiplier: float) -> Ledger:
        """Returns every release of the run under `noise_multiplier` (empty for non-private ones)."""
        return Ledger()

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> np.ndarray | None:
        """Returns the paper's own σ per silo for (ε, δ), or None where the paper gives none."""
        return None

    def privacy_caveat(self) -> str | None:
        """Returns why the run's ledger does not bound what it leaks, or None when it does."""
        return None

    def check_noise(self, noise_multiplier: float | np.ndarray | None) -> None:
        """Raises SpecError naming the field when the run cannot release under this σ (none here)."""
        return None

    @abc.abstractmethod
    def setup(self, noise_multiplier: float | np.ndarray | None) -> None:
        """Builds the initial state (σ is None for a non-private run; an array gives σ per silo)."""

    @abc.abstractmethod
    def round(self, r: int) -> RoundOutput:
        """Runs round r (from 1) and returns its metrics and releases."""

    @classmethod
    def round_many(cls, runs: Sequence[Algorithm], r: int) -> list[RoundOutput]:
        """Runs round r of several set-up runs of this class that share a batch key (they differ
        only in σ and seed) and returns each one's output, in order.

        Each run must get what `round` gives it alone: the same releases, and the same numbers
        up to floating-point summation order. This default runs them one by one; a family that
        sets `batched` computes them at once.
        """
        return [run.round(r) for run in runs]

    @property
    @abc.abstractmethod
    def global_params(self) -> torch.Tensor:
        """Returns the server's current model, flat [P]."""


def silo_party(silo: int) -> str:
    """Returns the ledger party name of a silo accounted on its own (ISRL-DP, the GDP family)."""
    return f"silo-{silo}"


EVERY_SILO = -1
"""A `noise_key` under which every silo takes part in every round: a plan under it bounds the plan of
every participation draw (`dpfl.projection`), since a silo's releases only add up over its rounds."""


def participants(spec: RunSpec, r: int, key: int) -> np.ndarray:
    """Returns the silos (sorted ids) taking part in round r: all, or M of N drawn from the
    algorithm's noise key (`Algorithm.noise_key`); all under `EVERY_SILO`.

    The draw depends only on (key, round), never on data, so it is part of the plan.
    """
    n, m = spec.dataset.silos, spec.silos_per_round
    if m >= n or key == EVERY_SILO:
        return np.arange(n)
    rng = np.random.default_rng([key, r, 0x5E1EC7])
    return np.sort(rng.choice(n, size=m, replace=False))


def _algorithm_entry(name: str, cls: type[Algorithm]) -> type[Algorithm]:
    """Names the class and refuses a notion outside `NOTIONS` (the form and the plots read it)."""
    if cls.notion not in NOTIONS:
        raise ValueError(f"algorithm {name!r} has notion {cls.notion!r}; allowed: {', '.join(NOTIONS)}")
    cls.name = name
    return cls


ALGORITHMS: Registry[type[Algorithm]] = Registry("algorithm", _algorithm_entry, field="algorithm")
"""Every algorithm, by name: ``@ALGORITHMS.register("fedavg")`` above the class registers it."""


def registered_algorithms() -> list[str]:
    """Returns every registered algorithm name."""
    return ALGORITHMS.names()


def algorithm_class(name: str) -> type[Algorithm]:
    """Returns the algorithm registered as `name`; raises UnknownNameError listing them."""
    return ALGORITHMS[name]
