"""CLI start-up benchmark: `dpfl --help` and `dpfl privacy epsilon …`, against importing everything;
and what a run of the MNIST spec (configs/isrl_mnist.yaml) spends outside its training.

Each command is a fresh process (as a user types it), timed from start to exit; the variants
take turns (`interleaved_medians`). The reference is what every command paid before the CLI
imported lazily: the runner, the reports and the auditor loaded before parsing the arguments.
Targets (issue 19): `dpfl --help` < 1 s, `dpfl privacy epsilon` < 1.5 s.

A run's time outside training and evaluation (its result's `train_s` and `eval_s`), issue 19's
targets: (a) from the CLI, a second `dpfl run` of the spec (its prepared dataset cached on disk
by the first) < 3 s; (b) in a warm worker, a run after the first in the same process ≤ its
training time. The imports every fresh run pays (`dpfl.runner`: torch, dp-accounting's RDP accountant,
the algorithms) are timed alone.

Issue 43's set-up of the same spec, in a fresh process that times its own imports: (c) with an
empty DPFL_HOME (cold: MNIST read and projected, 25 silos calibrated, ε planned), the time outside
imports, training and evaluation ≤ the training time; (d) a second process on that home (warm:
the prepared dataset and the projection stored there) ≤ a tenth of it. Pairs on fresh homes, medians.

Usage: python -m benchmarks.cli [--repeats N] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import interleaved_medians, print_headline, publish  # noqa: E402

TITLE = "CLI start-up"
EPSILON_ARGS = [
    "privacy",
    "epsilon",
    "--noise-multiplier",
    "1.1",
    "--steps",
    "1000",
    "--sampling-rate",
    "0.01",
    "--delta",
    "1e-5",
]
COMMANDS = {
    "dpfl --help": ["-m", "dpfl", "--help"],
    "dpfl privacy epsilon --noise-multiplier 1.1 --steps 1000 --sampling-rate 0.01 --delta 1e-5": [
        "-m",
        "dpfl",
        *EPSILON_ARGS,
    ],
    "reference: import the runner, reports and auditor first (the eager CLI)": [
        "-c",
        "import dpfl.cli, dpfl.runner, dpfl.reproduce.report, dpfl.audit.rounds",
    ],
}
TARGETS = {"dpfl --help": 1.0, "dpfl privacy epsilon": 1.5}
SPEC = ROOT / "configs" / "isrl_mnist.yaml"
RUN_TARGET_S = 3.0  # (a): a second CLI run's time outside training and evaluation
# (b) in a fresh process: three runs of the spec, the last one's seconds as JSON
WARM = """
import json, time
from dpfl.cli.settings import cache_dir, data_dirs
from dpfl.runner import run
from dpfl.spec import load_spec
spec = load_spec(open({spec!r}).read())
for _ in range(3):
    t0 = time.perf_counter()
    result = run(spec, data_dirs=data_dirs(), cache_dir=cache_dir())
    wall = time.perf_counter() - t0
