"""`dpfl audit SPEC`: sensitivity fuzzing and an ε lower bound for a spec's first round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dpfl.cli.run import _read_spec
from dpfl.cli.settings import data_dirs
from dpfl.formats import number_text

__all__ = ["audit"]

_VERDICT_STYLE = {"violation": "[bold red]{}[/]", "inconclusive": "[yellow]{}[/]", "no violation found": "{}"}


def audit(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Run spec, YAML or JSON.")],
    trials: Annotated[
        int, typer.Option("--trials", help="Trials per side of the statistical audit.")
    ] = 1_000_000,
    seed: Annotated[int, typer.Option("--seed", help="The first seed of the trials' noise.")] = 0,
    seeds: Annotated[
        int,
        typer.Option(
            "--seeds",
            help="Seeds of trials per release; a violation is proven at 99 % for all of them together.",
        ),
    ] = 1,
    black_box_trials: Annotated[
        int,
        typer.Option(
            "--black-box-trials",
            help="Runs per side of the black-box trials (the real release path, end to end); 0: none.",
        ),
    ] = 1_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the audit as JSON.")] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a field: rounds=5, privacy.epsilon=1.")
    ] = None,
) -> None:
    """Audit a spec: how far one unit moves each release of round 1 and a 99 % lower bound on
    ε; then black-box trials of its first rounds, tested against the ledger's privacy profile.

    A verdict is "violation" when it is proven (a release moved beyond its claimed sensitivity,
    or the family-wise lower bound is above the ledger's ε), "inconclusive" when only a single
    seed's 95 % bound is above it (run more seeds), else "no violation found".
    """
    from dpfl.audit.rounds import audit_black_box, audit_first_round, audit_json

    spec = _read_spec(spec_path, set_ or [])
    results = audit_first_round(spec, data_dirs=data_dirs(), trials=trials, seed=seed, seeds=seeds)
    black = None
    if black_box_trials:
        black = audit_black_box(spec, data_dirs=data_dirs(), trials=black_box_trials, seed=seed, seeds=seeds)
    if as_json:
        typer.echo(json.dumps(audit_json(results, black), indent=1))
        return
    table = Table(
        title=f"{spec.algorithm}: round 1 "
        f"(ε at δ = {number_text(spec.privacy.delta)}, {spec.privacy.accountant})"
    )
    for column in (
        "release",
        "max ‖Δ‖/claimed",
        "claimed Δ",
        "ε lower (99 %, all)",
        "ε lower (95 % each)",
        "ε ledger",
        "trials",
        "verdict",
    ):
        table.add_column(column)
    for r in results:
        table.add_row(
            r.release,
            "–" if r.max_sensitivity_ratio is None else f"{r.max_sensitivity_ratio:.4f}",
            f"{r.claimed_sensitivity:.4g}",
            f"{r.epsilon_lower:.3f}",
            f"{r.epsilon_lower_each:.3f}",
            f"{r.epsilon_ledger:.3f}",
            f"{r.trials:,} × {r.seeds}",
            _VERDICT_STYLE[r.verdict].format(r.verdict),
        )
    console = Console()
    console.print(table)
    for r in results:
        console.print(f"{r.release}: worst neighbours: {r.neighbours}")
    if black is not None:
        console.print(
            f"black-box, {black.rounds} round(s) of {black.release} on {black.neighbours}, "
            f"{black.trials:,} runs per side × {black.seeds}: best test ({black.statistic}) "
            f"TPR ≥ {black.tpr_low:.3f} at FPR ≤ {black.fpr_high:.4f}, ε lower {black.epsilon_lower:.3f} "
            f"vs ledger {black.epsilon_ledger:.3f}; excess over the ledger's profile {black.excess:+.3f}: "
            + _VERDICT_STYLE[black.verdict].format(black.verdict)
        )
