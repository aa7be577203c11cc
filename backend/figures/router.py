"""HTTP for figures: Plotly figure JSON the browser draws with Plotly.react.

Every figure is ``{"data": [...], "layout": {...}}``; ``layout.meta.figure`` names it. The compare
figures also carry ``layout.meta.notions`` (the privacy notions drawn, one panel each),
``layout.meta.warning`` (a text to show when they mix, else null) and ``layout.meta.left_out``
(ids asked for but not drawn); their title's ``subtitle`` names datasets, δ, rounds, accountants.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from backend.deps import SessionDep
from backend.figures import compare, hyperparams, service
from dpfl import plots

router = APIRouter(tags=["figures"])

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "a sweep or run id does not exist; the message names it"},
    422: {"description": "a query parameter is missing or invalid; `detail[].loc` names it"},
}

RunIds = Annotated[str | None, Query(description="comma-separated run ids", examples=["3f2a…,9c1b…"])]


@router.get("/figures/tradeoff", responses=ERRORS)
def tradeoff(
    session: SessionDep,
    sweep: Annotated[
        str | None, Query(description="one sweep id (kept for old links; same as `sweeps`)")
    ] = None,
    sweeps: Annotated[str | None, Query(description="comma-separated sweep ids, drawn on one chart")] = None,
    runs: RunIds = None,
    log: Annotated[int, Query(ge=0, le=1, description="1: ε on a log axis")] = 1,
    guaranteed: Annotated[
        int, Query(ge=0, le=1, description="1: leave out runs whose ledger does not cover every release")
    ] = 0,
    band: Annotated[
        plots.Band,
        Query(description="the band around each mean: ± std, ± standard error, 95 % CI or min–max"),
    ] = "std",
    individual: Annotated[int, Query(ge=0, le=1, description="1: draw each run as a point too")] = 0,
    average: Annotated[
        str | None,
        Query(
            description="comma-separated spec fields to average over, as over seeds (`layout.meta.varying`)"
        ),
    ] = None,
) -> dict[str, Any]:
    """Final accuracy against ε for any sweeps and hand-picked runs, on one chart.

    Succeeded runs are grouped by (algorithm, notion, ε target, or σ placed at the mean ε spent)
    and by the dataset and source (sweep or "picked runs") when one algorithm comes from several;
    each point is the mean over seeds with a ±1 std band. Runs of different privacy notions go to
    separate panels, each ε axis titled with its notion and δ. Each point's `customdata` is
    `[algorithm, epsilon, run_ids]` (trace `meta.role` "mean" or "pareto"). Non-private runs are
    dashed reference lines; the dotted "majority class" line is the accuracy of always predicting
    the evaluation set's commonest label (not private; not shown for protected datasets), and a
    point within the guessing margin of it is drawn as × ("no better than guessing"). A point whose
    runs' guarantee is broken is hollow and never on the frontier; `guaranteed=1` leaves such
    runs out (listed in `layout.meta.not_guaranteed`).
    """
    sweep_ids = compare.ids(",".join(filter(None, (sweep, sweeps))), name="sweeps")
    return compare.tradeoff_figure(
        session,
        sweep_ids=sweep_ids,
        run_ids=compare.ids(runs, name="runs"),
        log_x=bool(log),
        guaranteed_only=bool(guaranteed),
        band=band,
        individual=bool(individual),
        average=[f for f in (average or "").split(",") if f],
    )


@router.get("/figures/spent", responses=ERRORS)
def spent(
    session: SessionDep, runs: Annotated[str, Query(description="comma-separated run ids")]
) -> dict[str, Any]:
    """Accuracy against ε spent so far, per round, one line per run, one panel per privacy notion.

    Points carry `customdata = [run_id, round]`.
    """
    return compare.spent_figure(session, compare.ids(runs, name="runs"))


@router.get("/figures/curves", responses=ERRORS)
def curves(
    session: SessionDep, runs: Annotated[str, Query(description="comma-separated run ids")]
) -> dict[str, Any]:
    """Test accuracy per round of the given runs (a trade-off point's seeds): one line per run.

    Coloured by algorithm, dashed by seed; trace `meta = {role: "run", run_id, algorithm, seed}`,
    points `customdata = [run_id, round]`.
    """
    return compare.curves_figure(session, compare.ids(runs, name="runs"))


@router.get("/sweeps/{sweep_id}/figures/parcoords", responses=ERRORS)
def parcoords(sweep_id: str, session: SessionDep) -> dict[str, Any]:
    """Parallel coordinates of a sweep's succeeded runs, one line each, coloured by final accuracy.

    One axis per hyperparameter that varies between the runs (spec fields such as `params.lr`,
    `seed`, `ε target`, and `σ`; text values are categories named by `ticktext`), then `ε spent`
    and `final accuracy`. Private runs only when the sweep has some (`layout.meta.left_out` lists
    the others). `layout.meta.run_ids` gives the run of each line, in order.
    """
    return hyperparams.parcoords_figure(session, sweep_id)


@router.get("/sweeps/{sweep_id}/figures/importance", responses=ERRORS)
def importance(sweep_id: str, session: SessionDep) -> dict[str, Any]:
    """How much of the variance of final accuracy each varying hyperparameter explains, as bars.

    The share is η², the between-group variance over the total when runs are grouped by that
    parameter's value (exact on a balanced grid with additive effects; confounded parameters, like
    σ and the ε target, each get the share they explain together). A parameter with a distinct
    value in every run is left out. `layout.meta.importance` has the numbers:
    `[{parameter, share, levels}]`, largest first.
    """
    return hyperparams.importance_figure(session, sweep_id)


@router.get("/runs/{run_id}/figures")
def run_figures(run_id: str, session: SessionDep, accountant: str | None = None) -> dict[str, Any]:
    """One run's learning curves, ε per party per round, and partition histogram."""
    return service.run_figures(session, run_id, accountant=accountant)
