"""A reproduction's results reduced to rows, verdicts on the paper's claims, and privacy corrections.

Pure functions over plain records, so local runs and runs read back from a server are summarised
by the same code, and the statistics are tested with numbers.

- A row is one (setting, variant, algorithm, x) cell: the mean and sample standard deviation
  (ddof 1; None for one run) of final test accuracy and loss over the succeeded seeds, the mean
  and maximum ε the ledgers add up to, the target ε, and the paper's number for the cell with
  the ε the paper states for it.
- A claim "A beats B on a metric (by at least m)" is checked on each method's mean over the x
  values both have (a non-private method has one value and is compared with the other's mean),
  at the final round or at the round the claim names. It holds when A is better by more than 0,
  and by at least m when m is given; it cannot be checked when either method has no finished
  run (evaluated at that round). A gap smaller than the largest standard deviation over seeds
  of either method's cells is called a tie within noise in the detail (the verdict stands).
- A tuned method's cell is the candidate with the lowest mean final training loss over its
  succeeded seeds (candidates without one are passed over); the row says which, and every
  candidate's training loss.
- A method under `sensitivity` keeps its configured cell; its candidates' runs make rows of
  their own (role `sensitivity`), and `sensitivity` checks each claim again with each candidate
  standing for the method; so it does for each candidate of a tuned method. Ceiling runs (role
  `ceiling`) make one row per method and variant, off the x axis, and no verdict reads them.
- A privacy correction is a run whose ledger ε exceeds its target (e.g. a paper's closed-form
  noise): the report says so next to the ε the paper states.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpfl.reproduce.manifest import CEILING, SENSITIVITY, Claim, PaperValue, ReproduceBlock

__all__ = [
    "CANNOT",
    "DOES_NOT_HOLD",
    "HOLDS",
    "Outcome",
    "Sensitivity",
    "Verdict",
    "check_claim",
    "corrections",
    "largest",
    "metric_value",
    "row_name",
    "sensitivity",
    "summary_rows",
    "variant_label",
    "verdicts",
]

HOLDS, DOES_NOT_HOLD, CANNOT = "holds", "does not hold", "cannot be checked"
_TOLERANCE = 1e-9  # relative slack before a ledger ε counts as above its target
Variant = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Outcome:
    """One run of a reproduction: where it sits in the sweep and what it reached.

    Attributes:
        x: the run's value of the setting's x field (None: a non-private run without it).
        variant: the values of the grid's other keys, as (key, value) pairs.
        status: succeeded, failed or cancelled.
        accuracy, loss: final test accuracy in [0, 1] and test loss (None unless succeeded); the
            accuracy is the dataset's headline metric (`DatasetInfo.metric`): balanced accuracy
            for Creditcard.
        train_loss: final training loss (a diagnostic; what tuning selects by), when recorded.
        candidate: the tuning or sensitivity candidate the run is of ("" for none).
        role: "" for a run of its method's cell, `ceiling` or `sensitivity` for one beside it.
        sigma: the noise multiplier it ran with (the largest, when each silo has its own).
        curve: test accuracy and loss at every evaluated round, for claims checked at a round.
        epsilon: the ε its ledger adds up to (None for a non-private or unfinished run).
        target_epsilon: the ε it was calibrated to (None without an ε target).
        warning: what the run said about its privacy (a caveat, an ε above target).
        error: why it failed.
    """

    setting: str
    algorithm: str
    x: float | None
    variant: Variant
    seed: int
    status: str
    accuracy: float | None = None
    loss: float | None = None
    epsilon: float | None = None
    target_epsilon: float | None = None
    warning: str | None = None
    error: str | None = None
    duration_s: float | None = None
    curve: tuple[tuple[int, float, float], ...] = ()  # (round, accuracy, loss) of every evaluation
    train_loss: float | None = None
    candidate: str = ""
    role: str = ""
    sigma: float | None = None

    @property
    def label(self) -> str:
        """Returns a short name of the run: setting, algorithm, x, variant and seed."""
        x = "" if self.x is None else f" x={self.x:g}"
        variant = f" {variant_label(self.variant)}" if self.variant else ""
        candidate = f" ({self.candidate})" if self.candidate else ""
        role = " without noise" if self.role == CEILING else ""
        return f"{self.setting} {self.algorithm}{candidate}{role}{x}{variant} seed {self.seed}"


@dataclass(frozen=True)
class Verdict:
    """A claim checked on one variant of one setting: the verdict, the measured gap and why."""

    setting: str
    variant: Variant
    claim: Claim
    verdict: str
    gap: float | None  # how much `better` beats `than` (> 0: it does), in the metric's units
    detail: str


def largest(noise_multiplier: float | Sequence[float] | None) -> float | None:
    """Returns a run's σ as one number: the largest of a σ per silo (None for none)."""
    if noise_multiplier is None or isinstance(noise_multiplier, int | float):
        return noise_multiplier
    return max(noise_multiplier, default=None)


