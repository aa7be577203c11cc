"""The compare page's figures over any sweeps and hand-picked runs: trade-off, ε spent, drill-down curves.

Each reads only the columns it draws (whole specs made the sweep summary slow, issue 17). The
majority-class baseline comes from the run's diagnostics (``test_label_histogram``, not private)
and is never shown for a protected run, whose diagnostics are withheld.

The trade-off figure plots each run in its dataset's headline metric (`dpfl.data.headline_metric`:
balanced accuracy for Creditcard, accuracy elsewhere and for uploads); a run without a value in
that metric (one recorded before balanced accuracy was, say) is left out and listed as such.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.errors import NotFound, ParameterError
from backend.models import RoundMetric, Run, RunStatus, Sweep
from backend.sweeps.summary import Outcome, compare_cells, front
from dpfl import plots
from dpfl.configuration import Configuration, configurations, varying_fields
from dpfl.data import headline_metric
from dpfl.metrics import in_metric

__all__ = [
    "TRADEOFF_COLUMNS",
    "TradeoffView",
    "curves_figure",
    "ids",
    "spent_figure",
    "tradeoff_figure",
    "tradeoff_rows",
    "tradeoff_view",
]

_MAX_RUNS = 500  # hand-picked ids in one request: a URL's worth


def ids(raw: str | None, *, name: str) -> list[str]:
    """Returns the comma-separated ids of query parameter `name`, without blanks or repeats."""
    found = list(dict.fromkeys(i.strip() for i in (raw or "").split(",") if i.strip()))
    if len(found) > _MAX_RUNS:
        raise ParameterError("query", name, f"at most {_MAX_RUNS} ids; got {len(found)}")
    return found


@dataclass(frozen=True)
class _Compared:
    """One run as the compare figures need it."""

    id: str
    algorithm: str
    notion: str
    dataset: str
    sweep_id: str | None
    target_epsilon: float | None
    noise_multiplier: float | None
    accuracy: float | None
    balanced_accuracy: float | None
    epsilon: float | None
    delta: float | None
    rounds: int
    accountant: str | None
    seed: int | None
    status: str
    spec: dict[str, Any]
    caveats: list[dict[str, Any]] | None
    protected: bool
    metric: str
    """its dataset's headline metric, which the trade-off figure plots"""
    baseline: dict[str, float] | None

    @property
    def value(self) -> float | None:
        """Returns its final test value in `metric`: accuracy, or balanced accuracy (None if not recorded)."""
        return in_metric(self.metric, accuracy=self.accuracy, balanced_accuracy=self.balanced_accuracy)

    @property
    def not_guaranteed(self) -> list[str]:
        """Returns what its ledger does not cover (its caveats that break the guarantee)."""
        return [c["text"] for c in self.caveats or () if c.get("breaks_guarantee")]

    def setting(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "delta": self.delta,
            "rounds": self.rounds,
            "accountant": self.accountant,
        }


def _load(session: Session, where: Any) -> list[_Compared]:
    rows = session.execute(
        select(
            Run.id,
            Run.algorithm,
            Run.notion,
            Run.dataset,
            Run.sweep_id,
            Run.target_epsilon,
            Run.spec[("privacy", "noise_multiplier")].as_float(),
            Run.final_accuracy,
            Run.final_balanced_accuracy,
            Run.epsilon,
            Run.delta,
            Run.rounds,
            Run.accountant,
            Run.spec["seed"].as_integer(),
            Run.status,
            Run.spec,
            Run.caveats,
            Run.protected,
            Run.diagnostics["test_label_histogram"],
        )
        .where(where)
        .order_by(Run.created_at, Run.id)
    ).all()
    out = []
    for row in rows:
        metric = headline_metric(row[3])  # its dataset's
        # a protected run's diagnostics are withheld; its dataset's labels are not shown either
        baseline = None if row[17] else plots.chance_baseline(row[18], metric)
        out.append(_Compared(*row[:18], metric=metric, baseline=baseline))
    return out


