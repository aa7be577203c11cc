"""HTTP for figures: Plotly figure JSON the browser draws with Plotly.react."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from backend.deps import SessionDep
from backend.figures import service

router = APIRouter(tags=["figures"])


@router.get("/figures/tradeoff")
def tradeoff(session: SessionDep, sweep: str, log: Annotated[int, Query(ge=0, le=1)] = 1) -> dict[str, Any]:
    """Final accuracy against ε for a sweep: one line per algorithm, bands, Pareto frontier, reference."""
    return service.tradeoff_figure(session, sweep, log_x=bool(log))


@router.get("/figures/spent")
def spent(session: SessionDep, runs: str) -> dict[str, Any]:
    """Accuracy against ε spent so far, per round, for the given runs (comma-separated ids)."""
    return service.spent_figure(session, [r for r in runs.split(",") if r])


@router.get("/runs/{run_id}/figures")
def run_figures(run_id: str, session: SessionDep, accountant: str | None = None) -> dict[str, Any]:
    """One run's learning curves, ε per party per round, and partition histogram."""
    return service.run_figures(session, run_id, accountant=accountant)