def row_name(row: Mapping[str, Any]) -> str:
    """Returns the name a row goes by: its method, and the ceiling or the candidate it runs."""
    if row.get("role") == CEILING:
        return f"{row['algorithm']} without noise"
    return row["algorithm"] + (f" ({row['candidate']})" if row.get("candidate") else "")


def variant_label(variant: Variant) -> str:
    """Returns `key=value, …` of a variant ("" for none)."""
    return ", ".join(f"{k}={v}" for k, v in variant)


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None  # sample std, ddof = 1


def _same_x(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9))


def _matches(where: Mapping[str, Any], variant: Variant) -> bool:
    values = dict(variant)
    return all(key in values and values[key] == value for key, value in where.items())


def metric_value(row: Mapping[str, Any], metric: str, round: int | None = None) -> float | None:
    """Returns a row's mean in `metric` (accuracy, test error = 1 − accuracy, or loss), at the final
    round or at `round` (None where that round was not evaluated)."""
    means = row if round is None else row.get("by_round", {}).get(round)
    if means is None:
        return None
    if metric == "loss":
        return means["loss_mean"]
    acc = means["accuracy_mean"]
    return None if acc is None else (acc if metric == "accuracy" else 1.0 - acc)


def _by_round(runs: Sequence[Outcome]) -> dict[int, dict[str, float | None]]:
    """Returns the mean test accuracy and loss at every round that each of `runs` evaluated."""
    curves = [dict((r, (acc, loss)) for r, acc, loss in o.curve) for o in runs]
    shared = set.intersection(*(set(c) for c in curves)) if curves else set()
    return {
        r: {
            "accuracy_mean": _mean([c[r][0] for c in curves]),
            "loss_mean": _mean([c[r][1] for c in curves]),
        }
        for r in sorted(shared)
    }


def _paper_value(
    entries: Sequence[PaperValue], algorithm: str, x: float | None, variant: Variant
) -> PaperValue | None:
    for entry in entries:
        if entry.algorithm == algorithm and _same_x(entry.x, x) and _matches(entry.where, variant):
            return entry
    return None


