"""What a paper's own noise calibration really spends: the ledger ε of `calibration: paper`.

A reproduction runs every method with σ calibrated on the accountant, so each run's ledger ε
equals its target. The papers calibrate with closed forms instead; this module asks, for every
method of an ε sweep that offers its paper's closed form and every target ε, what ε the run
would record with the paper's σ. Nothing is trained: the runner's projection accounts the
planned releases, the same events a run records. Where that ε exceeds the target, the paper's
setting under-protects and the report lists it as a privacy correction; where it is below, the
paper spent less than it says.

A σ sweep (x = `privacy.noise_multiplier`, e.g. seed 004 at σ = 5) states, for each σ, the ε
of the paper's theorem; our ledger at that σ gives the same ε wherever the paper composes the
same events as our plan (ULDP-FL Thms 3 and 5: T Gaussians of multiplier σ, reference 004
§3.2). That ε is the target; `calibration: paper` then shows what the paper's noise for it
really spends (ULDP-NAIVE at σ = 5, T = 50: stated 7.077, spent 16.51, since the paper's
sensitivity is half the true one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpfl import runner
from dpfl.algorithms import Algorithm, algorithm_class
from dpfl.errors import DpflError, SpecError
from dpfl.formats import number_text
from dpfl.reproduce.manifest import Sweep
from dpfl.reproduce.summary import Variant, variant_label
from dpfl.spec import parse_spec

__all__ = ["PaperCalibration", "Projector", "local_projector", "paper_calibrations"]

_TOLERANCE = 1e-9  # relative slack before an ε counts as above its target
_SWEPT = ("privacy.epsilon", "privacy.noise_multiplier")  # the x of sweeps with a stated ε per cell
# spec JSON with `calibration: paper` → (ledger ε, σ), or None when the method has no closed form
Projector = Callable[[dict[str, Any]], "tuple[float, float | list[float]] | None"]


@dataclass(frozen=True)
class PaperCalibration:
    """One (method, target ε) of a sweep run with the paper's σ instead of the accountant's."""

    setting: str
    algorithm: str  # the method, and the tuning candidate in brackets where it has one
    variant: Variant
    target_epsilon: float
    epsilon: float  # what the ledger gives for the paper's σ (same accountant and δ as the sweep)
    noise_multiplier: float | list[float]  # the paper's σ (per silo where it differs)
    accountant: str
    delta: float

    @property
    def under_protects(self) -> bool:
        """Returns whether the paper's σ releases more than the ε it was calibrated for."""
        return self.epsilon > self.target_epsilon * (1 + _TOLERANCE)

    def line(self) -> str:
        """Returns one sentence: the method, its stated ε and what the paper's σ really spends."""
        variant = f" ({variant_label(self.variant)})" if self.variant else ""
        verdict = "under-protects" if self.under_protects else "over-protects"
        return (
            f"{self.setting} {self.algorithm}{variant}: the paper's σ for ε = {self.target_epsilon:g} "
            f"gives ε = {self.epsilon:.4g} ({self.accountant}, δ = {number_text(self.delta)}): it {verdict}"
        )


def local_projector(*, data_dirs: Sequence[Path] = (), cache_dir: Path | None = None) -> Projector:
    """Returns a projector that loads the data here and accounts the plan with `dpfl.runner.project`."""

    def project(spec_json: dict[str, Any]) -> tuple[float, float | list[float]] | None:
        spec = parse_spec(spec_json)
        try:
            privacy = runner.project(runner.prepare(spec, data_dirs=data_dirs, cache_dir=cache_dir))
        except SpecError as exc:
            if exc.field == "privacy.calibration":  # the paper gives no closed form for this method
                return None
            raise
        assert privacy.noise_multiplier is not None
        return (privacy.planned_epsilon[-1] if privacy.planned_epsilon else 0.0), privacy.noise_multiplier

    return project


def paper_calibrations(
    sweeps: Sequence[Sweep], project: Projector
) -> tuple[list[PaperCalibration], list[str]]:
    """Returns, for every ε or σ sweep, each method's ledger ε under its paper's σ at each
    stated ε, and one line per cell that could not be projected (why).

    One projection per (method, target, variant), at the sweep's first seed (two for a σ
    sweep: the stated ε first): σ does not depend on the seed, and the plan depends on it only
    through the partition's silo sizes. Methods without a closed form, non-private ones and
    σ-given runs of an ε sweep are skipped.
    """
    out: list[PaperCalibration] = []
    failed: list[str] = []
    for sweep in sweeps:
        if sweep.x not in _SWEPT:
            continue
        seen: set[tuple] = set()
        for point in sweep.points:
            spec = parse_spec(point.data)
            cell = sweep.cell(spec.to_json())
            if cell.role:  # a choice the paper leaves open, or no noise: neither σ is the paper's
                continue
            x, variant = cell.x, cell.variant
            # a tuned method's candidates each have their own σ: one row each
            algorithm = cell.algorithm + (f" ({cell.candidate})" if cell.candidate else "")
            privacy, key = spec.privacy, (algorithm, x, variant)
            if x is None or key in seen or privacy is None or not _offers_closed_form(spec.algorithm):
                continue
            if sweep.x == "privacy.epsilon" and privacy.epsilon is None:
                continue
            seen.add(key)
            data = spec.to_json()
            try:
                target = x if sweep.x == "privacy.epsilon" else _stated_epsilon(data, project)
                data["privacy"] |= {"epsilon": target, "noise_multiplier": None, "calibration": "paper"}
                projected = project(data)
            except DpflError as exc:  # e.g. the data is missing: the cell's runs failed the same way
                failed.append(f"{sweep.setting} {algorithm} ε = {x:g}: {exc}")
                continue
            if projected is None:
                continue
            epsilon, sigma = projected
            out.append(
                PaperCalibration(
                    setting=sweep.setting,
                    algorithm=algorithm,
                    variant=variant,
                    target_epsilon=target,
                    epsilon=epsilon,
                    noise_multiplier=sigma,
                    accountant=privacy.accountant,
                    delta=privacy.delta,
                )
            )
    return out, failed


def _stated_epsilon(spec_json: dict[str, Any], project: Projector) -> float:
    """Returns the ledger ε of a σ-given spec: what the paper states for that σ (module docstring)."""
    projected = project(spec_json)
    assert projected is not None  # a σ-given spec never asks for the paper's closed form
    return float(projected[0])


def _offers_closed_form(algorithm: str) -> bool:
    """Returns whether the algorithm overrides `paper_noise_multiplier` (it may still return None)."""
    return algorithm_class(algorithm).paper_noise_multiplier is not Algorithm.paper_noise_multiplier