def _runs(session: Session, sweep_ids: Sequence[str], run_ids: Sequence[str]) -> tuple[list[_Compared], dict]:
    """Returns the runs of the sweeps and the picked runs (each once), and the sweeps by id.

    Raises:
        NotFound: a sweep or run id does not exist (404 naming it).
    """
    sweeps = {}
    for sweep_id in sweep_ids:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None:
            raise NotFound(f"sweep {sweep_id!r} does not exist")
        sweeps[sweep_id] = sweep
    found = _load(session, Run.sweep_id.in_(sweep_ids)) if sweep_ids else []
    picked = _load(session, Run.id.in_(run_ids)) if run_ids else []
    missing = sorted(set(run_ids) - {r.id for r in picked})
    if missing:
        raise NotFound(f"run {missing[0]!r} does not exist")
    seen = {r.id for r in found}
    return found + [r for r in picked if r.id not in seen], sweeps


def _series(
    runs: Sequence[_Compared], sweeps: dict[str, Sweep], configs: dict[str, Configuration]
) -> dict[str, str]:
    """Returns run id ↦ its legend name: the algorithm, then the dataset, source and setting when
    needed.

    The dataset is named when the runs span several; the source (a sweep, or "picked runs") when
    one algorithm on one dataset comes from several of them, so their points are not averaged
    together; the setting (`dpfl.configuration`, "δ = 0.1") when the algorithm's runs differ in
    more than seed and target, so each configuration is a series of its own.
    """

    def source(run: _Compared) -> str:
        if run.sweep_id in sweeps:
            sweep = sweeps[run.sweep_id]
            return f"sweep {sweep.name or sweep.id}"
        return "picked runs"

    datasets = {r.dataset for r in runs}
    sources: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in runs:
        sources[(r.algorithm, r.dataset)].add(source(r))
    names = {}
    for r in runs:
        parts = [r.algorithm]
        if len(datasets) > 1:
            parts.append(r.dataset)
        if len(sources[(r.algorithm, r.dataset)]) > 1:
            parts.append(source(r))
        if configs[r.id].label:
            parts.append(configs[r.id].label)
        if r.protected:  # charged to a budget, noise from a secret key: never averaged with simulations
            parts.append("protected")
        if r.spec.get("source") == "external":  # executed elsewhere, ledger as reported: marked
            parts.append("external")
        names[r.id] = " · ".join(parts)
    return names


def _cell_baseline(members: Iterable[_Compared]) -> dict[str, float] | None:
    """Returns the highest baseline of a cell's runs (the cautious one), None if any run has none."""
    baselines = [r.baseline for r in members]
    if not baselines or any(b is None for b in baselines):
        return None
    return max(baselines, key=lambda b: b["accuracy"])  # type: ignore[arg-type, return-value]


@dataclass(frozen=True)
class TradeoffView:
    """What a Compare view shows, before it is drawn or exported."""

    points: list[dict[str, Any]]
    """one per (series, ε) cell of private runs (`tradeoff_figure`'s points)"""
    reference: list[dict[str, Any]]
    """the non-private cells, each with the notions (panels) of its dataset's private runs"""
    runs: list[_Compared]
    """the runs drawn"""
    left_out: list[str]
    """runs asked for but not drawn: not succeeded yet, never evaluated, or without a value in their
    dataset's headline metric"""
    not_guaranteed: list[str]
    """runs left out because their guarantee is broken (only when asked to)"""
    varying: list[str]
    """the spec fields that vary between the runs drawn"""


