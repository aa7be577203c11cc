"""`dpfl reproduce`: the `reproduce:` block, summary numbers, claim verdicts, the report and the CLI.

A tiny setting on the bundled digits data (2 methods × 2 ε × 2 seeds, 6 rounds) is reproduced
once for the module; the numbers in its summary.csv are checked against the same runs made
directly with `dpfl.runner.run`.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import statistics
from pathlib import Path

import pytest
import yaml
from plotly.offline import get_plotlyjs

from dpfl import runner
from dpfl.cli import main
from dpfl.reproduce import CANNOT, DOES_NOT_HOLD, HOLDS, PAPERS, default_config_dir, load_paper, manifest
from dpfl.reproduce.calibration import local_projector, paper_calibrations
from dpfl.reproduce.manifest import Claim
from dpfl.reproduce.markdown import splice
from dpfl.reproduce.summary import Outcome, check_claim, summary_rows
from dpfl.spec import load_spec, parse_spec
from tests.factories import data_dir, run_cli

ROOT = Path(__file__).resolve().parents[2]

SPEC = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 2.0, "batch_size": 64, "clip": 1.0},
    "dataset": {"name": "digits", "silos": 2},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 6,
    "privacy": {"epsilon": 1.0, "delta": 1.0e-5},
    "eval_every": 6,
    "seed": 0,
}
BLOCK = {
    "title": "digits: accuracy against ε",
    "notes": "a <tiny> setting",
    "grid": {"algorithm": ["isrl_mbsgd", "isrl_localsgd"], "privacy.epsilon": [1.0, 4.0]},
    "params_by_algorithm": {"isrl_localsgd": {"lr": 1.0, "batch_size": 32, "local_steps": 2, "clip": 1.0}},
    "seeds": 2,
    "quick": {"set": {"rounds": 2}, "grid": {"algorithm": ["isrl_mbsgd"]}, "seeds": 1},
    "paper": [{"algorithm": "isrl_mbsgd", "x": 4, "metric": "test_error", "value": 0.2, "source": "Table 9"}],
    "claims": [
        {
            "text": "MB-SGD is more accurate than Local SGD",
            "better": "isrl_mbsgd",
            "than": "isrl_localsgd",
            "metric": "accuracy",
        },
        {
            "text": "Local SGD has the lower loss, by 5",
            "better": "isrl_localsgd",
            "than": "isrl_mbsgd",
            "metric": "loss",
            "by": 5.0,
        },
    ],
}


def write_config(folder: Path, name: str = "isrl_tiny.yaml", spec=None, block=None) -> Path:
    """Writes a paper config (spec + `reproduce:` block unless block is False) and returns its folder."""
    folder.mkdir(parents=True, exist_ok=True)
    data = dict(SPEC if spec is None else spec)
    if block is not False:
        data["reproduce"] = BLOCK if block is None else block
    (folder / name).write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory) -> tuple[int, str, Path]:
    """The tiny setting reproduced once through the CLI: (exit code, stderr, output folder)."""
    root = tmp_path_factory.mktemp("reproduce")
    configs, out = write_config(root / "configs"), root / "out"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            main(["reproduce", "isrl", "--configs", str(configs), "--out", str(out)])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, err.getvalue(), out


def direct_runs(algorithm: str, epsilon: float, seeds=(0, 1)) -> list[runner.RunResult]:
    """Returns the cell's runs made directly, with the params the sweep gives that method."""
    params = BLOCK["params_by_algorithm"].get(algorithm, SPEC["params"])
    privacy = SPEC["privacy"] | {"epsilon": epsilon}
    return [
        runner.run(
            parse_spec(SPEC | {"algorithm": algorithm, "params": params, "privacy": privacy, "seed": s})
        )
        for s in seeds
    ]


# --- the block and the loader ---------------------------------------------------------------


def test_load_spec_ignores_the_block_and_the_paper_config_runs_its_base():
    text = yaml.safe_dump(SPEC | {"reproduce": BLOCK})
    assert load_spec(text) == parse_spec(SPEC)
    spec = load_spec((ROOT / "configs/paper/isrl_mnist.yaml").read_text())
    assert (spec.algorithm, spec.rounds, spec.participation, spec.privacy.epsilon) == (
        "isrl_spider",
        50,
        25,
        3.0,
    )


