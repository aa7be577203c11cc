"""HTTP for figures: Plotly figure JSON the browser draws with Plotly.react.

Every figure is ``{"data": [...], "layout": {...}}``; ``layout.meta.figure`` names it. The compare
figures also carry ``layout.meta.notions`` (the privacy notions drawn, one panel each),
``layout.meta.warning`` (a text to show when they mix, else null) and ``layout.meta.left_out``
(ids asked for but not drawn); their title's ``subtitle`` names datasets, δ, rounds, accountants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response
from sqlalchemy.orm import Session

from backend.deps import SessionDep
from backend.figures import compare, hyperparams, service
from backend.sweeps.export import csv_text
from dpfl import plots

router = APIRouter(tags=["figures"])

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "a sweep or run id does not exist; the message names it"},
    422: {"description": "a query parameter is missing or invalid; `detail[].loc` names it"},
}

RunIds = Annotated[str | None, Query(description="comma-separated run ids", examples=["3f2a…,9c1b…"])]


@dataclass
class TradeoffQuery:
    """Which runs a Compare view shows and how its points are grouped (the figure and its exports)."""

    sweep: Annotated[str | None, Query(description="one sweep id (kept for old links; same as `sweeps`)")] = (
        None
    )
    sweeps: Annotated[str | None, Query(description="comma-separated sweep ids, drawn on one chart")] = None
    runs: RunIds = None
    guaranteed: Annotated[
        int, Query(ge=0, le=1, description="1: leave out runs whose ledger does not cover every release")
    ] = 0
    band: Annotated[
        plots.Band,
        Query(description="the band around each mean: ± std, ± standard error, 95 % CI or min–max"),
    ] = "std"
    average: Annotated[
        str | None,
        Query(
            description="comma-separated spec fields to average over, as over seeds (`layout.meta.varying`)"
        ),
    ] = None

    def view(self, session: Session) -> compare.TradeoffView:
        return compare.tradeoff_view(session, **self.selection())

    def selection(self) -> dict[str, Any]:
        return {
            "sweep_ids": compare.ids(",".join(filter(None, (self.sweep, self.sweeps))), name="sweeps"),
            "run_ids": compare.ids(self.runs, name="runs"),
            "guaranteed_only": bool(self.guaranteed),
            "average": [f for f in (self.average or "").split(",") if f],
        }


TradeoffDep = Annotated[TradeoffQuery, Depends()]


@router.get("/figures/tradeoff", responses=ERRORS)
def tradeoff(
    session: SessionDep,
    view: TradeoffDep,
    log: Annotated[int, Query(ge=0, le=1, description="1: ε on a log axis")] = 1,
    individual: Annotated[int, Query(ge=0, le=1, description="1: draw each run as a point too")] = 0,
) -> dict[str, Any]:
    """Final accuracy against ε for any sweeps and hand-picked runs, on one chart.

    A point is one configuration: succeeded runs identical in everything but their seed (and the
    fields named in `average`), at one ε target or σ, placed at the mean ε their ledgers spent.
    Configurations of one algorithm that differ are separate series named by what differs
    ("isrl_mbsgd · δ = 0.1"), as are the dataset and source (a sweep or "picked runs") when one
    algorithm comes from several; `layout.meta.varying` lists the fields that vary. Each point has
    its `band` over its runs. Runs of different privacy notions go to separate panels, each ε axis
    titled with its notion and δ. Each point's `customdata` is `[algorithm, epsilon, run_ids]`
    (trace `meta.role` "mean" or "pareto"). Non-private runs are dashed reference lines; the dotted
    "majority class" line is the accuracy of always predicting the evaluation set's commonest
    label (not private; not shown for protected datasets), and a point within the guessing margin
    of it is drawn as × ("no better than guessing"). A point whose runs' guarantee is broken is
    hollow and never on the frontier; `guaranteed=1` leaves such runs out (listed in
    `layout.meta.not_guaranteed`). The same points as a table: `/figures/tradeoff/points`.
    """
    return compare.tradeoff_figure(
        session, **view.selection(), log_x=bool(log), band=view.band, individual=bool(individual)
    )


@router.get("/figures/tradeoff/points", responses=ERRORS)
def tradeoff_points(session: SessionDep, view: TradeoffDep) -> list[dict[str, Any]]:
    """The points of a Compare view (same query as `/figures/tradeoff`), one row per point:
    its series, the ε its runs spent (`epsilon`, a mean) and their target, δ, n, accuracy mean and
    std, the band's limits, whether it is guaranteed, protected and on its panel's Pareto
    frontier, and its runs. Non-private reference rows come last (notion "none")."""
    return compare.tradeoff_rows(view.view(session), view.band)


@router.get(
    "/figures/tradeoff/points.csv",
    response_class=Response,
    responses={**ERRORS, 200: {"content": {"text/csv": {}}, "description": "one line per point"}},
)
def tradeoff_points_csv(session: SessionDep, view: TradeoffDep) -> Response:
    """The points of a Compare view as CSV: the columns of `/figures/tradeoff/points`."""
    return Response(
        csv_text(compare.tradeoff_rows(view.view(session), view.band), compare.TRADEOFF_COLUMNS),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="compare-points.csv"'},
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
    session: SessionDep,
    runs: Annotated[str, Query(description="comma-separated run ids")],
    metric: Annotated[
        Literal["accuracy", "balanced_accuracy", "loss", "train_loss", "epsilon"],
        Query(
            description="what is drawn per round: test accuracy, test balanced accuracy (mean "
            "per-class recall), test loss, training loss (not private), ε spent"
        ),
    ] = "accuracy",
    log_y: Annotated[int, Query(ge=0, le=1, description="1: a log-scale y axis")] = 0,
    smoothing: Annotated[
        float, Query(ge=0, lt=1, description="exponential moving average weight; 0: the raw values")
    ] = 0.0,
) -> dict[str, Any]:
    """A metric per round of the given runs (a trade-off point's seeds, or runs picked to overlay):
    one line per run.

    Coloured by algorithm, dashed by seed; trace `meta = {role: "run", run_id, algorithm, seed}`
    (raw markers under a smoothed line: `role: "raw"`), points `customdata = [run_id, round]`.
    """
    return compare.curves_figure(
        session, compare.ids(runs, name="runs"), metric=metric, log_y=bool(log_y), smoothing=smoothing
    )


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


@router.get("/runs/{run_id}/figures", responses=ERRORS)
def run_figures(run_id: str, session: SessionDep, accountant: str | None = None) -> dict[str, Any]:
    """One run's learning curves, ε per party per round, and partition histogram."""
    return service.run_figures(session, run_id, accountant=accountant)