print(json.dumps({{"wall": wall, "train": result.timings["train_s"], "eval": result.timings["eval_s"]}}))
"""


# (c), (d): one run of the spec in a fresh process, its imports timed inside it, as JSON
SETUP = """
import json, time
t0 = time.perf_counter()
from dpfl.cli.settings import cache_dir, data_dirs
from dpfl.runner import run
from dpfl.spec import load_spec
t1 = time.perf_counter()
result = run(load_spec(open({spec!r}).read()), data_dirs=data_dirs(), cache_dir=cache_dir())
wall = time.perf_counter() - t1
train, evaluation = result.timings["train_s"], result.timings["eval_s"]
setup = wall - train - evaluation
print(json.dumps({{"imports": t1 - t0, "setup": setup, "train": train, "eval": evaluation}}))
"""
COLD_FACTOR, WARM_FACTOR = 1.0, 0.1  # set-up ≤ these × the training time (issue 43)
# What a profile of (c) and (d) found left, 2026-11-28 (cProfile of `dpfl.runner.run` on this machine)
BOUNDS = (
    "What bounds them (cProfile, 2026-11-28): cold, the accountant: 25 silos' σ calibrated and their ε "
    "planned for 50 rounds take some 1,500 of dp_accounting's evaluations of fractional RDP orders "
    "(`_compute_log_a_frac`, a Python series, 0.3–0.5 ms each; each silo has its own q and σ, and each "
    "round's minimum lies at its own order), about 1 s, then MNIST's gzip and its projection on the "
    "shipped PCA, about 0.4 s. Warm: reading the prepared dataset and drawing the silos, 0.03 s; the "
    "ledger's ε at the records' rounds from the stored RDP values, 0.04 s (a search over 25 × 10 rows); "
    "the rest, 0.01 s."
)


def start(argv: list[str]):
    def go(_: int) -> None:
        subprocess.run([sys.executable, *argv], cwd=ROOT, check=True, capture_output=True)

    return go


def cli_runs(repeats: int, home: Path) -> dict[str, float]:
    """Returns medians over `repeats` second `dpfl run`s of SPEC: wall, training + evaluation, outside."""
    env = os.environ | {"DPFL_HOME": str(home)}
    out = home / "result.json"
    argv = [sys.executable, "-m", "dpfl", "run", str(SPEC), "--out", str(out)]
    subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True)  # caches the dataset
    walls, inside = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
        timings = json.loads(out.read_text())["timings"]
        inside.append(timings["train_s"] + timings["eval_s"])
    outside = [w - i for w, i in zip(walls, inside, strict=True)]
    return {"wall": median(walls), "inside": median(inside), "outside": median(outside)}


def warm_run(home: Path) -> dict[str, float]:
    """Returns the third of three runs of SPEC in one fresh process: wall, training, evaluation."""
    env = os.environ | {"DPFL_HOME": str(home)}
    code = WARM.format(spec=str(SPEC))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True)
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def setup_runs(repeats: int) -> dict[str, dict[str, float]]:
    """Returns medians over `repeats` pairs (a run on an empty DPFL_HOME, then one on the home it
    filled) of each one's imports, set-up, training and evaluation seconds."""
    code = SETUP.format(spec=str(SPEC))
    seen: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            env = os.environ | {"DPFL_HOME": tmp}
            for kind in ("cold", "warm"):
                proc = subprocess.run(
                    [sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True
                )
                seen[kind].append(json.loads(proc.stdout.decode().strip().splitlines()[-1]))
    return {kind: {k: median(r[k] for r in runs) for k in runs[0]} for kind, runs in seen.items()}


def setup_section(repeats: int) -> tuple[list[str], bool, dict[str, float]]:
    """Returns the set-up table's lines (issue 43), whether both targets are met, and its numbers."""
    got = setup_runs(repeats)
    cold, warm = got["cold"], got["warm"]
    cold_ok = cold["setup"] <= COLD_FACTOR * cold["train"]
    warm_ok = warm["setup"] <= WARM_FACTOR * warm["train"]
    lines = [
        "",
        f"The set-up of `{SPEC.relative_to(ROOT)}` in a fresh process (issue 43): its seconds outside "
        "imports (timed inside the process), training and evaluation; (c) with an empty DPFL_HOME, "
        f"(d) a second process on the home (c) filled; medians of {repeats} pairs, each on a fresh home.",
        "",
        "| process | imports | set-up | training | evaluation | target | met |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for label, row, factor, ok in (
        ("(c) cold: empty DPFL_HOME", cold, COLD_FACTOR, cold_ok),
        ("(d) warm: the home (c) filled", warm, WARM_FACTOR, warm_ok),
    ):
        target = "≤ training" if factor == 1 else f"≤ {factor:g} × training"
        lines.append(
            f"| {label} | {row['imports']:.2f} s | {row['setup']:.3f} s | {row['train']:.3f} s | "
            f"{row['eval']:.3f} s | {target} ({factor * row['train']:.3f} s) | {'yes' if ok else 'no'} |"
        )
    if not (cold_ok and warm_ok):
        lines += ["", BOUNDS]
    numbers = {
        "cold_setup_s": cold["setup"],
        "cold_setup_train_s": cold["train"],
        "warm_setup_s": warm["setup"],
        "warm_setup_train_s": warm["train"],
    }
    return lines, cold_ok and warm_ok, numbers


def run_section(repeats: int) -> tuple[list[str], bool, dict[str, float]]:
    """Returns the run table's lines, whether both targets are met, and its numbers."""
    with tempfile.TemporaryDirectory() as tmp:
        cli = cli_runs(repeats, Path(tmp))
        warm = warm_run(Path(tmp))
    imports = interleaved_medians({"imports": start(["-c", "import dpfl.runner"])}, repeats)["imports"]
    warm_outside = warm["wall"] - warm["train"] - warm["eval"]
    cli_ok, warm_ok = cli["outside"] < RUN_TARGET_S, warm_outside <= warm["train"]
    lines = [
        "",
        f"A run of `{SPEC.relative_to(ROOT)}` (25 silos, PCA-50, MLP 64, 50 rounds, ε = 3): its time "
        "outside training and evaluation (the result's `train_s` + `eval_s`). (a) `dpfl run SPEC --out F` "
        f"in a fresh process after a first one stored the prepared dataset and the projection (σ, planned ε) "
        f"under DPFL_HOME, medians of "
        f"{repeats}; (b) the third of three runs in one process, as a worker runs them.",
        "",
        "| run | wall | training + evaluation | outside them | target | met |",
        "|---|---:|---:|---:|---|---|",
        f"| (a) a second `dpfl run` | {cli['wall']:.2f} s | {cli['inside']:.2f} s | {cli['outside']:.2f} s | "
        f"< {RUN_TARGET_S:g} s | {'yes' if cli_ok else 'no'} |",
        f"| of which `import dpfl.runner` (torch, dp-accounting's RDP, the algorithms) in a fresh process "
        f"| {imports:.2f} s | | | | |",
        f"| (b) a later run in a warm process | {warm['wall']:.3f} s | "
        f"{warm['train'] + warm['eval']:.3f} s | {warm_outside:.3f} s | "
        f"≤ training ({warm['train']:.3f} s) | {'yes' if warm_ok else 'no'} |",
    ]
    numbers = {
        "cli_outside_s": cli["outside"],
        "imports_s": imports,
        "warm_outside_s": warm_outside,
        "warm_train_s": warm["train"],
    }
    return lines, cli_ok and warm_ok, numbers


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    medians = interleaved_medians({name: start(argv) for name, argv in COMMANDS.items()}, args.repeats)
    reference = medians[list(COMMANDS)[-1]]
    lines = [
        f"A fresh process per command, medians of {args.repeats} (commands interleaved).",
        "",
        "| command | seconds | vs the eager start | target | met |",
        "|---|---:|---:|---:|---|",
    ]
    met = True
    for name, seconds in medians.items():
        target = next((t for prefix, t in TARGETS.items() if name.startswith(prefix)), None)
        ok = target is None or seconds < target
        met &= ok
        verdict = "" if target is None else ("yes" if ok else "no")
        lines.append(
            f"| `{name}` | {seconds:.2f} | {reference / seconds:.1f}× | "
            f"{'' if target is None else f'< {target:g} s'} | {verdict} |"
        )
    run_lines, run_met, run_numbers = run_section(args.repeats)
    setup_lines, setup_met, setup_numbers = setup_section(args.repeats)
    met &= run_met and setup_met
    body = "\n".join(lines + run_lines + setup_lines)
    publish(TITLE, body, write=not args.no_write)
    help_s, epsilon_s = (medians[n] for n in list(COMMANDS)[:2])
    print_headline(
        "cli",
        headline=(
            f"--help {help_s:.2f} s, privacy epsilon {epsilon_s:.2f} s; a second run of the MNIST spec "
            f"{run_numbers['cli_outside_s']:.2f} s outside training "
            f"(imports {run_numbers['imports_s']:.2f} s), "
            f"a warm worker's {run_numbers['warm_outside_s']:.3f} s; set-up cold "
            f"{setup_numbers['cold_setup_s']:.2f} s, warm {setup_numbers['warm_setup_s']:.3f} s against "
            f"{setup_numbers['cold_setup_train_s']:.2f} s of training"
        ),
        target="< 1 s, < 1.5 s; < 3 s; ≤ training; set-up ≤ training cold, ≤ 0.1 × warm",
        met=met,
        help_s=help_s,
        epsilon_s=epsilon_s,
        eager_s=reference,
        **run_numbers,
        **setup_numbers,
        setup_met=setup_met,
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