def test_isrl_config_sweeps_the_documented_grid():
    settings = {s.name: s for s in load_paper("isrl", default_config_dir())}
    ours, paper, releases = (settings[f"isrl_mnist{n}"] for n in ("", "_paper", "_paper_releases"))
    full, quick = ours.sweep(), ours.sweep(quick=True)
    assert ours.algorithms == ["isrl_mbsgd", "isrl_localsgd", "isrl_spider"]
    assert full.grid["privacy.epsilon"] == [0.75, 1, 1.5, 3, 6, 12, 18]
    # SPIDER runs as four candidates (Alg. 3 at q = 1, 2, 4 and Alg. 11)
    assert len(full.points) == (1 + 1 + 4) * 7 * 3 and len(quick.points) == (1 + 1 + 4) * 3
    params = {(p.data["algorithm"], p.data["params"].get("phase")): p.data["params"] for p in full.points}
    assert params[("isrl_spider", 4)] == {"lr": 2.0, "batch_size": 128, "clip": 1.0, "phase": 4}
    assert params[("isrl_spider_alt", None)] == {"lr": 2.0, "batch_size": 128, "clip": 1.0}
    assert params[("isrl_mbsgd", None)] == {"lr": 2.0, "batch_size": 128, "clip": 1.0}  # no SPIDER `phase`
    assert {p.data["participation"] for p in full.points} == {25}
    assert {p.data["rounds"] for p in quick.points} == {10}
    # both readings tune SPIDER over Alg. 3's q and Alg. 11, per ε, by training loss
    sweep = ours.sweep()
    spider = {sweep.cell(p.data).candidate for p in sweep.points} - {""}
    assert spider == {"Alg. 3, q = 1", "Alg. 3, q = 2", "Alg. 3, q = 4", "Alg. 11"}
    # the paper's task tunes every method's step α too, as the paper tunes it per ε
    sweep = paper.sweep()
    cells = {(c.algorithm, c.candidate) for c in (sweep.cell(p.data) for p in sweep.points)}
    variants = ("Alg. 3, q = 1", "Alg. 3, q = 2", "Alg. 3, q = 4", "Alg. 11")
    assert {c for m, c in cells if m == "isrl_spider"} == {
        f"{v}, α = {a}" for v in variants for a in ("0.3", "1", "2")
    }
    assert {c for m, c in cells if m == "isrl_mbsgd"} == {"α = 0.1", "α = 0.3", "α = 1", "α = 2"}
    assert len(sweep.points) == (4 + 4 + 12) * 7 * 3
    assert {p.data["dataset"]["records_per_silo"] for p in paper.sweep().points} == {1238}
    # and at equal releases: MB-SGD's 99 rounds against Alg. 11's 2 · 50 − 1 messages
    sweep = releases.sweep()
    assert {(p.data["algorithm"], p.data["rounds"]) for p in sweep.points} == {
        ("isrl_mbsgd", 99),
        ("isrl_spider_alt", 50),
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seeds": 0}, "`reproduce.seeds` input should be greater than or equal to 1; got 0."),
        ({"title": None}, "`reproduce.title` is required."),
        ({"colour": "red"}, "`reproduce.colour` is not a known field."),
        (
            {"x": "rounds"},
            "`reproduce.x` must be a key of `reproduce.grid` (algorithm, privacy.epsilon); got 'rounds'.",
        ),
        (
            {"claims": [BLOCK["claims"][0] | {"better": "isrl_spider"}]},
            "`reproduce.claims.0.better` must be one of the sweep's algorithms (isrl_mbsgd, isrl_localsgd); "
            "got 'isrl_spider'.",
        ),
        (
            {"paper": [BLOCK["paper"][0] | {"value": 12.5}]},
            "`reproduce.paper.0.value` of a test_error must be a fraction in [0, 1] (12.5 % is 0.125); "
            "got 12.5.",
        ),
        (
            {"paper": [BLOCK["paper"][0] | {"metric": "f1"}]},
            "`reproduce.paper.0.metric` input should be 'accuracy', 'test_error' or 'loss'; got 'f1'.",
        ),
        (
            {"grid": {"algorithm": ["isrl_mbsgd"], "privacy.epsilon": [1.0], "seed": [0, 1]}},
            "`reproduce.grid.seed` cannot be swept; give the count as `reproduce.seeds`.",
        ),
        (
            {"grid": {"algorithm": ["isrl_mbsgd", "isrl_localsgd"], "privacy.epsilon": [1.0, -1.0]}},
            "`reproduce.grid.privacy.epsilon` input should be greater than 0; got -1.0 "
            '(point algorithm="isrl_mbsgd", privacy.epsilon=-1.0, seed=0).',
        ),
        (
            {"params_by_algorithm": {"isrl_localsgd": {"momentum": 0.9}}},
            "`reproduce.params_by_algorithm.isrl_localsgd.momentum` is not a known field "
            '(point algorithm="isrl_localsgd", privacy.epsilon=1.0, seed=0).',
        ),
    ],
)
def test_bad_block_is_one_line_naming_the_field(capsys, tmp_path, change, message):
    configs = write_config(tmp_path, block={k: v for k, v in (BLOCK | change).items() if v is not None})
    code, _, err = run_cli(
        capsys, "reproduce", "isrl", "--configs", str(configs), "--out", str(tmp_path / "o")
    )
    assert (code, err) == (1, f"error: isrl_tiny.yaml: {message}\n")


