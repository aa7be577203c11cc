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

The silos are drawn in `dpfl.federation.federate`, the noise and planned ε in
`dpfl.projection.project`, and what a run gives back is in `dpfl.results`; all are re-exported here.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
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
from dpfl.device import placed, resolve_device
from dpfl.engine import evaluate
from dpfl.engine.noise import model_draws
from dpfl.errors import SpecError
from dpfl.federation import FederatedData, federate
from dpfl.models import MODELS, build_model, draws_randomness, registered_models
from dpfl.privacy.calibration.stored import store_of
from dpfl.privacy.disclosure import Caveat, split_metrics
from dpfl.privacy.ledger import Ledger
from dpfl.projection import caveats, noise_source, project, uncovered
from dpfl.results import Privacy, Progress, RoundRecord, RunResult
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
    "projected",
    "resolved",
    "run",
    "run_batch",
    "start",
    "train",
    "uncovered",
]

_TRAIN_EVAL_RECORDS = 5_000  # training loss is measured on a fixed subsample of this size
_EVAL_BATCH = 4_096


def resolved(spec: RunSpec) -> RunSpec:
    """Returns the spec with every param its algorithm takes written out, the defaults included:
    what a stored run says it ran with (a blank in the form, a param a clone did not set), so a
    reader, a filter on `params.lr` or a clone sees the value used. The run is the same run.

    Raises:
        UnknownNameError, SpecError: as `check`.
    """
    return check(spec).resolve(spec)


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
    spec: RunSpec,
    *,
    data_dirs: Sequence[Path] = (),
    cache_dir: Path | None = None,
    download: bool = False,
    device: torch.device | None = None,
) -> Algorithm:
    """Returns the algorithm of `spec`, with its data loaded and partitioned and its model built,
    both on `device` (None: the CPU; `dpfl.device`).

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
    # built on the CPU, where its initialisation is drawn (the same weights on every device)
    model = build_model(
        spec.model.name,
        input_shape=data.input_shape,
        num_classes=data.num_classes,
        seed=spec.seed,
        **spec.model.options(),
    )
    if device is None:
        return cls(spec, data, model)
    with placed(device):
        return cls(spec, data.to(device), model.to(device))


def projected(
    spec: RunSpec, *, data_dirs: Sequence[Path] = (), cache_dir: Path | None = None, protected: bool = False
) -> Privacy:
    """Returns the spec's projection as its run computes it (`start`): every check its setup makes
    on the data, σ, each algorithm's noise checks, the σ floor and the planned ε per round.

    The one projection: the preview, admission (single runs and every sweep point) and the
    worker's `start` all come through `project` on the prepared algorithm, so what one accepts
    the others accept. A simulation run's σ and plan are stored under `cache_dir` for its worker.
    """
    source = noise_source(spec, protected=protected)
    algorithm = prepare(spec, data_dirs=data_dirs, cache_dir=cache_dir)
    return project(algorithm, source=source, store=None if cache_dir is None else store_of(cache_dir))


@dataclass
class Started:
    """A run ready to train (`start`): data prepared, σ projected, the algorithm set up."""

    spec: RunSpec  # as given (a protected run's algorithm draws from a secret `noise_key`)
    algorithm: Algorithm
    privacy: Privacy
    withhold: bool  # diagnostics withheld (protected, or noise from OS entropy)
    evaluated: bool  # test accuracy and loss served (a protected run's only on a public test split)
    timings: dict[str, float]
    began: float  # perf_counter() when `start` was called
    train_rows: torch.Tensor = field(repr=False)  # the fixed training subsample `train_loss` is measured on
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))  # where it computes
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
    public_test: bool = False,
    on_phase: Callable[[str], None] | None = None,
    device: torch.device | str | None = None,
) -> Started:
    """Returns the run of `spec` ready to train: its data prepared, its σ projected, its algorithm
    set up. Raises what `prepare` and `project` raise (a SpecError names the field).

    Args:
        data_dirs: folders searched for dataset files.
        cache_dir: where downloads go (None: no downloads), and where prepared datasets and
            projections are kept for the next process.
        download: allow fetching a missing dataset (checksummed).
        protected: the dataset has a privacy budget: randomness from OS entropy, diagnostics
            withheld (a spec asking for seeded noise raises SpecError), and test accuracy and
            loss withheld too unless `public_test`.
        public_test: a protected dataset's test split is public by its owner's declaration (the
            budget's `public_test`), so metrics measured on it are not charged.
        on_phase: hears what the start is doing as it begins each part ("loading data",
            "calibrating σ" or "planning ε", "setting up <algorithm>"), each of which can take
            minutes on large settings.
        device: where it computes: a `torch.device` or its name; None: `DPFL_DEVICE`, else CUDA
            when present, else the CPU (`dpfl.device.resolve_device`). Its numbers are the same
            on the same device; its ledger on every device.
    """
    began = time.perf_counter()
    device = device if isinstance(device, torch.device) else resolve_device(device)
    phase = on_phase or (lambda _: None)
    source = noise_source(spec, protected=protected)
    phase("loading data")
    algorithm = prepare(spec, data_dirs=data_dirs, cache_dir=cache_dir, download=download, device=device)
    if source == "entropy":
        # The data and the model's initialisation stay those of the spec (public choices); every
        # draw of its mechanisms (participation, sampling, noise) is keyed by a 128-bit secret
        # that lives only in this process. The engine hashes the key into each generator's seed.
        algorithm.noise_key = secrets.randbits(128)
    store = None if cache_dir is None else store_of(cache_dir)
    if spec.privacy is not None:
        phase("calibrating σ" if spec.privacy.target.kind == "epsilon" else "planning ε")
    privacy = project(algorithm, source=source, store=store)
    if protected:
        privacy.caveats.append(evaluation_caveat(public_test))
    noise = privacy.noise_multiplier
    phase(f"setting up {spec.algorithm}")
    with placed(device):
        algorithm.setup(
            None if noise is None else np.asarray(noise, dtype=float) if isinstance(noise, list) else noise
        )
    train_rows = torch.randperm(
        len(algorithm.data.y_train), generator=torch.Generator().manual_seed(spec.seed), device="cpu"
    ).to(device)
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
        evaluated=not protected or public_test,
        timings=timings,
        began=began,
        train_rows=train_rows[:_TRAIN_EVAL_RECORDS],
        device=device,
    )


def train(
    runs: Sequence[Started],
    *,
    on_round: Sequence[Callable[[Progress], None] | None] | None = None,
    should_stop: Sequence[Callable[[], bool] | None] | None = None,
    on_end: Callable[[int, RunResult], None] | None = None,
    section: Callable[[list[int]], AbstractContextManager] | None = None,
) -> list[RunResult]:
    """Returns the result of each started run, trained together round by round (a *batch*).

    Runs of one batch share their `batch_key` (algorithm, params, data, model, schedule): they
    differ only in privacy target, noise multiplier and seed. Each round of the batch is one
    `Algorithm.round_many` call, which a family that vectorises over runs computes at once; each
    run keeps its own σ, generators, ledger and records, so its numbers are those it gets alone.
    A model that draws in its forward pass (dropout) takes the runs one at a time, each round under
    the global generator seeded from (the run's noise key, the round) (`_seeded_round`).
    `on_round[i]` hears run i's every round; `should_stop[i]()` ends run i alone, between rounds;
    `on_end(i, result)` hears each run's result as soon as it ends, a stopped one while the others
    go on. `section(active)` wraps each round's computation for the runs of those indices (the
    worker interrupts it when all of them are cancelled: `worker.interrupt`).

    A run's `train_s` is its share of the batch's rounds (their time over the runs in them).
    """
    if not runs:
        return []
    keys = {batch_key(run.spec) for run in runs}
    if len(runs) > 1 and (None in keys or len(keys) > 1):
        raise ValueError("runs trained together must share one batch key (dpfl.batching.batch_key)")
    if len({run.device for run in runs}) > 1:
        raise ValueError("runs trained together must compute on one device")
    hear = list(on_round) if on_round is not None else [None] * len(runs)
    stop = list(should_stop) if should_stop is not None else [None] * len(runs)
    results: dict[int, RunResult] = {}

    def end(i: int) -> None:
        results[i] = _result(runs[i])
        if on_end is not None:
            on_end(i, results[i])

    cls = type(runs[0].algorithm)
    rounds = runs[0].spec.rounds
    device = runs[0].device
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
        with section(active) if section is not None else contextlib.nullcontext(), placed(device):
            if draws_randomness(runs[0].algorithm.model):
                # Dropout draws from the global generator: each run's round gets its own, seeded
                # from (its seed, r), so its masks are those it gets alone.
                outputs = [_seeded_round(cls, runs[i], r) for i in active]
            else:
                outputs = cls.round_many([runs[i].algorithm for i in active], r)
        share = (time.perf_counter() - t0) / len(active)
        for i, out in zip(active, outputs, strict=True):
            run = runs[i]
            run.ledger.record_round(r, out.releases)
            run.timings["train_s"] += share
            epsilon = run.privacy.planned_epsilon[r - 1] if run.privacy.planned_epsilon else None
            record = None
            if r % run.spec.evaluation_interval == 0 or r == rounds:
                with placed(device):
                    record = _evaluated(run, r, out, epsilon)
                run.records.append(record)
            if hear[i] is not None:
                hear[i](Progress(r, rounds, epsilon, record, out.releases))
    for i in range(len(runs)):
        if i not in results:
            end(i)
    return [results[i] for i in range(len(runs))]


def _seeded_round(cls: type[Algorithm], run: Started, r: int) -> RoundOutput:
    """Returns round r of a run whose model draws in its forward pass (dropout), with the global
    generator forked and seeded from (the run's noise key, r) (`dpfl.engine.noise.model_draws`):
    the masks are the mechanism's coins like its sampling and noise (a secret in a protected run,
    the spec's seed in simulation, where the run's numbers depend only on its seed), and the
    caller's generator is left as it was."""
    with model_draws(run.algorithm.noise_key, r, run.device):
        return cls.round_many([run.algorithm], r)[0]


def _evaluated(run: Started, r: int, out: RoundOutput, epsilon: float | None) -> RoundRecord:
    """Returns round r's record of `run`: test metrics, ε planned so far, the algorithm's private
    metrics, and its diagnostics with `train_loss` unless withheld."""
    t0 = time.perf_counter()
    algorithm, data = run.algorithm, run.algorithm.data
    w = algorithm.global_params
    test = None
    if run.evaluated:
        test = evaluate(
            algorithm.model, algorithm.layout, w, data.x_test, data.y_test, batch_size=_EVAL_BATCH
        )
    metrics, diagnostics = split_metrics(out.metrics, algorithm.private_metrics)
    if run.withhold:
        diagnostics = {}
    else:
        rows = run.train_rows
        diagnostics["train_loss"] = evaluate(
            algorithm.model,
            algorithm.layout,
            w,
            data.x_train[rows],
            data.y_train[rows],
            batch_size=_EVAL_BATCH,
        ).loss
    run.timings["eval_s"] += time.perf_counter() - t0
    if test is None:
        return RoundRecord(r, None, None, epsilon, metrics, diagnostics)
    return RoundRecord(r, test.accuracy, test.loss, epsilon, metrics, diagnostics, test.balanced_accuracy)


def evaluation_caveat(public_test: bool) -> Caveat:
    """Returns what a protected run's test accuracy and loss are: measured on a test split public
    by declaration, or withheld (the test records are under the budget, and exact metrics on
    them would release them without noise)."""
    if public_test:
        text = "test accuracy and loss are measured on the test split, public by the budget's declaration"
    else:
        text = (
            "test accuracy and loss are withheld: the test split holds records under the dataset's "
            "budget (declare it public on the budget, `public_test`, to serve them)"
        )
    return Caveat("evaluation", text)


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
        final_params=run.algorithm.global_params.detach().cpu().clone(),
        test_label_histogram=None
        if withhold
        else torch.bincount(data.y_test, minlength=data.num_classes).tolist(),
        class_names=data.class_names,
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
    device: torch.device | str | None = None,
) -> RunResult:
    """Returns the result of running `spec` alone (`start`, then `train` of one run); stops
    cleanly between rounds when `should_stop()`. The arguments are `start`'s and `train`'s."""
    started = start(
        spec, data_dirs=data_dirs, cache_dir=cache_dir, download=download, protected=protected, device=device
    )
    return train([started], on_round=[on_round], should_stop=[should_stop])[0]


