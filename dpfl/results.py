"""What a run gives back: its evaluated rounds, its progress reports, its privacy and its result.

`dpfl.runner` produces them (and re-exports them); the CLI, the worker and the reproductions read
them. The result's ε is always recomputed from its ledger, never taken from the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dpfl.formats import number_text
from dpfl.metrics import in_metric
from dpfl.privacy.accountants import make_accountant
from dpfl.privacy.accountants.group import describe_group_conversion
from dpfl.privacy.disclosure import DIAGNOSTICS_LABEL, Caveat
from dpfl.privacy.events import Event
from dpfl.privacy.ledger import Ledger
from dpfl.spec import RunSpec

__all__ = ["Privacy", "Progress", "RoundRecord", "RunResult", "ledger_mu"]


@dataclass(frozen=True)
class RoundRecord:
    """One evaluated round: test accuracy, loss and balanced accuracy (`dpfl.metrics`), ε spent so
    far, the algorithm's private metrics, and its diagnostics (not private: training loss, clip
    fraction, ...; empty when withheld)."""

    round: int
    accuracy: float | None  # None where withheld (a protected run's test split not declared public)
    loss: float | None
    epsilon: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    diagnostics: dict[str, float] = field(default_factory=dict)
    balanced_accuracy: float | None = None  # withheld as accuracy is; None where not measured

    def headline(self, metric: str) -> float | None:
        """Returns the test metric a dataset reports (`DatasetInfo.metric`): accuracy or balanced accuracy."""
        return in_metric(metric, accuracy=self.accuracy, balanced_accuracy=self.balanced_accuracy)

    def to_json(self) -> dict[str, Any]:
        """Returns the record as a JSON-ready dict, diagnostics in their own block."""
        return {
            "round": self.round,
            "accuracy": self.accuracy,
            "balanced_accuracy": self.balanced_accuracy,
            "loss": self.loss,
            "epsilon": self.epsilon,
            **self.metrics,
            "diagnostics": self.diagnostics,
        }


@dataclass(frozen=True)
class Progress:
    """What `on_round` receives after each round."""

    round: int
    rounds: int
    epsilon: float | None
    record: RoundRecord | None  # None on rounds that were not evaluated
    releases: dict[str, list[Event]] = field(default_factory=dict)  # what each party released this round


@dataclass
class Privacy:
    """The privacy side of a run: target, noise, and the ε its ledger adds up to."""

    notion: str
    delta: float | None
    accountant: str | None
    calibration: str | None
    noise_multiplier: float | list[float] | None
    target_epsilon: float | None
    planned_epsilon: list[float]  # per round, from the plan (what the progress bar shows)
    target_mu: float | None = None  # the μ-GDP target, when the spec gives `mu`
    caveats: list[Caveat] = field(default_factory=list)  # what the ε rests on or does not cover
    noise_source: str | None = None  # "seeded" (simulation) or "entropy" (protected); None if not private
    # The most ε any of the run's secret draws can plan: above `planned_epsilon[-1]` only for a
    # protected run of M of N silos per round, whose participation admission cannot know.
    bound_epsilon: float | None = None
    # Settings that run and mislead (`dpfl.plausibility`): said before the run, one sentence each.
    implausible: list[str] = field(default_factory=list)

    @property
    def guaranteed(self) -> bool | None:
        """Returns whether the ledger covers every channel of the mechanism: no caveat breaks it
        (None for a non-private run). A simulation's ε is of the mechanism: `protects_data` says
        whether it also protects this data."""
        return None if self.notion == "none" else not any(c.breaks_guarantee for c in self.caveats)

    @property
    def protects_data(self) -> bool | None:
        """Returns whether the ε protects this run's data: guaranteed, and its noise drawn from OS
        entropy (protected), not from the spec's seed, which anyone holding the spec can replay
        (a simulation describes the mechanism). None for a non-private run."""
        return None if self.guaranteed is None else self.guaranteed and self.noise_source == "entropy"

    neighbouring: str = "add_remove"  # the relation the guarantee holds for (`Algorithm.neighbouring`)

    def warning(self, epsilon: float | None) -> str | None:
        """Returns what a reader must know: a channel the ledger does not cover, or a released ε
        above the target (paper calibration)."""
        notes = [c.text for c in self.caveats if c.breaks_guarantee]
        target = self.target_epsilon
        if epsilon is not None and target is not None and epsilon > target * (1 + 1e-9):
            notes.append(
                f"the {self.calibration} calibration under-protects: the ledger gives ε = {epsilon:.4g} "
                f"({self.accountant}, δ = {number_text(self.delta)}) for a target of {self.target_epsilon:g}"
            )
        return "; ".join(notes) or None

    def to_json(self, epsilon: float | None, mu: float | None = None) -> dict[str, Any]:
        """Returns the privacy block; `mu` is the ledger's μ for GDP runs (None otherwise)."""
        return {
            "epsilon": epsilon,
            "mu": mu,
            "delta": self.delta,
            "accountant": self.accountant,
            "notion": self.notion,
            "noise_multiplier": self.noise_multiplier,
            "target_epsilon": self.target_epsilon,
            "target_mu": self.target_mu,
            "calibration": self.calibration,
            "noise_source": self.noise_source,
            "neighbouring": None if self.notion == "none" else self.neighbouring,
            "guaranteed": self.guaranteed,
            "protects_data": self.protects_data,
            "warning": self.warning(epsilon),
            "caveats": [c.to_json() for c in self.caveats],
        }