# --- claims -----------------------------------------------------------------------------------


def _row(algorithm, x, accuracy, loss=1.0, variant=""):
    return {
        "setting": "s",
        "variant": variant,
        "algorithm": algorithm,
        "x": x,
        "accuracy_mean": accuracy,
        "loss_mean": loss,
    }


ROWS = [
    _row("a", 1.0, 0.80),
    _row("a", 2.0, 0.90),
    _row("a", 4.0, 0.95),
    _row("b", 1.0, 0.70),
    _row("b", 2.0, 0.86),  # no x = 4: compared on x ∈ {1, 2} only
    _row("ref", None, 0.99),
]


def _claim(better, than, metric="test_error", by=None):
    return Claim(text="t", better=better, than=than, metric=metric, by=by)


@pytest.mark.parametrize(
    ("claim", "verdict", "gap"),
    [
        (_claim("a", "b"), HOLDS, 0.07),  # errors (0.2 + 0.1)/2 against (0.3 + 0.14)/2
        (_claim("a", "b", by=0.07), HOLDS, 0.07),
        (_claim("a", "b", by=0.08), DOES_NOT_HOLD, 0.07),  # ahead, but by less than claimed
        (_claim("b", "a", metric="accuracy"), DOES_NOT_HOLD, -0.07),
        (_claim("a", "b", metric="loss"), DOES_NOT_HOLD, 0.0),  # a tie is not a win
        (
            _claim("ref", "a", metric="accuracy"),
            HOLDS,
            0.99 - (0.80 + 0.90 + 0.95) / 3,
        ),  # non-private: vs the mean
        (_claim("a", "c"), CANNOT, None),
    ],
)
def test_claim_verdicts(claim, verdict, gap):
    result = check_claim(claim, ROWS, setting="s", variant=())
    assert result.verdict == verdict
    assert result.gap == (None if gap is None else pytest.approx(gap, abs=1e-12))


def test_a_claim_at_a_round_reads_that_rounds_means():
    rows = [
        _row("a", 1.0, 0.80, loss=0.50) | {"by_round": {10: {"accuracy_mean": 0.6, "loss_mean": 0.9}}},
        _row("b", 1.0, 0.70, loss=0.40) | {"by_round": {10: {"accuracy_mean": 0.5, "loss_mean": 1.2}}},
    ]
    faster = Claim(text="a converges faster", better="a", than="b", metric="loss", round=10)
    verdict = check_claim(faster, rows, setting="s", variant=())
    assert (verdict.verdict, verdict.gap) == (HOLDS, pytest.approx(0.3))  # behind at the end, ahead at 10
    assert verdict.detail == "a ahead of b by 0.3 of loss at round 10, at x ∈ {1}"
    assert check_claim(faster.model_copy(update={"round": None}), rows, setting="s", variant=()).verdict == (
        DOES_NOT_HOLD
    )
    late = check_claim(faster.model_copy(update={"round": 20}), rows, setting="s", variant=())
    assert (late.verdict, late.detail) == (CANNOT, "no run evaluated at round 20 of a and b")


def test_rows_average_each_round_that_every_run_evaluated():
    def run(seed, curve):
        return Outcome(
            "s", "a", 1.0, (), seed, "succeeded", accuracy=curve[-1][1], loss=curve[-1][2], curve=curve
        )

    outcomes = [run(0, ((5, 0.5, 1.0), (10, 0.7, 0.8))), run(1, ((10, 0.8, 0.6),))]
    (row,) = summary_rows(outcomes, {"s": manifest.ReproduceBlock.model_validate(BLOCK)})
    assert row["by_round"] == {10: {"accuracy_mean": pytest.approx(0.75), "loss_mean": pytest.approx(0.7)}}