def tradeoff_view(
    session: Session,
    *,
    sweep_ids: Sequence[str],
    run_ids: Sequence[str],
    guaranteed_only: bool = False,
    average: Sequence[str] = (),
) -> TradeoffView:
    """Returns the sweeps' and picked runs' succeeded runs (only those whose guarantee holds when
    `guaranteed_only`) grouped into points: a point averages over seeds only, and over the fields
    in `average` the user chose (which must vary between the runs).

    No sweeps and no runs is an empty view, as a sweep without results is.

    Raises:
        ParameterError: `average` names a field that does not vary between the runs (422).
        NotFound: a sweep or run does not exist (404).
    """
    every, sweeps = _runs(session, sweep_ids, run_ids) if sweep_ids or run_ids else ([], [])
    runs = [r for r in every if r.status == RunStatus.succeeded and r.value is not None]
    hidden = [r.id for r in runs if guaranteed_only and r.not_guaranteed]
    runs = [r for r in runs if r.id not in hidden]
    by_id = {r.id: r for r in runs}
    specs = {r.id: r.spec for r in runs}
    varying = varying_fields(specs)
    unknown = [f for f in average if f not in varying]
    if unknown and runs:  # with no run there is nothing to average
        raise ParameterError(
            "query",
            "average",
            f"must name fields that vary between these runs ({', '.join(varying) or 'none does'}); "
            f"got {', '.join(unknown)}",
        )
    configs = configurations(specs, averaged=average)
    series = _series(runs, sweeps, configs)
    cells = compare_cells(
        Outcome(
            r.algorithm,
            r.notion,
            r.target_epsilon,
            r.noise_multiplier,
            r.value,
            r.epsilon,
            run_id=r.id,
            series=series[r.id],
            config=configs[r.id].key,
            metric=r.metric,
        )
        for r in runs
    )
    points, reference = [], []
    for cell in cells:
        members = [by_id[i] for i in cell["run_ids"]]
        datasets = {r.dataset for r in members}
        common = {
            "algorithm": cell["algorithm"],
            "series": cell["series"],
            "datasets": sorted(datasets),
            "metric": cell["metric"],
            "mean": cell["accuracy_mean"],
            "std": cell["accuracy_std"],
            "n": cell["n"],
            "run_ids": cell["run_ids"],
            "members": cell["members"],
        }
        if cell["notion"] == "none":
            # drawn only in the panels of the notions its dataset's private runs are in
            reference.append(common | {"notions": _notions_of(runs, datasets)})
            continue
        # The x axis is the ε its ledger spent (a paper calibration may spend far more than its
        # target, which the hover then shows); a point whose ledger does not cover every release
        # says why, is drawn hollow and is never on the frontier.
        points.append(
            common
            | {
                "notion": cell["notion"],
                "epsilon": cell["epsilon_mean"],
                "target_epsilon": cell["target_epsilon"],
                "delta": max((r.delta for r in members if r.delta is not None), default=None),
                "baseline": _cell_baseline(members),
                "not_guaranteed": sorted({text for r in members for text in r.not_guaranteed}),
                "protected": all(r.protected for r in members),
            }
        )
    left_out = [r.id for r in every if r.id not in by_id and r.id not in hidden]
    return TradeoffView(points, reference, runs, left_out, hidden, varying)


def tradeoff_figure(
    session: Session,
    *,
    sweep_ids: Sequence[str],
    run_ids: Sequence[str],
    log_x: bool,
    guaranteed_only: bool = False,
    band: str = "std",
    individual: bool = False,
    average: Sequence[str] = (),
) -> dict[str, Any]:
    """Returns final accuracy (each dataset's headline metric) against ε of a `tradeoff_view`: each
    mean with its `band` (`dpfl.plots.BANDS`), each run as a point when `individual`;
    ``layout.meta`` lists the runs `left_out`, those hidden as `not_guaranteed`, and the fields
    `varying` and `averaged`.

    Raises:
        ParameterError, NotFound: as `tradeoff_view`.
    """
    view = tradeoff_view(
        session, sweep_ids=sweep_ids, run_ids=run_ids, guaranteed_only=guaranteed_only, average=average
    )
    runs = view.runs
    fig = plots.tradeoff(
        view.points,
        reference=view.reference or None,
        pareto=_frontier(view.points, runs) or None,
        no_frontier=_no_frontier(runs),
        baselines=_baselines(runs) or None,
        log_x=log_x,
        band=band,
        individual=individual,
        subtitle=plots.compare_subtitle(r.setting() for r in runs) or None,
    )
    out = plots.to_json(fig)
    out["layout"]["meta"] |= {
        "left_out": view.left_out,
        "not_guaranteed": view.not_guaranteed,
        "varying": view.varying,
        "averaged": list(average),
    }
    return out