def run_batch(
    specs: Sequence[RunSpec],
    *,
    data_dirs: Sequence[Path] = (),
    cache_dir: Path | None = None,
    download: bool = False,
    protected: bool = False,
    device: torch.device | str | None = None,
) -> list[RunResult]:
    """Returns the results of specs that share one batch key, started one by one and trained together."""
    device = device if isinstance(device, torch.device) else resolve_device(device)
    return train(
        [
            start(
                spec,
                data_dirs=data_dirs,
                cache_dir=cache_dir,
                download=download,
                protected=protected,
                device=device,
            )
            for spec in specs
        ]
    )


def _with_ledger_epsilon(records: list[RoundRecord], ledger: Ledger, privacy: Privacy) -> list[RoundRecord]:
    """Returns the records with ε recomputed from what was actually released."""
    if privacy.notion == "none" or not ledger.entries:
        return records
    # ε after the records' rounds alone: their minima, not every round's (`Ledger.epsilon_curves`)
    after = [rec.round for rec in records]
    by_record = ledger.epsilon_by_round(delta=privacy.delta, accountant=privacy.accountant, after=after)
    out = []
    for rec, eps in zip(records, by_record.tolist(), strict=True):
        out.append(replace(rec, epsilon=eps if math.isfinite(eps) else None))
    return out