def test_claim_verdict_says_why():
    assert check_claim(_claim("a", "c"), ROWS, setting="s", variant=()).detail == "no finished run of c"
    detail = check_claim(_claim("a", "b", by=0.08), ROWS, setting="s", variant=()).detail
    assert detail == (
        "a ahead of b by 7.00 points of test error on average over x ∈ {1, 2}; "
        "the claim needs ≥ 8.00 points of test error"
    )


# --- a whole reproduction ---------------------------------------------------------------------


def test_summary_csv_holds_the_runs_own_numbers(reproduced):
    code, err, out = reproduced
    assert code == 0, err
    rows = read_csv(out / "summary.csv")
    assert [(r["algorithm"], float(r["x"]), int(r["n"])) for r in rows] == [
        ("isrl_mbsgd", 1.0, 2),
        ("isrl_mbsgd", 4.0, 2),
        ("isrl_localsgd", 1.0, 2),
        ("isrl_localsgd", 4.0, 2),
    ]
    for row in rows[1], rows[2]:
        results = direct_runs(row["algorithm"], float(row["x"]))
        accuracy = [r.final.accuracy for r in results]
        loss = [r.final.loss for r in results]
        assert float(row["accuracy_mean"]) == pytest.approx(statistics.mean(accuracy), rel=1e-12)
        assert float(row["accuracy_std"]) == pytest.approx(statistics.stdev(accuracy), rel=1e-9)
        assert float(row["loss_mean"]) == pytest.approx(statistics.mean(loss), rel=1e-12)
        assert float(row["epsilon_mean"]) == pytest.approx(
            statistics.mean(r.epsilon for r in results), rel=1e-12
        )
        assert float(row["epsilon_max"]) <= float(row["target_epsilon"]) * (1 + 1e-9)
    assert 0.3 < float(rows[1]["accuracy_mean"]) < 1.0  # learnt something in 6 rounds (chance 0.1)
    paper = rows[1]
    assert (paper["paper_metric"], paper["paper_value"], paper["paper_epsilon"], paper["paper_source"]) == (
        "test_error",
        "0.2",
        "4.0",
        "Table 9",
    )
    assert float(paper["ours"]) == pytest.approx(1 - float(paper["accuracy_mean"]), rel=1e-12)
    assert rows[0]["paper_value"] == ""


def test_report_embeds_plotly_once_with_figure_and_verdicts(reproduced):
    _, err, out = reproduced
    page = (out / "report.html").read_text()
    assert page.count(get_plotlyjs()[:300]) == 1 and "<script src" not in page
    assert page.count("Plotly.newPlot(") == 1 and 'id="fig-isrl_tiny-0"' in page
    assert '"name":"paper: isrl_mbsgd"' in page and '"role":"mean"' in page
    rows = read_csv(out / "summary.csv")
    acc = {
        r["algorithm"]: statistics.mean(
            float(x["accuracy_mean"]) for x in rows if x["algorithm"] == r["algorithm"]
        )
        for r in rows
    }
    first = HOLDS if acc["isrl_mbsgd"] > acc["isrl_localsgd"] else DOES_NOT_HOLD
    assert (
        f'<span class="{first.replace(" ", "-")}">{first}</span>: MB-SGD is more accurate than Local SGD'
        in page
    )
    assert '<span class="does-not-hold">does not hold</span>: Local SGD has the lower loss, by 5' in page
    assert "<th>ε the paper states</th>" in page and "<small>Table 9</small>" in page
    assert "a &lt;tiny&gt; setting" in page  # config text is escaped
    assert (
        "No run's ledger ε (recomputed from what it released) exceeds the ε it targets" in page
        and "wall time" in page
    )
    assert f"{first}: MB-SGD is more accurate than Local SGD" in err


