"""CLI start-up benchmark: `dpfl --help` and `dpfl privacy epsilon …`, against importing everything.

Each command is a fresh process (as a user types it), timed from start to exit; the variants
take turns (`interleaved_medians`). The reference is what every command paid before the CLI
imported lazily: the runner, the reports and the auditor loaded before parsing the arguments.
Targets (issue 19): `dpfl --help` < 1 s, `dpfl privacy epsilon` < 1.5 s.

Usage: python -m benchmarks.cli [--repeats N] [--no-write]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

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


def start(argv: list[str]):
    def go(_: int) -> None:
        subprocess.run([sys.executable, *argv], cwd=ROOT, check=True, capture_output=True)

    return go


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
    body = "\n".join(lines)
    publish(TITLE, body, write=not args.no_write)
    help_s, epsilon_s = (medians[n] for n in list(COMMANDS)[:2])
    print_headline(
        "cli",
        headline=f"--help {help_s:.2f} s, privacy epsilon {epsilon_s:.2f} s",
        target="< 1 s, < 1.5 s",
        met=met,
        help_s=help_s,
        epsilon_s=epsilon_s,
        eager_s=reference,
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
