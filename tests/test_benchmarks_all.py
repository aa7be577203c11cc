"""benchmarks/all.py: selection, headlines, the summary table, and measuring a real child process."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import all as bench_all
from benchmarks.all import BENCHMARKS, Benchmark, Child, Outcome, headline_of, parse_args, render_summary
from benchmarks.report import write_section

INFO = {
    "cores": 2,
    "cpu": "AMD EPYC",
    "platform": "Linux-6.1-x86_64",
    "python": "3.11.7",
    "torch": "2.13.0+cpu",
    "date": "2026-01-02 03:04 UTC",
    "load_average": (3.5, 3.0, 2.5),
}


def test_only_and_skip_select_benchmarks_in_the_summary_order():
    everything = [
        "engine",
        "uldp",
        "devices",
        "ledger",
        "calibration",
        "cli",
        "audit",
        "audit_bugs",
        "api",
        "pages",
        "sweep",
        "peers",
        "reproduce",
    ]
    assert parse_args([]).selected == everything
    assert parse_args(["--only", "ledger,engine"]).selected == ["engine", "ledger"]
    assert parse_args(["--only", "api", "--only", "uldp"]).selected == ["uldp", "api"]
    assert parse_args(["--skip", "api,reproduce"]).selected == [
        b for b in everything if b not in ("api", "reproduce")
    ]
    assert parse_args(["--only", "engine,api", "--skip", "api", "--no-write"]).no_write


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--only", "engine,speed"],
            "unknown benchmark 'speed'; known: engine, uldp, devices, "
            "ledger, calibration, cli, audit, audit_bugs, api, pages, sweep, peers, reproduce",
        ),
        (["--only", "api", "--skip", "api"], "no benchmark left to run"),
    ],
)
def test_bad_selection_is_refused_with_the_names(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_headline_is_the_last_json_line_or_read_off_a_speed_up_table():
    line = {"benchmark": "engine", "headline": "16.7× faster", "target": "≥ 10×", "met": True, "numbers": {}}
    stdout = "## Engine\n\n| a | b |\n|---|---|\n| 1 | 2 |\n" + json.dumps(line) + "\n"
    assert headline_of(stdout) == line

    table = "\n".join(
        [
            "## ULDP-AVG",
            "",
            "| config | pairs | speed-up | target | met |",
            "|---|---:|---:|---:|:-:|",
            "| HeartDisease: 4 natural silos, 50 zipf users, logreg, Q = 50 | 150 | 31.2× | ≥ 10× | yes |",
            "| MNIST: 5 silos, 100 zipf users (users first, α = 2), CNN | 500 | 0.6× | ≥ 10× | **no** |",
            "| MNIST: 5 silos, 10,000 zipf users (users first, α = 2), MLP | 9,000 | 40.0× | — | — |",
            "",
            "| other | speed-up | met |",
            "| x: y | 1.0× | yes |",
        ]
    )
    assert headline_of(table) == {
        "headline": "speed-up HeartDisease 31.2×; MNIST 100 zipf users, CNN 0.6×; "
        "MNIST 10,000 zipf users, MLP 40.0×",
        "target": "≥ 10×",
        "met": False,
    }
    assert headline_of("no table, no JSON\n") is None


def test_summary_has_one_row_per_benchmark_with_ratio_time_memory_and_status():
    outcomes = [
        Outcome(
            BENCHMARKS["engine"],
            Child(exit_code=0, wall_s=95.4, peak_rss_mib=437.6, stdout=""),
            {"headline": "16.7× faster than the loop", "target": "≥ 10×; ≤ 1.5×", "met": True},
        ),
        Outcome(
            BENCHMARKS["uldp"],
            Child(exit_code=1, wall_s=1260.0, peak_rss_mib=2048.0, stdout=""),
            {"headline": "speed-up MNIST 0.6×", "target": "≥ 10×", "met": False},
        ),
        Outcome(BENCHMARKS["ledger"]),
        Outcome(
            BENCHMARKS["api"],
            Child(
                exit_code=1,
                wall_s=12.2,
                peak_rss_mib=80.0,
                stdout="",
                stderr_tail=["x", "OSError: refused", ""],
            ),
        ),
        Outcome(
            BENCHMARKS["reproduce"],
            Child(exit_code=-15, wall_s=30.0, peak_rss_mib=512.0, stdout="", timed_out=True),
            {"headline": "isrl 3 min | ok", "target": "< 5 min per paper", "met": None},
        ),
    ]
    body = render_summary(outcomes, INFO, total_s=1400.0)
    assert body.splitlines()[0] == (
        "**1 of 4 benchmarks run met their targets**; missed or failed: uldp, api, reproduce; "
        "1 not run in this run (their sections below are older)."
    )
    rows = [line for line in body.splitlines() if line.startswith("| [")]
    assert rows == [
        "| [engine](#engine-one-isrl-dp-mb-sgd-round) | one ISRL-DP MB-SGD round: engine vs per-silo loop "
        "vs non-private | 16.7× faster than the loop | ≥ 10×; ≤ 1.5× | yes | 95 s | 438 MiB |",
        "| [uldp](#uldp-avg-vectorised-over-users-vs-per-user-loop) | one ULDP-AVG round: vectorised over "
        "users vs per-user loop | speed-up MNIST 0.6× | ≥ 10× | **no** | 21.0 min | 2,048 MiB |",
        "| [ledger](#ledger-ε-of-100-parties--1000-rounds) | ε of 100 parties × 1,000 rounds: ledger "
        "recompute vs per-party loop | not run in this run | — | — | — | — |",
        "| [api](#api-runs-list-sweep-submission-and-live-events) | API latency under load: runs list, "
        "sweep submission, live events | failed: OSError: refused | — | **failed** (exit 1) | 12 s "
        "| 80 MiB |",
        "| [reproduce](#quick-reproductions) | `dpfl reproduce PAPER --quick`, wall time per paper "
        "| isrl 3 min \\| ok | < 5 min per paper | **timed out** (-15) | 30 s | 512 MiB |",
    ]
    # a table a newcomer reads: seven columns, the same in the header and every row
    header = next(line for line in body.splitlines() if line.startswith("| benchmark"))
    assert header == (
        "| benchmark | what it measures | headline (this run) | target | met | wall time | peak RSS |"
    )
    assert {line.replace("\\|", "").count("|") for line in rows} == {8}
    assert sum(line.startswith("Machine: ") for line in body.splitlines()) == 1
    assert body.splitlines()[-1] == (
        "Machine: 2 cores, AMD EPYC, Linux-6.1-x86_64, Python 3.11.7, torch 2.13.0+cpu. Run started "
        "2026-01-02 03:04 UTC; total wall time 23.3 min; load average at the start 3.5 (1 min) on 2 cores: "
        "other work shared the machine (the engine and ULDP benchmarks interleave their variants, so it "
        "slows both sides of their ratios alike)."
    )
    quiet = render_summary(outcomes, INFO | {"load_average": (0.4, 0.9, 1.2)}, total_s=1400.0)
    assert quiet.splitlines()[-1].endswith(
        "total wall time 23.3 min; load average at the start 0.4 (1 min) on 2 cores."
    )


# A stand-in benchmark: touches 64 MiB, then prints its argv in the headline line.
_CHILD = (
    "import json, sys; block = b'x' * (64 * 2**20); print('table'); "
    "print(json.dumps({'headline': '2.0× faster', 'target': '≥ 1×', 'met': True, "
    "'numbers': {'argv': sys.argv}}))"
)


def test_run_measures_each_selected_child_and_passes_no_write_on(capsys):
    benchmarks = {
        "fast": Benchmark("fast", "a stand-in", "Fast", ("-c", _CHILD)),
        "other": Benchmark("other", "never run", "Other", ("-c", "raise SystemExit(3)")),
    }
    fast, other = bench_all.run(benchmarks, ["fast"], no_write=True, timeout=60)
    assert other.child is None and other.headline is None
    assert fast.child.exit_code == 0
    assert fast.headline["headline"] == "2.0× faster"
    assert fast.headline["numbers"]["argv"] == ["-c", "--no-write"]
    assert fast.child.peak_rss_mib >= 64  # from os.wait4: the child's own high-water mark
    assert capsys.readouterr().out.startswith("table\n")  # echoed as it came


def test_a_child_past_its_timeout_is_stopped():
    child = bench_all.run_child(
        [sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5, echo=False
    )
    assert child.timed_out
    assert child.exit_code == -15  # SIGTERM
    assert child.wall_s < 10


def test_summary_section_goes_first_and_is_replaced_in_place(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nIntro.\n\n## Engine\n\nold engine\n")
    write_section("Summary", "table one", doc=doc, first=True)
    write_section("Ledger", "ledger table", doc=doc)
    write_section("Summary", "table two", doc=doc, first=True)
    text = doc.read_text()
    titles = [line for line in text.splitlines() if line.startswith("## ")]
    assert titles == ["## Summary", "## Engine", "## Ledger"]
    assert "table two" in text and "table one" not in text
    assert text.count("Measured ") == 2  # the date stamp under each section written here