@dataclass
class RunResult:
    """Everything a run produced; `to_json` is what `dpfl run --out` writes and the service stores."""

    spec: RunSpec
    rounds: list[RoundRecord]
    privacy: Privacy
    ledger: Ledger
    timings: dict[str, float]
    stopped: bool
    label_histogram: np.ndarray | None  # diagnostic; None when withheld
    users: dict[str, Any] | None = None  # diagnostic (records per user, ...); None when withheld
    protected: bool = False  # diagnostics withheld, noise from OS entropy
    final_params: torch.Tensor | None = None  # the server's model after the last round, flat [P]
    # diagnostic: records per class of the evaluation set, for the majority-class baseline; None when withheld
    test_label_histogram: list[int] | None = None
    class_names: tuple[str, ...] | None = None  # the classes' own names (a CSV's label values)

    @property
    def final(self) -> RoundRecord | None:
        """Returns the last evaluated round."""
        return self.rounds[-1] if self.rounds else None

    @property
    def epsilon(self) -> float | None:
        """Returns the run's ε, recomputed from the ledger (None for a non-private run)."""
        if self.privacy.notion == "none":
            return None
        return self.ledger.epsilon(delta=self.privacy.delta, accountant=self.privacy.accountant)

    @property
    def mu(self) -> float | None:
        """Returns the run's μ for a GDP run (√Σμ² per party, the maximum over parties), else None."""
        return ledger_mu(self.ledger) if self.privacy.notion == "gdp" else None

    @property
    def conversion(self) -> str | None:
        """Returns how group privacy turned the ledger into ε (ULDP-GROUP-k), else None."""
        if self.privacy.notion == "none":
            return None
        return describe_group_conversion(
            self.ledger.party_events(), delta=self.privacy.delta, accountant=self.privacy.accountant
        )

    def to_json(self) -> dict[str, Any]:
        """Returns the result as a JSON-ready dict."""
        final = self.final
        return {
            "final": None if final is None else final.to_json(),
            "privacy": self.privacy.to_json(self.epsilon, self.mu) | {"conversion": self.conversion},
            "rounds": [r.to_json() for r in self.rounds],
            "stopped": self.stopped,
            "ledger": self.ledger.to_json(),
            "diagnostics": self.diagnostics(),
            "timings": self.timings,
            "spec": self.spec.to_json(),
        }

    def diagnostics(self) -> dict[str, Any]:
        """Returns the run-level outputs computed on private data without noise, labelled as such
        (each round's own are in its record); `withheld` and empty for a protected run."""
        if self.protected:
            return {"label": DIAGNOSTICS_LABEL, "withheld": True}
        return {
            "label": DIAGNOSTICS_LABEL,
            "withheld": False,
            "label_histogram": None if self.label_histogram is None else self.label_histogram.tolist(),
            "users": self.users,
            "test_label_histogram": self.test_label_histogram,
            "class_names": None if self.class_names is None else list(self.class_names),
        }


def ledger_mu(ledger: Ledger) -> float:
    """Returns the μ of a ledger of Gaussian-type releases: √Σμᵢ² per party, the maximum over parties."""
    out = 0.0
    for event in ledger.party_events().values():
        accountant = make_accountant("gdp")
        accountant.compose(event)
        out = max(out, accountant.mu)
    return out
