"""Peers benchmark: DP-FL Explorer against Opacus, Flower and pfl-research on the same workloads.

Side by side on the same MNIST PCA-50 data, silos, MLP and initial weights, rounds, batch,
clip and ε (the peers read our loader's output, exported once: `benchmarks.peers_data`):

1. ISRL-DP MB-SGD, 25 silos, 50 rounds, ε = 3 per silo: ours (a fresh `dpfl run` of the spec)
   against an Opacus per-silo loop and Flower's simulation with Opacus clients;
2. DP-FedAvg, client-level central DP, 100 clients sampled at q = 0.2, 50 rounds, ε = 3: ours
   (`dp_fedavg`) against Flower's simulation with `DifferentialPrivacyServerSideFixedClipping`
   and pfl-research's central Gaussian mechanism;
3. workload 1 swept over 5 ε × 3 seeds (fewer rounds, SWEEP_ROUNDS): ours as one batched sweep
   in one process (what `dpfl reproduce` runs), each peer as 15 runs one after the other.

Each tool runs in a fresh process, timed whole (start to exit) and per round (its rounds' own
seconds over the rounds). A row whose accuracies differ by more than ACCURACY_TOLERANCE or whose
ε's differ by more than EPSILON_TOLERANCE (relative) is void: its ratios are not claimed. Also
an accountant table: every tool's ε for the same σ, q and steps.

The peers live in their own venv (.venv-peers, built here from benchmarks/peer_runs/
requirements.txt with -c constraints.txt): pfl 0.6 needs dp-accounting < 0.6, ours has 0.6.

Usage: python -m benchmarks.peers [--no-write] [--sweep-rounds R] [--sweep-peers NAME[,NAME]]
Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.report import print_headline, publish, write_section  # noqa: E402

TITLE = "Peers: against Opacus, Flower and pfl-research"
PEERS_VENV = ROOT / ".venv-peers"
PEER_RUNS = ROOT / "benchmarks" / "peer_runs"
REQUIREMENTS = PEER_RUNS / "requirements.txt"
EPSILONS = (1.0, 2.0, 3.0, 5.0, 8.0)
SEEDS = (0, 1, 2)
SWEEP_ROUNDS = 10  # the full 50-round sweep of the peers alone takes over half an hour on 2 cores
ACCURACY_TOLERANCE = 0.02  # absolute
EPSILON_TOLERANCE = 0.02  # relative
TARGET_WHOLE, TARGET_ROUND = 10.0, 20.0  # peer seconds / ours, at least


@dataclass
class Measure:
    """One tool's run (or sweep) of a workload: seconds whole and per round, accuracy, ε."""

    tool: str
    seconds: float  # the whole process, start to exit
    per_round: float  # the rounds' own seconds over the rounds (over all runs' rounds, for a sweep)
    accuracy: float  # mean over the runs, for a sweep
    epsilon: tuple[float, ...]  # one per distinct ε target
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Row:
    """Ours against one peer on one workload."""

    workload: str
    ours: Measure
    peer: Measure

    @property
    def void(self) -> str | None:
        """Returns why the row is void (accuracy or ε differ), or None when it stands."""
        gap = abs(self.ours.accuracy - self.peer.accuracy)
        if gap > ACCURACY_TOLERANCE:
            return f"accuracy differs by {gap:.3f}"
        if len(self.ours.epsilon) != len(self.peer.epsilon) or any(
            abs(a - b) > EPSILON_TOLERANCE * max(a, b)
            for a, b in zip(self.ours.epsilon, self.peer.epsilon, strict=False)
        ):
            return "ε differs"
        return None

    @property
    def whole_speedup(self) -> float:
        return self.peer.seconds / self.ours.seconds

    @property
    def round_speedup(self) -> float:
        return self.peer.per_round / self.ours.per_round

    @property
    def met(self) -> bool | None:
        """Returns whether both targets are met (None for a void row: nothing is claimed)."""
        if self.void:
            return None
        return self.whole_speedup >= TARGET_WHOLE and self.round_speedup >= TARGET_ROUND