def tradeoff_rows(view: TradeoffView, band: str = "std") -> list[dict[str, Any]]:
    """Returns the view's points as export rows (`TRADEOFF_COLUMNS`), private ones first, with the
    `band`'s limits and whether each is on its panel's Pareto frontier."""
    on_front = {(p["series"], p["epsilon"]) for p in _frontier(view.points, view.runs)}
    rows = []
    for p in [*view.points, *view.reference]:
        private = "notion" in p
        low, high = plots.band_limits(p, band)  # type: ignore[arg-type]
        rows.append(
            {
                "series": p["series"],
                "algorithm": p["algorithm"],
                "datasets": " ".join(p["datasets"]),
                "notion": p["notion"] if private else "none",
                "metric": p["metric"],
                "epsilon": p.get("epsilon"),
                "target_epsilon": p.get("target_epsilon"),
                "delta": p.get("delta"),
                "n": p["n"],
                "accuracy_mean": p["mean"],
                "accuracy_std": p["std"],
                "band": band,
                "band_low": low,
                "band_high": high,
                "guaranteed": (not p["not_guaranteed"]) if private else None,
                "protected": p.get("protected"),
                "pareto": (p["series"], p.get("epsilon")) in on_front if private else None,
                "run_ids": " ".join(p["run_ids"]),
            }
        )
    return rows


TRADEOFF_COLUMNS = (
    "series",
    "algorithm",
    "datasets",
    "notion",
    "metric",
    "epsilon",
    "target_epsilon",
    "delta",
    "n",
    "accuracy_mean",
    "accuracy_std",
    "band",
    "band_low",
    "band_high",
    "guaranteed",
    "protected",
    "pareto",
    "run_ids",
)
"""The columns of an exported Compare view: ``epsilon`` is the mean ε spent, never the target;
``accuracy_mean`` and ``accuracy_std`` are in ``metric``, the datasets' headline metric
(accuracy, or balanced_accuracy)."""


def _frontier(points: Sequence[dict[str, Any]], runs: Sequence[_Compared]) -> list[dict[str, Any]]:
    """Returns the Pareto frontier of each notion's points, when that notion's runs share a dataset.

    A frontier across datasets would rank results of different tasks against each other.
    """
    out, skipped = [], _no_frontier(runs)
    for notion in {p["notion"] for p in points} - set(skipped):
        mine = [
            p | {"accuracy": p["mean"]} for p in points if p["notion"] == notion and not p["not_guaranteed"]
        ]
        out.extend(front(mine))
    return out


def _no_frontier(runs: Sequence[_Compared]) -> dict[str, str]:
    """Returns why each notion drawn without a frontier has none: its runs are on several datasets,
    or none of them is guaranteed (a frontier ranks only points whose ε bounds what they leak)."""
    out = {}
    for notion in {r.notion for r in runs if r.notion != "none"}:
        mine = [r for r in runs if r.notion == notion]
        datasets = sorted({r.dataset for r in mine})
        if len(datasets) > 1:
            out[notion] = f"runs on {len(datasets)} datasets ({', '.join(datasets)}) are not ranked together"
        elif all(r.not_guaranteed for r in mine):
            out[notion] = "no run here is guaranteed (its ledger does not cover every release)"
    return out


def _baselines(runs: Sequence[_Compared]) -> list[dict[str, Any]]:
    """Returns one majority-class line per dataset whose runs all have one (none if any is protected)."""
    datasets = sorted({r.dataset for r in runs})
    lines = []
    for dataset in datasets:
        baseline = _cell_baseline(r for r in runs if r.dataset == dataset)
        if baseline is not None:
            lines.append(
                {
                    "accuracy": baseline["accuracy"],
                    "label": dataset if len(datasets) > 1 else None,
                    "notions": _notions_of(runs, {dataset}),
                }
            )
    return lines


