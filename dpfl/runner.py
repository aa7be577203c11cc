"""`run(spec)`: the one entry point for a run, and the round loop, written once.

A run is deterministic for a spec and seed in *simulation* (the default on public benchmark
data): data loading, partitions, model initialisation, participation, sampling and noise all
draw from generators seeded by the spec, never from global state. Anyone holding the spec can
regenerate such a run's noise, so its result says so in its caveats. A *protected* run (a
dataset with a privacy budget, or `privacy.noise_source: entropy`) draws every random choice
of its mechanisms (noise, sampling, participation) from generators seeded with 128 bits of OS
entropy that are never stored, and withholds its diagnostics.

The noise multiplier comes from the privacy target: calibrated on the algorithm's plan of
releases (`Algorithm.plan`), taken from the paper's closed form (`calibration: paper`), or
given. The ε shown while the run goes is the plan's; the ε in the result is recomputed from
the ledger of what was actually released.

The silos are drawn in `dpfl.federation.federate`, and what a run gives back is in
`dpfl.results`; both are re-exported here.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from dpfl.algorithms import Algorithm, algorithm_class
from dpfl.algorithms.base import RoundOutput
from dpfl.batching import batch_key
from dpfl.data import dataset_info, registered_datasets
from dpfl.data.partition_kinds import KINDS
from dpfl.data.prepared import load_prepared
from dpfl.data.users import USER_KINDS
from dpfl.engine import evaluate
from dpfl.errors import AccountingError, SpecError
from dpfl.federation import FederatedData, federate
from dpfl.models import MODELS, build_model, registered_models
from dpfl.privacy.accountants import accountant_class, headline_problem
from dpfl.privacy.accountants.gdp import gdp_mu
from dpfl.privacy.calibration import calibrate_noise_multiplier, calibrate_party_noise_multipliers
from dpfl.privacy.calibration.stored import (
    projection_key,
    read_projection,
    storable,
    store_of,
    write_projection,
)
from dpfl.privacy.disclosure import Caveat, split_metrics
from dpfl.privacy.events import gaussian_noise_multipliers
from dpfl.privacy.ledger import Ledger
from dpfl.results import Privacy, Progress, RoundRecord, RunResult, ledger_mu
from dpfl.spec import RunSpec, check_privacy

__all__ = [
    "Privacy",
    "Progress",
    "RoundRecord",
    "RunResult",
    "Started",
    "accepted_datasets",
    "accepted_models",
    "caveats",
    "check",
    "federate",
    "noise_source",
    "prepare",
    "project",
    "run",
    "run_batch",
    "start",
    "train",
]

_TRAIN_EVAL_RECORDS = 5_000  # training loss is measured on a fixed subsample of this size
_EVAL_BATCH = 4_096


def check(spec: RunSpec) -> type[Algorithm]:
    """Returns the class of the spec's algorithm once the spec gives what the class declares it
    needs; loads no data, so the API calls it on every submission before anything else.

    Raises:
        UnknownNameError: the algorithm, model, dataset, partition kind or user kind is not registered.
        SpecError: naming the field: params the algorithm does not take, a model it does not
            train (`models`), a dataset without two classes where it needs them (`binary_labels`),
            no `dataset.users` where it needs them (`requires_users`), or a privacy block its
            notion does not take (`check_privacy`).
    """
    cls = algorithm_class(spec.algorithm)
    params = cls.parse_params(spec.params)
    model = spec.model.name
    # unknown names are refused here, each listing its registry's names
    MODELS[model]
    KINDS[spec.dataset.partition.kind]
    if spec.dataset.users is not None:
        USER_KINDS[spec.dataset.users.kind]
    if model not in accepted_models(cls):
        allowed = accepted_models(cls)
        one_of = f"`{allowed[0]}`" if len(allowed) == 1 else "one of " + ", ".join(f"`{m}`" for m in allowed)
        raise SpecError("model.name", f"must be {one_of} for {cls.name}; got {model!r}.")
    _check_classes(cls, spec.dataset.name, dataset_info(spec.dataset.name).num_classes)
    if cls.requires_users and spec.dataset.users is None:
        raise SpecError(
            "dataset.users",
            f"is required for {cls.name}: say who owns each record, e.g. `users: {{kind: zipf, count: 100}}` "
            "(kinds: uniform, balanced, zipf, natural).",
        )
    check_privacy(spec, cls.notion_of(params))
    return cls


def accepted_models(cls: type[Algorithm]) -> list[str]:
    """Returns the registered models the algorithm trains, sorted."""
    return [m for m in registered_models() if cls.models is None or m in cls.models]


def accepted_datasets(cls: type[Algorithm]) -> list[str]:
    """Returns the registered datasets the algorithm runs on with its default params: those that
    need no files first (bundled or generated), then the others, each by name."""
    names = [
        d
        for d in registered_datasets()
        if _classes_problem(cls, d, dataset_info(d).num_classes) is None
        and (cls.default_datasets is None or d in cls.default_datasets)
    ]
    return sorted(names, key=lambda d: (dataset_info(d).needs_files, d))


def _classes_problem(cls: type[Algorithm], name: str, num_classes: int | None) -> str | None:
    """Returns why the dataset's classes do not suit the algorithm (None: they do, or are unknown
    until the data is loaded, as for csv)."""
    if not cls.binary_labels or num_classes in (None, 2):
        return None
    binary = [d for d in registered_datasets() if dataset_info(d).num_classes in (None, 2)]
    return (
        f"must be a dataset with two classes for {cls.name} (one of {', '.join(binary)}); "
        f"{name!r} has {num_classes}."
    )


def _check_classes(cls: type[Algorithm], name: str, num_classes: int | None) -> None:
    if (problem := _classes_problem(cls, name, num_classes)) is not None:
        raise SpecError("dataset.name", problem)


def prepare(
    spec: RunSpec, *, data_dirs: Sequence[Path] = (), cache_dir: Path | None = None, download: bool = False
) -> Algorithm:
    """Returns the algorithm of `spec`, with its data loaded and partitioned and its model built.

    Raises what `check` raises before any data is loaded; then what the data refuses (the
    algorithm's own checks against it, e.g. a public pool larger than the test split).
    """
    cls = check(spec)
    ds = spec.dataset
    dataset = load_prepared(
        ds.name,
        options=ds.options,
        features=ds.features,
        search_dirs=list(data_dirs),
        cache_dir=cache_dir,
        download=download,
    )
    _check_classes(cls, ds.name, dataset.num_classes)  # a csv's classes are known only now
    dataset, split, owners = federate(dataset, ds, seed=spec.seed)
    _check_classes(cls, ds.name, dataset.num_classes)  # `labels: parity` makes two
    data = FederatedData.build(dataset, split, image=MODELS[spec.model.name].images, users=owners)
    model = build_model(
        spec.model.name,
        input_shape=data.input_shape,
        num_classes=data.num_classes,
        seed=spec.seed,
        **spec.model.options(),
    )
    return cls(spec, data, model)


def noise_source(spec: RunSpec, *, protected: bool) -> str:
    """Returns where a run's randomness comes from: "entropy" (OS, never stored) or "seeded" (the spec).

    A protected dataset (one with a privacy budget) always gets "entropy": a budget only sums
    runs with independent noise, and seeded noise can be regenerated from the published spec.

    Raises:
        SpecError: the spec asks for seeded noise on a protected dataset.
    """
    asked = spec.privacy.noise_source if spec.privacy is not None else "auto"
    if protected and asked == "seeded":
        raise SpecError(
            "privacy.noise_source",
            f"must not be `seeded` on dataset {spec.dataset.name!r}: it has a privacy budget, so its "
            "runs draw noise from OS entropy; remove the field or give `auto`.",
        )
    return "entropy" if protected or asked == "entropy" else "seeded"


def caveats(algorithm: Algorithm, *, source: str) -> list[Caveat]:
    """Returns what the run's ε rests on or does not cover, in the order a reader needs them."""
    out = []
    if source == "seeded":
        out.append(
            Caveat(
                "simulation",
                "noise, sampling and participation are drawn from generators seeded by the "
                "spec's seed, so anyone holding the spec can regenerate them; the ε describes the "
                "mechanism, not a protection of this data (a dataset with a budget gets OS entropy)",
            )
        )
    out += [
        Caveat("preprocessing", f"{step}, without noise: not covered by the ledger", breaks_guarantee=True)
        for step in algorithm.data.fitted
    ]
    if algorithm.trusted is not None:
        out.append(Caveat("trusted", algorithm.trusted))
    if (text := algorithm.privacy_caveat()) is not None:
        out.append(Caveat("data_dependent", text, breaks_guarantee=True))
    return out


def project(algorithm: Algorithm, *, source: str = "seeded", store: Path | None = None) -> Privacy:
    """Returns the run's noise and planned ε per round, without training (calibrating if asked).

    `source` is the run's `noise_source`, which its caveats mention. With `store`, a simulation
    run's σ and planned ε are read from that folder when this spec was projected there before, and
    written there otherwise (`dpfl.privacy.calibration.stored`).
    """
    spec, privacy = algorithm.spec, algorithm.spec.privacy
    check_privacy(spec, algorithm.notion)  # `prepare` checked it too; an algorithm built by hand was not
    if not algorithm.private:
        return Privacy("none", None, None, None, None, None, [], caveats=caveats(algorithm, source="none"))
    # Every path to a run's σ and headline ε comes through here (dpfl run, the worker, admission,
    # POST /api/privacy/project, sweeps, reproductions), so the accountant is checked once, here,
    # before it calibrates anything. Who releases what at which sampling rate does not depend on
    # σ, so a plan at the given σ (or 1) shows whether the accountant is exact for it.
    probe = algorithm.plan(privacy.noise_multiplier or 1.0).party_events()
    problem = headline_problem(privacy.accountant, probe.values())
    if problem is not None:
        raise SpecError("privacy.accountant", f"{problem}; got {privacy.accountant!r}.")
    key = stored = None
    own = storable(type(algorithm), accountant_class(privacy.accountant))
    if store is not None and source == "seeded" and own:
        key = projection_key(spec.model_dump_json(), probe)
        stored = read_projection(store, key, rounds=spec.rounds, silos=spec.dataset.silos)
    sigma: float | np.ndarray
    if stored is None:
        sigma = _noise_multiplier(algorithm)
    else:
        sigma = np.asarray(stored[0]) if isinstance(stored[0], list) else stored[0]
    # What only σ shows is refused here, once it is known, so that every submission path refuses
    # it too (the worker's `setup` makes the same check for a σ given by hand).
    algorithm.check_noise(sigma)
    plan = algorithm.plan(sigma)
    _check_noise_floor(plan, privacy)
    if stored is None:
        by_round = dict(
            zip(
                plan.rounds,
                plan.epsilon_by_round(delta=privacy.delta, accountant=privacy.accountant),
                strict=True,
            )
        )
        planned, eps = [], 0.0
        for r in range(1, spec.rounds + 1):
            eps = float(by_round.get(r, eps))
            planned.append(eps)
    else:
        planned = stored[1]
    sigma_out = float(sigma) if np.ndim(sigma) == 0 else [float(s) for s in np.asarray(sigma)]
    if key is not None and stored is None:
        write_projection(store, key, sigma_out, planned)
    return Privacy(
        algorithm.notion,
        privacy.delta,
        privacy.accountant,
        privacy.calibration,
        sigma_out,
        privacy.epsilon,
        planned,
        target_mu=privacy.mu,
        caveats=caveats(algorithm, source=source),
        noise_source=source,
        neighbouring=algorithm.neighbouring,
    )


def _noise_multiplier(algorithm: Algorithm) -> float | np.ndarray:
    """Returns the run's σ: given, from μ, the paper's closed form, or calibrated to its ε target."""
    spec, privacy = algorithm.spec, algorithm.spec.privacy
    if privacy.noise_multiplier is not None:
        if privacy.calibration == "paper":
            raise SpecError(
                "privacy.calibration", "`paper` calibrates from `epsilon`; remove `noise_multiplier`."
            )
        sigma = privacy.noise_multiplier
    elif privacy.mu is not None:  # the paper's closed form and the accountant agree for GDP releases
        sigma = _gdp_noise_multiplier(algorithm, mu=privacy.mu)
    elif privacy.calibration == "paper":
        paper = algorithm.paper_noise_multiplier(epsilon=privacy.epsilon, delta=privacy.delta)
        if paper is None:
            raise SpecError(
                "privacy.calibration", f"`paper` is not offered by {spec.algorithm}; use `accountant`."
            )
        sigma = paper
    elif algorithm.notion == "gdp" and privacy.accountant == "gdp":  # (ε, δ) → μ exactly, then closed form
        sigma = _gdp_noise_multiplier(algorithm, mu=gdp_mu(epsilon=privacy.epsilon, delta=privacy.delta))
    elif algorithm.party_of_silo is not None:  # each silo accounted on its own: its own smallest σ
        sigma = calibrate_party_noise_multipliers(
            lambda s: algorithm.plan(s).party_events(),
            parties=[algorithm.party_of_silo(i) for i in range(spec.dataset.silos)],
            target_epsilon=privacy.epsilon,
            target_delta=privacy.delta,
            accountant=privacy.accountant,
        )
    else:
        sigma = calibrate_noise_multiplier(
            lambda s: list(algorithm.plan(s).party_events().values()),
            target_epsilon=privacy.epsilon,
            target_delta=privacy.delta,
            accountant=privacy.accountant,
        )
    return sigma


def _check_noise_floor(plan: Ledger, privacy) -> None:
    """Refuses Gaussian releases below the σ the accountant evaluates in bounded time and memory,
    naming the field (other releases, e.g. an (ε, δ) pair, have no such floor)."""
    floor = accountant_class(privacy.accountant).min_noise_multiplier
    sigmas = [s for e in plan.party_events().values() for s in gaussian_noise_multipliers(e)]
    smallest = min(sigmas, default=math.inf)
    if floor is None or smallest >= floor:
        return
    field = (
        "privacy.noise_multiplier"
        if privacy.noise_multiplier is not None
        else "privacy.mu"
        if privacy.mu is not None
        else "privacy.epsilon"
    )
    raise SpecError(
        field,
        f"gives a noise multiplier of {smallest:g}; the {privacy.accountant} accountant evaluates "
        f"σ ≥ {floor:g} in bounded time and memory (its grid grows as 1/σ²); use σ ≥ {floor:g} "
        "or the rdp accountant.",
    )


def _gdp_noise_multiplier(algorithm: Algorithm, *, mu: float) -> float:
    """Returns the σ under which the least private party's releases compose to exactly μ.

    A `gdp` algorithm's releases are Gaussian, each (1/σ)-GDP, so a party's μ is √(releases)/σ:
    the plan under σ = 1 gives the scale (for GDP-LocalNewton σ = √(2T)/μ, the paper's closed
    form), and the check refuses a plan that does not scale that way.
    """
    unit = ledger_mu(algorithm.plan(1.0))
    sigma = unit / mu if unit > 0 else math.inf
    if not (math.isfinite(sigma) and math.isclose(ledger_mu(algorithm.plan(sigma)), mu, rel_tol=1e-9)):
        raise AccountingError(
            f"{algorithm.name}: its planned releases do not compose to a μ proportional to 1/σ, "
            f"so the target μ = {mu:g} cannot be met in closed form"
        )
    return sigma


@dataclass
class Started:
    """A run ready to train (`start`): data prepared, σ projected, the algorithm set up."""

    spec: RunSpec  # as given (a protected run's algorithm holds a secret seed instead)
    algorithm: Algorithm
    privacy: Privacy
    withhold: bool  # diagnostics withheld (protected, or noise from OS entropy)
    timings: dict[str, float]
    began: float  # perf_counter() when `start` was called
    train_rows: torch.Tensor = field(repr=False)  # the fixed training subsample `train_loss` is measured on
    ledger: Ledger = field(default_factory=Ledger)
    records: list[RoundRecord] = field(default_factory=list)
    stopped: bool = False


def start(
    spec: RunSpec,
    *,
    data_dirs: Sequence[Path] = (),
    cache_dir: Path | None = None,
    download: bool = False,
    protected: bool = False,
) -> Started:
    """Returns the run of `spec` ready to train: its data prepared, its σ projected, its algorithm
    set up. Raises what `prepare` and `project` raise (a SpecError names the field).

    Args:
        data_dirs: folders searched for dataset files.
        cache_dir: where downloads go (None: no downloads), and where prepared datasets and
            projections are kept for the next process.
        download: allow fetching a missing dataset (checksummed).
        protected: the dataset has a privacy budget: randomness from OS entropy, diagnostics
            withheld (a spec asking for seeded noise raises SpecError).
    """
    began = time.perf_counter()
    source = noise_source(spec, protected=protected)
    algorithm = prepare(spec, data_dirs=data_dirs, cache_dir=cache_dir, download=download)
    if source == "entropy":
        # The data and the model's initialisation stay those of the spec (public choices); every
        # draw the algorithm makes from here on (participation, sampling, noise) is keyed by a
        # 128-bit secret that lives only in this process. The spec's own range (< 2³¹) is no
        # bound on it: the engine hashes the key into each generator's seed.
        algorithm.spec = spec.model_copy(update={"seed": secrets.randbits(128)})
    store = None if cache_dir is None else store_of(cache_dir)
    privacy = project(algorithm, source=source, store=store)
    noise = privacy.noise_multiplier
    algorithm.setup(
        None if noise is None else np.asarray(noise, dtype=float) if isinstance(noise, list) else noise
    )
    train_rows = torch.randperm(
        len(algorithm.data.y_train), generator=torch.Generator().manual_seed(spec.seed)
    )
    # The threads go with the times: a run's times mean little without them.
    timings = {
        "setup_s": time.perf_counter() - began,
        "train_s": 0.0,
        "eval_s": 0.0,
        "threads": torch.get_num_threads(),
        "batch_runs": 1,
    }
    return Started(
        spec,
        algorithm,
        privacy,
        withhold=protected or source == "entropy",
        timings=timings,
        began=began,
        train_rows=train_rows[:_TRAIN_EVAL_RECORDS],
    )


def train(
    runs: Sequence[Started],
    *,
    on_round: Sequence[Callable[[Progress], None] | None] | None = None,
    should_stop: Sequence[Callable[[], bool] | None] | None = None,
    on_end: Callable[[int, RunResult], None] | None = None,
) -> list[RunResult]:
    """Returns the result of each started run, trained together round by round (a *batch*).

    Runs of one batch share their `batch_key` (algorithm, params, data, model, schedule): they
    differ only in privacy target, noise multiplier and seed. Each round of the batch is one
    `Algorithm.round_many` call, which a family that vectorises over runs computes at once; each
    run keeps its own σ, generators, ledger and records, so its numbers are those it gets alone.
    `on_round[i]` hears run i's every round; `should_stop[i]()` ends run i alone, between rounds;
    `on_end(i, result)` hears each run's result as soon as it ends, a stopped one while the others
    go on.

    A run's `train_s` is its share of the batch's rounds (their time over the runs in them).
    """
    if not runs:
        return []
    keys = {batch_key(run.spec) for run in runs}
    if len(runs) > 1 and (None in keys or len(keys) > 1):
        raise ValueError("runs trained together must share one batch key (dpfl.batching.batch_key)")
    hear = list(on_round) if on_round is not None else [None] * len(runs)
    stop = list(should_stop) if should_stop is not None else [None] * len(runs)
    results: dict[int, RunResult] = {}

    def end(i: int) -> None:
        results[i] = _result(runs[i])
        if on_end is not None:
            on_end(i, results[i])

    cls = type(runs[0].algorithm)
    rounds = runs[0].spec.rounds
    for run in runs:
        run.timings["batch_runs"] = len(runs)
    for r in range(1, rounds + 1):
        for i, (run, asked) in enumerate(zip(runs, stop, strict=True)):
            if not run.stopped and asked is not None and asked():
                run.stopped = True
                end(i)
        active = [i for i, run in enumerate(runs) if not run.stopped]
        if not active:
            break
        t0 = time.perf_counter()
        outputs = cls.round_many([runs[i].algorithm for i in active], r)
        share = (time.perf_counter() - t0) / len(active)
        for i, out in zip(active, outputs, strict=True):
            run = runs[i]
            run.ledger.record_round(r, out.releases)
            run.timings["train_s"] += share
            epsilon = run.privacy.planned_epsilon[r - 1] if run.privacy.planned_epsilon else None
            record = None
            if r % run.spec.evaluation_interval == 0 or r == rounds:
                record = _evaluated(run, r, out, epsilon)
                run.records.append(record)
            if hear[i] is not None:
                hear[i](Progress(r, rounds, epsilon, record, out.releases))
    for i in range(len(runs)):
        if i not in results:
            end(i)
    return [results[i] for i in range(len(runs))]


def _evaluated(run: Started, r: int, out: RoundOutput, epsilon: float | None) -> RoundRecord:
    """Returns round r's record of `run`: test metrics, ε planned so far, the algorithm's private
    metrics, and its diagnostics with `train_loss` unless withheld."""
    t0 = time.perf_counter()
    algorithm, data = run.algorithm, run.algorithm.data
    w = algorithm.global_params
    loss, acc = evaluate(
        algorithm.model, algorithm.layout, w, data.x_test, data.y_test, batch_size=_EVAL_BATCH
    )
    metrics, diagnostics = split_metrics(out.metrics, algorithm.private_metrics)
    if run.withhold:
        diagnostics = {}
    else:
        rows = run.train_rows
        diagnostics["train_loss"], _ = evaluate(
            algorithm.model,
            algorithm.layout,
            w,
            data.x_train[rows],
            data.y_train[rows],
            batch_size=_EVAL_BATCH,
        )
    run.timings["eval_s"] += time.perf_counter() - t0
    return RoundRecord(r, acc, loss, epsilon, metrics, diagnostics)


def _result(run: Started) -> RunResult:
    """Returns a trained run's result, its ε per record recomputed from its ledger."""
    records = _with_ledger_epsilon(run.records, run.ledger, run.privacy)
    run.timings["total_s"] = time.perf_counter() - run.began
    data, withhold = run.algorithm.data, run.withhold
    return RunResult(
        run.spec,
        records,
        run.privacy,
        run.ledger,
        run.timings,
        run.stopped,
        None if withhold else data.label_histogram,
        None if data.users is None or withhold else data.users.summary(),
        protected=withhold,
        final_params=run.algorithm.global_params.detach().clone(),
        test_label_histogram=None
        if withhold
        else torch.bincount(data.y_test, minlength=data.num_classes).tolist(),
    )


def run(
    spec: RunSpec,
    *,
    data_dirs: Sequence[Path] = (),
    cache_dir: Path | None = None,
    download: bool = False,
    on_round: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    protected: bool = False,
) -> RunResult:
    """Returns the result of running `spec` alone (`start`, then `train` of one run); stops
    cleanly between rounds when `should_stop()`. The arguments are `start`'s and `train`'s."""
    started = start(spec, data_dirs=data_dirs, cache_dir=cache_dir, download=download, protected=protected)
    return train([started], on_round=[on_round], should_stop=[should_stop])[0]


def run_batch(
    specs: Sequence[RunSpec],
    *,
    data_dirs: Sequence[Path] = (),
    cache_dir: Path | None = None,
    download: bool = False,
    protected: bool = False,
) -> list[RunResult]:
    """Returns the results of specs that share one batch key, started one by one and trained together."""
    return train(
        [
            start(spec, data_dirs=data_dirs, cache_dir=cache_dir, download=download, protected=protected)
            for spec in specs
        ]
    )


def _with_ledger_epsilon(records: list[RoundRecord], ledger: Ledger, privacy: Privacy) -> list[RoundRecord]:
    """Returns the records with ε recomputed from what was actually released."""
    if privacy.notion == "none" or not ledger.entries:
        return records
    by_round = dict(
        zip(
            ledger.rounds,
            ledger.epsilon_by_round(delta=privacy.delta, accountant=privacy.accountant),
            strict=True,
        )
    )
    out, eps, known = [], 0.0, sorted(by_round)
    for rec in records:
        done = [r for r in known if r <= rec.round]
        eps = float(by_round[done[-1]]) if done else 0.0
        out.append(
            RoundRecord(
                rec.round,
                rec.accuracy,
                rec.loss,
                eps if math.isfinite(eps) else None,
                rec.metrics,
                rec.diagnostics,
            )
        )
    return out