def summary_rows(outcomes: Iterable[Outcome], blocks: Mapping[str, ReproduceBlock]) -> list[dict[str, Any]]:
    """Returns one row per (setting, variant, algorithm, x, role), and per sensitivity candidate,
    in the order the cells first appear.

    Each row: setting, variant, algorithm, x, n (succeeded runs), failed, accuracy_mean,
    accuracy_std, loss_mean, loss_std, epsilon_mean, epsilon_max (ledger ε spent), target_epsilon,
    by_round (round → mean accuracy and loss, for the rounds every succeeded run evaluated), and
    the paper's number for the cell: paper_metric, paper_value, ours (our mean in the paper's
    metric), paper_epsilon (the ε the paper states), paper_source; None where not given; for a
    tuned method, `tuned` (the chosen candidate) and `tuned_losses` (candidate → mean final
    training loss, None where none finished); `role` and `candidate` (of a sensitivity row); and
    `sigma`, the noise multiplier of the succeeded runs (their largest; None for none).
    """
    groups: dict[tuple, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        x = None if o.x is None else round(o.x, 12)
        candidate = o.candidate if o.role == SENSITIVITY else ""
        groups[(o.setting, o.variant, o.algorithm, x, o.role, candidate)].append(o)
    rows = []
    for (setting, variant, algorithm, _, role, candidate), cell in groups.items():
        members, chosen, losses = (list(cell), None, None) if role else _chosen(cell)
        done = [o for o in members if o.status == "succeeded"]
        accuracy = [o.accuracy for o in done if o.accuracy is not None]
        loss = [o.loss for o in done if o.loss is not None]
        spent = [o.epsilon for o in done if o.epsilon is not None]
        sigmas = [o.sigma for o in done if o.sigma is not None]
        targets = {o.target_epsilon for o in members}
        block, x = blocks[setting], members[0].x
        row = {
            "setting": setting,
            "variant": variant_label(variant),
            "algorithm": algorithm,
            "x": x,
            "n": len(done),
            "failed": len(members) - len(done),
            "accuracy_mean": _mean(accuracy),
            "accuracy_std": _std(accuracy),
            "loss_mean": _mean(loss),
            "loss_std": _std(loss),
            "epsilon_mean": _mean(spent),
            "epsilon_max": max(spent) if spent else None,
            "target_epsilon": targets.pop() if len(targets) == 1 else None,
            "by_round": _by_round(done),
            "tuned": chosen,
            "tuned_losses": losses,
            "role": role,
            "candidate": candidate,
            "sigma": max(sigmas) if sigmas else None,
        }
        entry = None if role else _paper_value(block.paper, algorithm, x, variant)
        stated = None
        if entry is not None:
            stated = (
                entry.epsilon if entry.epsilon is not None else (x if block.x == "privacy.epsilon" else None)
            )
        row |= {
            "paper_metric": None if entry is None else entry.metric,
            "paper_value": None if entry is None else entry.value,
            "ours": None if entry is None else metric_value(row, entry.metric),
            "paper_epsilon": stated,
            "paper_source": None if entry is None else entry.source,
        }
        rows.append(row)
    return rows


def _chosen(cell: Sequence[Outcome]) -> tuple[list[Outcome], str | None, dict[str, float | None] | None]:
    """Returns the runs that stand for a cell, the chosen candidate and every candidate's mean final
    training loss: all runs and None, None for a method that is not tuned."""
    by_candidate: dict[str, list[Outcome]] = defaultdict(list)
    for o in cell:
        by_candidate[o.candidate].append(o)
    if set(by_candidate) == {""}:
        return list(cell), None, None
    losses = {
        label: _mean([o.train_loss for o in runs if o.status == "succeeded" and o.train_loss is not None])
        for label, runs in by_candidate.items()
    }
    finished = {label: loss for label, loss in losses.items() if loss is not None}
    # no candidate finished: the first one's failed runs stand for the cell, which shows them
    chosen = min(finished, key=finished.__getitem__) if finished else next(iter(by_candidate))
    return by_candidate[chosen], chosen, losses


def _by_x(
    rows: Sequence[Mapping[str, Any]], algorithm: str, metric: str, round: int | None
) -> dict[float | None, float]:
    out = {}
    for row in rows:
        value = metric_value(row, metric, round)
        if row["algorithm"] == algorithm and value is not None:
            out[row["x"]] = value
    return out


def _amount(metric: str, value: float) -> str:
    return (
        f"{100 * value:.2f} points of {metric.replace('_', ' ')}"
        if metric != "loss"
        else f"{value:.4g} of loss"
    )


def check_claim(
    claim: Claim, rows: Sequence[Mapping[str, Any]], *, setting: str, variant: Variant
) -> Verdict:
    """Returns the verdict of `claim` on the rows of one setting and variant (see the module docstring)."""
    mine = [
        r
        for r in rows
        if r["setting"] == setting and r["variant"] == variant_label(variant) and not r.get("role")
    ]
    better = _by_x(mine, claim.better, claim.metric, claim.round)
    than = _by_x(mine, claim.than, claim.metric, claim.round)
    if claim.than_at is not None:  # one value of `than`, against `better`'s mean over its x
        at = [v for x, v in than.items() if x is not None and _same_x(x, claim.than_at)]
        than = {None: at[0]} if at else {}
    missing = [name for name, values in ((claim.better, better), (claim.than, than)) if not values]
    if missing:
        what = "finished run" if claim.round is None else f"run evaluated at round {claim.round}"
        return Verdict(setting, variant, claim, CANNOT, None, f"no {what} of {' and '.join(missing)}")
    if None in better or None in than:  # a non-private method: one value against the other's mean
        xs = sorted(x for x in (*better, *than) if x is not None)
        a, b = _mean(list(better.values())), _mean(list(than.values()))
    else:
        xs = sorted(set(better) & set(than))
        if not xs:
            return Verdict(setting, variant, claim, CANNOT, None, "the two methods share no x value")
        a, b = _mean([better[x] for x in xs]), _mean([than[x] for x in xs])
    assert a is not None and b is not None
    gap = a - b if claim.metric == "accuracy" else b - a
    holds = gap > 0 and (claim.by is None or gap >= claim.by)
    where = "at " if len(xs) == 1 else "on average over "
    side = "ahead of" if gap > 0 else "behind"
    at_round = "" if claim.round is None else f"at round {claim.round}, "
    detail = (
        f"{claim.better} {side} {claim.than} by {_amount(claim.metric, abs(gap))} "
        f"{at_round}{where}x ∈ {{{', '.join(f'{x:g}' for x in xs)}}}"
        + ("" if claim.than_at is None else f" against {claim.than} at x = {claim.than_at:g}")
        + ("" if claim.by is None else f"; the claim needs ≥ {_amount(claim.metric, claim.by)}")
    )
    spread = _spread(mine, (claim.better, claim.than), claim.metric, claim.round)
    if spread is not None and abs(gap) < spread:
        noise = _amount(claim.metric, spread)
        detail += f", less than the seeds' standard deviation ({noise}): a tie within noise"
    return Verdict(setting, variant, claim, HOLDS if holds else DOES_NOT_HOLD, gap, detail)


def _spread(
    rows: Sequence[Mapping[str, Any]], methods: Sequence[str], metric: str, round: int | None
) -> float | None:
    """Returns the largest seed standard deviation of the methods' final cells (None: unknown or
    checked at a round, where rows keep means only)."""
    key = "loss_std" if metric == "loss" else "accuracy_std"
    stds = [r.get(key) for r in rows if r["algorithm"] in methods]
    stds = [v for v in stds if v is not None]
    return max(stds) if stds and round is None else None


def verdicts(
    outcomes: Sequence[Outcome], rows: Sequence[Mapping[str, Any]], blocks: Mapping[str, ReproduceBlock]
) -> list[Verdict]:
    """Returns the verdict of every claim of every setting, per variant its `where` matches."""
    variants: dict[str, list[Variant]] = defaultdict(list)
    for o in outcomes:
        if o.variant not in variants[o.setting]:
            variants[o.setting].append(o.variant)
    return [
        check_claim(claim, rows, setting=setting, variant=variant)
        for setting, block in blocks.items()
        for variant in variants[setting] or [()]
        for claim in block.claims
        if _matches(claim.where, variant)
    ]


@dataclass(frozen=True)
class Sensitivity:
    """One line of a sensitivity table: a method with one candidate standing in for its configured
    point ("" for the point itself), its rows per x, and each claim on it checked again so."""

    setting: str
    variant: Variant
    method: str
    candidate: str
    rows: tuple[Mapping[str, Any], ...]
    verdicts: tuple[Verdict, ...]


def sensitivity(
    outcomes: Sequence[Outcome], rows: Sequence[Mapping[str, Any]], blocks: Mapping[str, ReproduceBlock]
) -> list[Sensitivity]:
    """Returns, for each method under `sensitivity` or `tune` in each variant, a line for its
    configured (or tuned) cell and one per candidate (see the module docstring), with the verdict
    of each claim naming it: a tuned method's candidates stand in with their own runs."""
    variants: dict[str, list[Variant]] = defaultdict(list)
    for o in outcomes:
        if o.variant not in variants[o.setting]:
            variants[o.setting].append(o.variant)
    out = []
    for setting, block in blocks.items():
        tables = block.sensitivity | block.tune
        for variant, method in ((v, m) for v in variants[setting] for m in tables):
            label = variant_label(variant)
            mine = [r for r in rows if r["setting"] == setting and r["variant"] == label]
            others = [r for r in mine if not r["role"] and r["algorithm"] != method]
            for candidate in ["", *(c.label for c in tables[method])]:
                if candidate and method in block.tune:  # the candidate's own runs, as if untuned
                    runs = [
                        dataclasses.replace(o, candidate="")
                        for o in outcomes
                        if (o.setting, o.variant, o.algorithm, o.candidate)
                        == (setting, variant, method, candidate)
                    ]
                    own = summary_rows(runs, blocks)
                else:
                    role = SENSITIVITY if candidate else ""
                    own = [
                        r
                        for r in mine
                        if r["algorithm"] == method and r["role"] == role and r["candidate"] == candidate
                    ]
                standing = [*others, *(dict(r, role="", candidate="") for r in own)]
                checked = tuple(
                    check_claim(claim, standing, setting=setting, variant=variant)
                    for claim in block.claims
                    if method in (claim.better, claim.than) and _matches(claim.where, variant)
                )
                out.append(Sensitivity(setting, variant, method, candidate, tuple(own), checked))
    return out


def corrections(outcomes: Iterable[Outcome]) -> list[str]:
    """Returns one line per run whose ledger ε exceeds its target, and one line per privacy warning
    shared by runs (how many, and of which settings and methods), so a caveat every run carries
    (PCA fitted on the training rows, say) is said once."""
    lines: list[str] = []
    warned: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        over = (
            o.epsilon is not None
            and o.target_epsilon is not None
            and o.epsilon > o.target_epsilon * (1 + _TOLERANCE)
        )
        if over:
            lines.append(
                f"{o.label}: the ledger gives ε = {o.epsilon:.4g} for a stated ε of {o.target_epsilon:g}"
            )
        elif o.warning:
            warned[o.warning].append(o)
    for warning, runs in warned.items():
        if len(runs) == 1:
            lines.append(f"{runs[0].label}: {warning}")
            continue
        methods = ", ".join(dict.fromkeys(f"{o.setting} {o.algorithm}" for o in runs))
        lines.append(f"{len(runs)} runs ({methods}): {warning}")
    return lines