def _notions_of(runs: Sequence[_Compared], datasets: set[str]) -> list[str] | None:
    """Returns the privacy notions of the private runs on `datasets`, the panels a line of theirs
    is drawn in; None (every panel) when none is private."""
    return sorted({r.notion for r in runs if r.dataset in datasets and r.notion != "none"}) or None


def spent_figure(session: Session, run_ids: Sequence[str]) -> dict[str, Any]:
    """Returns accuracy against ε spent so far, per round, one line per run, one panel per notion.

    Raises:
        NotFound: a run does not exist (404).
    """
    series, subtitle = _per_run(
        session,
        run_ids,
        lambda run: {
            "notion": run.notion,
            "delta": run.delta,
            "label": f"{run.algorithm} ε={run.target_epsilon or '–'} ({run.id[:6]})",
        },
    )
    return plots.to_json(plots.accuracy_vs_spent(series, subtitle=subtitle))


def curves_figure(
    session: Session,
    run_ids: Sequence[str],
    *,
    metric: str = "accuracy",
    log_y: bool = False,
    smoothing: float = 0.0,
) -> dict[str, Any]:
    """Returns a metric per round of the given runs, one line per run (a point's drill-down, or
    runs picked to overlay), with an optional log-scale y and smoothing (`dpfl.plots.metric_per_round`).

    Raises:
        NotFound: a run does not exist (404).
    """

    def fields(run: _Compared) -> dict[str, Any]:
        eps = run.target_epsilon if run.target_epsilon is not None else run.epsilon
        privacy = "non-private" if eps is None else f"ε={eps:.3g}"
        return {"seed": run.seed or 0, "label": f"{run.algorithm} {privacy} seed {run.seed} ({run.id[:6]})"}

    series, subtitle = _per_run(session, run_ids, fields)
    figure = plots.metric_per_round(
        series, metric=metric, log_y=log_y, smoothing=smoothing, subtitle=subtitle
    )
    return plots.to_json(figure)


def _per_run(
    session: Session, run_ids: Sequence[str], fields: Callable[[_Compared], dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None]:
    """Returns one series per run, in the order asked (its id, algorithm, `fields(run)` and its
    evaluated rounds), and the figure's subtitle: what the runs share."""
    runs, _ = _runs(session, (), run_ids)
    by_id = {r.id: r for r in runs}
    rounds = _rounds(session, run_ids)
    series = [
        {"id": r.id, "algorithm": r.algorithm, **fields(r), "rounds": rounds[r.id]}
        for r in (by_id[run_id] for run_id in run_ids)
    ]
    return series, plots.compare_subtitle(r.setting() for r in runs) or None


def _rounds(session: Session, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Returns run id ↦ its evaluated rounds ``{round, accuracy, balanced_accuracy, loss, train_loss,
    epsilon}``, in round order (the training loss is a diagnostic, not private; None where withheld)."""
    out: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
    rows = session.execute(
        select(
            RoundMetric.run_id,
            RoundMetric.round,
            RoundMetric.accuracy,
            RoundMetric.balanced_accuracy,
            RoundMetric.loss,
            RoundMetric.epsilon,
            RoundMetric.diagnostics,
        )
        .where(RoundMetric.run_id.in_(run_ids))
        .order_by(RoundMetric.run_id, RoundMetric.round)
    )
    for run_id, r, accuracy, balanced, loss, epsilon, diagnostics in rows:
        train_loss = (diagnostics or {}).get("train_loss")
        out[run_id].append(
            {
                "round": r,
                "accuracy": accuracy,
                "balanced_accuracy": balanced,
                "loss": loss,
                "train_loss": train_loss,
                "epsilon": epsilon,
            }
        )
    return out