def test_markdown_section_has_the_table_verdicts_and_the_papers_calibration(reproduced):
    _, err, out = reproduced
    text = (out / "reproduction.md").read_text()
    assert text.startswith("## Seed 000: Lowy, Ghafelebashi & Razaviyayn")
    assert "`dpfl reproduce isrl` (the full sweep): 8 runs here, 2 seeds per cell" in text
    assert "| method | ε = 1 | ε = 4 |" in text
    rows = {(r["algorithm"], float(r["x"])): r for r in read_csv(out / "summary.csv")}
    for algorithm in ("isrl_mbsgd", "isrl_localsgd"):
        cells = [
            f"{100 * float(r['accuracy_mean']):.2f} ± {100 * float(r['accuracy_std']):.2f} / "
            f"{float(r['loss_mean']):.4f}"
            for r in (rows[(algorithm, 1.0)], rows[(algorithm, 4.0)])
        ]
        assert f"| {algorithm} | {cells[0]} | {cells[1]} |" in text
    assert "ε spent (the ledger's): the target, within 0.1 %, in every private run." in text
    assert "| isrl_mbsgd | 4 | test error | 0.2 | " in text and " | Table 9 |" in text
    assert "- **does not hold**: Local SGD has the lower loss, by 5. We measure: isrl_localsgd " in text
    # The paper's σ, accounted without running, is what a run with `calibration: paper` records.
    paper = [
        runner.run(parse_spec(SPEC | {"privacy": SPEC["privacy"] | {"epsilon": e, "calibration": "paper"}}))
        for e in (1.0, 4.0)
    ]
    low, high = (r.epsilon for r in paper)
    assert low < 1.0 and high > 4.0  # over-protects at ε = 1, under-protects at ε = 4
    assert f"| isrl_tiny | isrl_mbsgd | rdp, 1e-5 | {low:.4g} | **{high:.4g}** |" in text
    assert "the paper's own σ under-protects in 2 of 4 cells" in err
    assert (
        html.escape(f"isrl_tiny isrl_mbsgd: the paper's σ for ε = 4 gives ε = {high:.4g}")
        in (out / "report.html").read_text()
    )


def test_doc_section_is_replaced_between_its_markers_and_the_rest_kept(capsys, tmp_path):
    doc = tmp_path / "reproduction.md"
    doc.write_text(
        "# Reproductions\n\n<!-- dpfl reproduce isrl: begin -->\nold numbers\n"
        "<!-- dpfl reproduce isrl: end -->\n\n### Beyond the sweep\nhand-written\n"
    )
    configs = write_config(tmp_path / "configs")
    out = tmp_path / "o"
    code, _, err = run_cli(
        capsys,
        "reproduce",
        "isrl",
        "--quick",
        "--configs",
        str(configs),
        "--out",
        str(out),
        "--doc",
        str(doc),
    )
    assert code == 0, err
    section = (out / "reproduction.md").read_text()
    assert doc.read_text() == (
        "# Reproductions\n\n<!-- dpfl reproduce isrl: begin -->\n"
        + section
        + "<!-- dpfl reproduce isrl: end -->\n\n### Beyond the sweep\nhand-written\n"
    )
    assert f"replaced the isrl section of {doc}" in err


def test_splice_appends_a_missing_section_and_refuses_an_unclosed_one():
    assert splice("# Doc\n", "uldp", "## Seed 004\n") == (
        "# Doc\n\n<!-- dpfl reproduce uldp: begin -->\n## Seed 004\n<!-- dpfl reproduce uldp: end -->\n"
    )
    with pytest.raises(ValueError, match="has no `<!-- dpfl reproduce uldp: end -->` after it"):
        splice("<!-- dpfl reproduce uldp: begin -->\n", "uldp", "x")


def test_docs_hold_one_generated_section_per_paper_in_one_shape():
    text = (ROOT / "docs" / "reproduction.md").read_text()
    for paper in PAPERS.values():
        begin, end = (
            f"<!-- dpfl reproduce {paper.key}: begin -->",
            f"<!-- dpfl reproduce {paper.key}: end -->",
        )
        assert text.count(begin) == 1 and text.count(end) == 1, paper.key
        section = text.split(begin)[1].split(end)[0]
        assert section.startswith(f"\n## Seed {paper.seed}: {paper.citation}\n"), paper.key
        assert f"`dpfl reproduce {paper.key}` (the full sweep)" in section, paper.key
        assert "Test accuracy % (mean ± std over seeds)" in section and "### Privacy corrections" in section


def test_a_sigma_sweep_lists_uldp_naive_under_the_papers_calibration():
    # Seed 004 sweeps σ = 5: the paper states ε for it (Thm 3, 20 rounds in --quick: 4.162);
    # its NAIVE noise is σ = 2.5 against the true sensitivity 2|S|C, so it spends 9.368.
    sweeps = [s.sweep(quick=True) for s in load_paper("uldp", default_config_dir()) if s.name == "uldp_heart"]
    calibrations, failed = paper_calibrations(sweeps, local_projector(data_dirs=[data_dir()]))
    assert failed == []
    (naive,) = calibrations  # GROUP, SGD, AVG and AVG-w offer no closed form; DEFAULT is not private
    assert naive.algorithm == "uldp_naive" and naive.under_protects
    assert naive.target_epsilon == pytest.approx(4.1616, abs=1e-4)
    assert naive.noise_multiplier == pytest.approx(2.5, rel=2e-4)
    assert naive.epsilon == pytest.approx(9.368, abs=2e-3)