def render(rows: Sequence[Row]) -> str:
    """Returns the markdown table of the rows: each tool's seconds, accuracy and ε side by side."""
    lines = [
        "| workload | peer | whole process: ours / peer | speed-up | per round: ours / peer | speed-up "
        "| accuracy: ours / peer | ε: ours / peer | met (≥ 10× whole, ≥ 20× round) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        o, p, void = row.ours, row.peer, row.void
        met = f"void: {void}" if void else ("yes" if row.met else "**no**")
        lines.append(
            f"| {row.workload} | {p.tool} | {o.seconds:.1f} s / {p.seconds:.1f} s | "
            f"{'—' if void else f'{row.whole_speedup:.1f}×'} | "
            f"{_seconds(o.per_round)} / {_seconds(p.per_round)} | "
            f"{'—' if void else f'{row.round_speedup:.0f}×'} | {o.accuracy:.3f} / {p.accuracy:.3f} | "
            f"{_eps(o.epsilon)} / {_eps(p.epsilon)} | {met} |"
        )
    return "\n".join(lines)


def _seconds(s: float) -> str:
    return f"{s:.3f} s" if s >= 0.01 else f"{s * 1000:.1f} ms"


def _eps(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def ensure_peers_venv() -> Path:
    """Returns the peers' python, creating .venv-peers first when it is missing or out of date."""
    python = PEERS_VENV / "bin" / "python"
    stamp = PEERS_VENV / ".installed-stamp"
    sources = [REQUIREMENTS, ROOT / "constraints.txt"]
    if stamp.exists() and all(stamp.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return python
    print(f"building {PEERS_VENV.name} from {REQUIREMENTS.relative_to(ROOT)}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-c", str(ROOT / "constraints.txt"), "-r", str(REQUIREMENTS)], check=True)
    stamp.touch()
    return python


def _timed(argv: Sequence[str], *, env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(list(argv), cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv[:3]))} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def _last_json(stdout: str) -> Any:
    return json.loads(next(line for line in reversed(stdout.splitlines()) if line.startswith(("{", "["))))


def run_ours(spec: dict[str, Any], work: Path) -> Measure:
    """Returns a fresh `dpfl run` of `spec` with an empty DPFL_HOME (nothing cached), timed whole."""
    path, out = work / f"{spec['algorithm']}.json", work / f"{spec['algorithm']}-result.json"
    path.write_text(json.dumps(spec))
    home = Path(tempfile.mkdtemp(dir=work, prefix="home-"))
    env = dict(os.environ, DPFL_HOME=str(home))
    seconds, _ = _timed([sys.executable, "-m", "dpfl", "run", str(path), "--out", str(out)], env=env)
    result = json.loads(out.read_text())
    return Measure(
        "ours",
        seconds,
        result["timings"]["train_s"] / spec["rounds"],
        result["final"]["accuracy"],
        (result["privacy"]["epsilon"],),
        {key: result["timings"][key] for key in ("setup_s", "train_s", "eval_s")},
    )


def run_ours_sweep(spec: dict[str, Any], work: Path, rounds: int) -> Measure:
    """Returns ours on the sweep (EPSILONS × SEEDS of `spec` at `rounds`) in one fresh process."""
    points = [
        dict(spec, rounds=rounds, eval_every=rounds, seed=seed, privacy=dict(spec["privacy"], epsilon=eps))
        for eps in EPSILONS
        for seed in SEEDS
    ]
    path = work / "sweep.json"
    path.write_text(json.dumps(points))
    env = dict(os.environ, DPFL_HOME=tempfile.mkdtemp(dir=work, prefix="home-"))
    seconds, stdout = _timed([sys.executable, "-m", "benchmarks.peers", "--ours-sweep", str(path)], env=env)
    runs = _last_json(stdout)
    return _sweep_measure("ours", seconds, runs, rounds)


def _ours_sweep(path: Path) -> None:
    """Runs the sweep's points as `dpfl reproduce` does (batched), printing each run's numbers."""
    from dpfl import runner
    from dpfl.batching import batches
    from dpfl.cli.settings import cache_dir, data_dirs
    from dpfl.spec import parse_spec

    specs = [parse_spec(p) for p in json.loads(path.read_text())]
    out: list[dict[str, Any]] = [{} for _ in specs]
    for group in batches(specs):
        started = [runner.start(specs[i], data_dirs=data_dirs(), cache_dir=cache_dir()) for i in group]
        for i, result in zip(group, runner.train(started), strict=True):
            data = result.to_json()  # what `dpfl run --out` writes
            out[i] = {
                "target": specs[i].privacy.epsilon,
                "epsilon": data["privacy"]["epsilon"],
                "accuracy": data["final"]["accuracy"],
                "train_s": data["timings"]["train_s"],
            }
    print(json.dumps(out))


def _sweep_measure(
    tool: str, seconds: float, runs: list[dict[str, Any]], rounds: int, train_s: float | None = None
) -> Measure:
    """Returns the measure of `runs` (each with its target, ε, accuracy and, unless `train_s` sums
    them, its rounds' seconds): the rounds' seconds over every run's rounds, the mean accuracy
    and the ε of each target."""
    eps = {}
    for r in runs:
        eps.setdefault(r["target"], []).append(r["epsilon"])
    return Measure(
        tool,
        seconds,
        (sum(r["train_s"] for r in runs) if train_s is None else train_s) / (len(runs) * rounds),
        statistics.fmean(r["accuracy"] for r in runs),
        tuple(max(v) for _, v in sorted(eps.items())),
        {"accuracies": [r["accuracy"] for r in runs]},
    )


def run_peer(
    python: Path, script: str, data: Path, runs: Sequence[tuple[float, int]], rounds: int
) -> Measure:
    """Returns a peer script's runs in one fresh process of the peers' venv, timed whole."""
    env = dict(os.environ, PYTHONPATH=str(PEER_RUNS))
    argv = [str(python), str(PEER_RUNS / script), "--data", str(data), "--rounds", str(rounds)]
    argv += ["--runs", ",".join(f"{eps:g}:{seed}" for eps, seed in runs)]
    seconds, stdout = _timed(argv, env=env)
    report = _last_json(stdout)
    measure = _sweep_measure(report["tool"], seconds, report["runs"], rounds, report["train_s"])
    measure.extra["runs"] = report["runs"]
    return measure


ACCOUNTANTS = {  # column: (heading, omits sampling amplification)
    "ours_rdp": ("ours: dp-accounting RDP", False),
    "ours_pld": ("ours: dp-accounting PLD", False),
    "opacus_rdp": ("Opacus RDP", False),
    "opacus_prv": ("Opacus PRV", False),
    "pfl_rdp": ("pfl RDP", False),
    "pfl_pld": ("pfl PLD", False),
    "pfl_prv": ("pfl PRV", False),
    "flower_no_amplification": ("Flower's accountant (its DP wrapper's setting)", True),
}


def accountant_cases(isrl: Measure, fedavg: Measure) -> list[dict[str, Any]]:
    """Returns the accountant table's cases: both workloads' own σ, q and steps, and two more."""
    delta = 1e-5
    cases = []
    if isrl.extra.get("sigma") is not None:
        cases.append({"case": "workload 1 (silo 0)", **isrl.extra["sigma"], "delta": delta})
    if fedavg.extra.get("sigma") is not None:
        cases.append({"case": "workload 2", **fedavg.extra["sigma"], "delta": delta})
    cases += [
        {"case": "DP-SGD, long", "sigma": 1.0, "q": 0.01, "steps": 1000, "delta": delta},
        {"case": "no sampling", "sigma": 4.0, "q": 1.0, "steps": 10, "delta": delta},
    ]
    return cases


def accountant_table(python: Path, cases: list[dict[str, Any]]) -> str:
    """Returns the accountant table: every tool's ε for each case's σ, q, steps and δ."""
    from dpfl.privacy import epsilon, sgd_event

    peers = json.loads(
        _timed([str(python), str(PEER_RUNS / "accountants.py"), json.dumps(cases)], env=_peer_env())[1]
        .strip()
        .splitlines()[-1]
    )
    heads = [f"{h} †" if omits else h for h, omits in ACCOUNTANTS.values()]
    lines = [
        "| case | σ | q | steps | " + " | ".join(heads) + " |",
        "|---|---:|---:|---:|" + "---:|" * len(heads),
    ]
    for case, theirs in zip(cases, peers, strict=True):
        event = sgd_event(noise_multiplier=case["sigma"], sampling_rate=case["q"], steps=case["steps"])
        values = {
            "ours_rdp": epsilon(event, delta=case["delta"], accountant="rdp"),
            "ours_pld": epsilon(event, delta=case["delta"], accountant="pld"),
            **theirs,
        }
        lines.append(
            f"| {case['case']} | {case['sigma']:.4g} | {case['q']:.4g} | {case['steps']} | "
            + " | ".join(f"{values[k]:.3f}" for k in ACCOUNTANTS)
            + " |"
        )
    return "\n".join(lines)


def _peer_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(PEER_RUNS))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--sweep-rounds", type=int, default=SWEEP_ROUNDS)
    parser.add_argument(
        "--sweep-peers",
        type=lambda text: [f"{name.strip()}.py" for name in text.split(",") if name.strip()],
        default=["opacus_loop.py", "flower_sim.py"],
        metavar="NAME[,NAME]",
        help="the peers of the sweep (opacus_loop, flower_sim); --sweep-rounds 0 skips the sweep",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads of every tool's process (OMP_NUM_THREADS; default 1: on a shared 2-core "
        "machine two threads per process contend, ours' MNIST round took 5× longer with 2 under load)",
    )
    parser.add_argument("--rounds", type=int, help="both workloads' rounds (default 50; a quick check)")
    parser.add_argument("--ours-sweep", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ours_sweep is not None:  # the child process of run_ours_sweep
        _ours_sweep(args.ours_sweep)
        return 0
    from benchmarks.peers_data import DP_FEDAVG, ISRL, export
    from dpfl.cli.settings import data_dirs

    if args.rounds:
        ISRL, DP_FEDAVG = (dict(s, rounds=args.rounds, eval_every=args.rounds) for s in (ISRL, DP_FEDAVG))

    python = ensure_peers_venv()
    # every child (ours, the peers, Flower's Ray actors) inherits it
    os.environ.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpfl-peers-") as tmp:
        work = Path(tmp)
        w1 = export(ISRL, work / "isrl.npz", data_dirs=data_dirs())
        w2 = export(DP_FEDAVG, work / "dp_fedavg.npz", data_dirs=data_dirs())
        rows: list[Row] = []
        failed: list[str] = []
        isrl_point = [(ISRL["privacy"]["epsilon"], ISRL["seed"])]
        fedavg_point = [(DP_FEDAVG["privacy"]["epsilon"], DP_FEDAVG["seed"])]
        grid = [(eps, seed) for eps in EPSILONS for seed in SEEDS]
        plan = [
            (
                f"ISRL-DP MB-SGD, 25 silos, {ISRL['rounds']} rounds, ε = 3",
                "opacus_loop.py",
                w1,
                isrl_point,
                None,
            ),
            (
                f"ISRL-DP MB-SGD, 25 silos, {ISRL['rounds']} rounds, ε = 3",
                "flower_sim.py",
                w1,
                isrl_point,
                None,
            ),
            (
                f"DP-FedAvg, 100 clients, q = 0.2, {DP_FEDAVG['rounds']} rounds, ε = 3",
                "flower_sim.py",
                w2,
                fedavg_point,
                None,
            ),
            (
                f"DP-FedAvg, 100 clients, q = 0.2, {DP_FEDAVG['rounds']} rounds, ε = 3",
                "pfl_central.py",
                w2,
                fedavg_point,
                None,
            ),
        ]
        if args.sweep_rounds:
            label = f"sweep of ISRL-DP MB-SGD: 5 ε × 3 seeds, {args.sweep_rounds} rounds"
            plan += [(label, script, w1, grid, args.sweep_rounds) for script in args.sweep_peers]
        for label, script, data, runs, sweep_rounds in plan:
            # each peer's run follows a run of ours, so a slow spell of the shared machine hits both
            spec = ISRL if data == w1 else DP_FEDAVG
            ours = run_ours(spec, work) if sweep_rounds is None else run_ours_sweep(spec, work, sweep_rounds)
            try:
                peer = run_peer(python, script, data, runs, sweep_rounds or spec["rounds"])
            except RuntimeError as exc:
                failed.append(f"{label}, {script}: {str(exc).strip().splitlines()[-1]}")
                print(exc, file=sys.stderr, flush=True)
                continue
            rows.append(Row(label, ours, peer))
            print(render(rows[-1:]), file=sys.stderr, flush=True)
            if not args.no_write:  # the rows so far, should a later peer run past a time limit
                partial = "(measuring: the accountant table comes when every row is in)"
                write_section(TITLE, _body(rows, failed, partial, time.perf_counter() - started, args))
        isrl_peer = next((r.peer for r in rows if r.peer.tool == "opacus"), None)
        fedavg_peer = next((r.peer for r in rows if r.peer.tool == "pfl"), None)
        cases = accountant_cases(
            Measure("", 0, 0, 0, (), {"sigma": isrl_peer and _schedule(isrl_peer, ISRL, silo=0)}),
            Measure("", 0, 0, 0, (), {"sigma": fedavg_peer and _schedule(fedavg_peer, DP_FEDAVG)}),
        )
        accountants = accountant_table(python, cases)
    body = _body(rows, failed, accountants, time.perf_counter() - started, args)
    publish(TITLE, body, write=not args.no_write)
    standing = [r for r in rows if not r.void]
    met = bool(standing) and all(r.met for r in standing) and len(standing) == len(rows) and not failed
    print_headline(
        "peers",
        headline="; ".join(
            f"{r.peer.tool} {r.workload.split(',')[0]}: "
            + ("void" if r.void else f"{r.whole_speedup:.1f}× whole, {r.round_speedup:.0f}× a round")
            for r in rows
        ),
        target=f"≥ {TARGET_WHOLE:g}× whole process, ≥ {TARGET_ROUND:g}× a round, every peer",
        met=met,
        rows=[
            {
                "workload": r.workload,
                "peer": r.peer.tool,
                "whole": r.whole_speedup,
                "round": r.round_speedup,
                "void": r.void,
            }
            for r in rows
        ],
    )
    return 0 if met else 1


def _schedule(measure: Measure, spec: dict[str, Any], *, silo: int | None = None) -> dict[str, Any]:
    """Returns the σ, q and steps a peer's first run used (silo `silo`'s, for per-silo σ's)."""
    run = measure.extra["runs"][0]
    sigma = run["sigma"][silo] if silo is not None else run["sigma"]
    q = spec["params"].get("sample_rate")
    if silo is not None:
        q = run["rates"][silo]
    return {"sigma": float(sigma), "q": float(q), "steps": spec["rounds"]}


def _body(
    rows: Sequence[Row], failed: Sequence[str], accountants: str, total_s: float, args: argparse.Namespace
) -> str:
    from benchmarks.report import machine

    m = machine()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    standing = [r for r in rows if not r.void]
    met = [r for r in standing if r.met]
    return "\n".join(
        [
            "Each tool in a fresh process on the same MNIST PCA-50 data, silos, MLP and initial weights, "
            "rounds, batch, clip and ε (the peers read our loader's output, exported once to an .npz). "
            "*Whole process*: a fresh `dpfl run` of the spec with an empty `DPFL_HOME` (so it loads MNIST "
            "and fits the PCA, which the peers read ready-made, and calibrates σ) against the peer's "
            "script from start to exit (imports, calibration with the peer's own accountant, Ray for "
            "Flower, training, evaluation). *Per round*: the rounds' own seconds over the rounds. "
            "Speed-up: peer ÷ ours. A row whose accuracies differ by more than "
            f"{ACCURACY_TOLERANCE} or whose ε differ by more than {EPSILON_TOLERANCE:.0%} is void.",
            "",
            render(rows),
            *(["", "Failed (no row): " + "; ".join(failed)] if failed else []),
            "",
            f"**Goal (≥ {TARGET_WHOLE:g}× every peer whole process, ≥ {TARGET_ROUND:g}× per round): "
            f"{'met' if len(met) == len(rows) else 'not met'}** — {len(met)} of {len(rows)} rows meet both"
            + (f", {len(rows) - len(standing)} void" if len(standing) < len(rows) else "")
            + ".",
            "",
            "Where ours' whole process goes (why the whole-process ratios fall below the per-round "
            "ones): "
            + "; ".join(
                f"{r.workload.split(',')[0]} ({r.peer.tool}'s row): {r.ours.seconds:.1f} s = set-up "
                f"{r.ours.extra['setup_s']:.1f} s (MNIST, PCA, σ) + rounds {r.ours.extra['train_s']:.2f} s "
                f"+ evaluation {r.ours.extra['eval_s']:.2f} s + "
                f"{r.ours.seconds - sum(r.ours.extra[k] for k in ('setup_s', 'train_s', 'eval_s')):.1f} s "
                "of interpreter start, imports and output"
                for r in rows
                if "setup_s" in r.ours.extra
            )
            + ".",
            "",
            "How each peer runs: the Opacus loop keeps per silo a `GradSampleModule`, a `DPOptimizer` and "
            "an RDP accountant, σ_i from Opacus's `get_noise_multiplier` (RDP) for its Poisson rate "
            "K/n_i; Flower (1.42, Message API, Ray backend, one CPU per client) builds each client's "
            "Opacus objects afresh every round, as its Opacus example does; for DP-FedAvg Flower's "
            "`DifferentialPrivacyServerSideFixedClipping` clips the sampled clients' updates and noises "
            "their mean (20 of 100 sampled without replacement; its ε above is the Poisson q = 0.2 RDP ε "
            "of its σ, the usual stand-in), and pfl runs `FederatedAveraging` with a "
            "`CentrallyAppliedPrivacyMechanism(GaussianMechanism)` from its RDP accountant (cohorts of "
            "20, users weighted alike). The sweep: ours as one batched sweep in one process (what "
            "`dpfl reproduce` runs), each peer as 15 runs one after the other in one process, at "
            f"{args.sweep_rounds} rounds (the peers' 50-round sweep alone would take over half an hour "
            f"here), against {', '.join(p.removesuffix('.py') for p in args.sweep_peers)}.",
            "",
            "Accountants: ε at δ = 1e-5 of the same Poisson-sampled Gaussian schedule (σ, q, steps) in "
            "every tool. † omits sampling amplification: Flower 1.42's accountant, with the only sampling "
            "its fixed-clipping wrapper accepts (`no-amplification`), counts each round's Gaussian at "
            "full strength, so the ε its DP strategy logs for a sampled run is far above the true one.",
            "",
            accountants,
            "",
            f"Machine notes: {m['cores']} cores ({m['cpu']}), torch {m['torch']} with {args.threads} "
            f"thread(s) in every tool's process, shared with other "
            f"work (load average {load:.1f} at the end); one run per row, so the ratios are a "
            f"single draw on a loaded machine; the whole benchmark took {total_s / 60:.1f} min.",
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
