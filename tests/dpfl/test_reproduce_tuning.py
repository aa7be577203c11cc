"""`reproduce.tune`: a method runs once per candidate and the lowest mean final training loss stands
for it in each cell; the Newton configs pick the step α per μ this way, on both row scalings."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io

import pytest

from dpfl.cli import main
from dpfl.reproduce import CANNOT, HOLDS, default_config_dir, load_paper
from dpfl.reproduce.manifest import Claim, ReproduceBlock, Sweep
from dpfl.reproduce.summary import DOES_NOT_HOLD, Outcome, check_claim, sensitivity, summary_rows
from dpfl.spec import parse_spec
from dpfl.sweep import expand
from tests.dpfl.test_reproduce import BLOCK, SPEC, write_config
from tests.factories import run_cli

TUNE = {
    "isrl_mbsgd": [
        {"label": "lr 0.5", "set": {"params.lr": 0.5}},
        {"label": "lr 2", "set": {"params.lr": 2.0}},
    ],
    "isrl_localsgd": [
        {"label": "MB-SGD's K, R = 11", "set": {"params.batch_size": 64, "rounds": 11}},
        {
            "label": "Alg. 11",
            "set": {"algorithm": "isrl_spider_alt", "params": {"lr": 1.0, "batch_size": 32}},
        },
    ],
}
TUNED = BLOCK | {"tune": TUNE, "quick": None}
BLOCK_OF_S = ReproduceBlock.model_validate({"title": "s", "grid": {"x": [1]}, "x": "x"})


def _outcome(candidate, seed, train_loss, accuracy, status="succeeded"):
    return Outcome(
        setting="s",
        algorithm="m",
        x=1.0,
        variant=(),
        seed=seed,
        status=status,
        accuracy=accuracy if status == "succeeded" else None,
        loss=0.5,
        train_loss=train_loss,
        candidate=candidate,
    )


def _sweep(tmp_path) -> Sweep:
    block = {k: v for k, v in TUNED.items() if v is not None}
    (setting,) = load_paper("isrl", write_config(tmp_path, block=block))
    return setting.sweep()


def test_the_lowest_mean_training_loss_stands_for_the_cell():
    runs = [
        _outcome("a", 0, 0.5, 0.90),
        _outcome("a", 1, 0.7, 0.92),
        _outcome("b", 0, 0.4, 0.70),
        _outcome("b", 1, 0.5, 0.72),
        _outcome("c", 0, None, None, status="failed"),  # no training loss: passed over
    ]
    (row,) = summary_rows(runs, {"s": BLOCK_OF_S})
    assert row["tuned"] == "b"
    assert row["tuned_losses"] == {"a": pytest.approx(0.6), "b": pytest.approx(0.45), "c": None}
    assert (row["n"], row["failed"], row["accuracy_mean"]) == (2, 0, pytest.approx(0.71))


def test_a_cell_without_a_finished_candidate_shows_its_failures():
    (row,) = summary_rows([_outcome("a", 0, None, None, status="failed")], {"s": BLOCK_OF_S})
    assert (row["tuned"], row["n"], row["failed"]) == ("a", 0, 1)


def test_an_untuned_method_has_no_choice():
    (row,) = summary_rows([_outcome("", 0, 0.3, 0.8)], {"s": BLOCK_OF_S})
    assert (row["tuned"], row["tuned_losses"]) == (None, None)


def test_each_candidate_is_a_run_of_its_own_placed_back_in_its_method(tmp_path):
    sweep = _sweep(tmp_path)
    cells = [sweep.cell(parse_spec(p.data).to_json()) for p in sweep.points]
    # 2 methods × 2 candidates × 2 ε × 2 seeds
    assert len(cells) == 16
    by_candidate = {(c.algorithm, c.candidate) for c in cells}
    assert by_candidate == {
        ("isrl_mbsgd", "lr 0.5"),
        ("isrl_mbsgd", "lr 2"),
        ("isrl_localsgd", "MB-SGD's K, R = 11"),
        ("isrl_localsgd", "Alg. 11"),
    }
    alg11 = [p.data for p in sweep.points if p.data["algorithm"] == "isrl_spider_alt"]
    assert len(alg11) == 4 and all(d["params"] == {"lr": 1.0, "batch_size": 32} for d in alg11)
    localsgd = [p.data for p in sweep.points if p.data["algorithm"] == "isrl_localsgd"]
    own = BLOCK["params_by_algorithm"]["isrl_localsgd"] | {"batch_size": 64}
    assert all(d["params"] == own for d in localsgd)
    assert {d["rounds"] for d in localsgd} == {11} and {d["rounds"] for d in alg11} == {SPEC["rounds"]}


def local_and_served(sweep: Sweep) -> tuple[list[str], list[str]]:
    """Returns the sweep's specs as run here and as its submissions to a server run them, sorted."""
    local = sorted(parse_spec(p.data).model_dump_json() for p in sweep.points)
    served = sorted(
        parse_spec(p.data).model_dump_json()
        for base, grid in sweep.submissions()
        for p in expand(base, grid, max_points=1000)
    )
    return local, served


def test_a_server_runs_exactly_the_local_points(tmp_path):
    sweep = _sweep(tmp_path)
    local, served = local_and_served(sweep)
    assert served == local and len(sweep.submissions()) == 4  # candidates only: no untuned method


@pytest.mark.parametrize(
    ("tune", "message"),
    [
        (
            {"isrl_mbsgd": [{"label": "x", "set": {"seed": 3}}]},
            "`reproduce.tune.isrl_mbsgd.0.set` may set `algorithm`, `params`, `params.<name>` or "
            "`rounds` only; got 'seed'.",
        ),
        (
            {"isrl_spider": [{"label": "x", "set": {"params.phase": 2}}]},
            "`reproduce.tune.isrl_spider` must be one of the sweep's algorithms (isrl_mbsgd, "
            "isrl_localsgd); got 'isrl_spider'.",
        ),
        (
            {"isrl_mbsgd": [{"label": "x", "set": {"algorithm": "isrl_localsgd"}}]},
            "`reproduce.tune.isrl_mbsgd.0.set.algorithm` must not be a method of the grid "
            "('isrl_localsgd' is): its runs would count twice.",
        ),
        (
            {"isrl_mbsgd": [{"label": "x", "set": {"params.phase": 2}}]},
            "`reproduce.tune.isrl_mbsgd.0.set.params.phase` is not a known field.",
        ),
    ],
)
def test_a_bad_candidate_is_one_line_naming_it(capsys, tmp_path, tune, message):
    block = {k: v for k, v in (BLOCK | {"tune": tune}).items()}
    configs = write_config(tmp_path, block=block)
    out = str(tmp_path / "o")
    code, _, err = run_cli(capsys, "reproduce", "isrl", "--configs", str(configs), "--out", out)
    assert (code, err) == (1, f"error: isrl_tiny.yaml: {message}\n")


def test_the_report_names_each_cells_choice(tmp_path):
    block = {k: v for k, v in TUNED.items() if v is not None} | {"seeds": 1, "claims": []}
    configs, out = write_config(tmp_path / "configs", block=block), tmp_path / "out"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        main(["reproduce", "isrl", "--configs", str(configs), "--out", str(out)])
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {r["algorithm"] for r in rows} == {"isrl_mbsgd", "isrl_localsgd"} and len(rows) == 4
    assert {r["tuned"] for r in rows if r["algorithm"] == "isrl_mbsgd"} <= {"lr 0.5", "lr 2"}
    text = (out / "reproduction.md").read_text()
    assert "Tuned by final training loss" in text and "Alg. 11" in text


def test_the_newton_configs_pick_the_step_per_mu_on_both_scalings():
    for setting in load_paper("newton", default_config_dir()):
        sweep = setting.sweep()
        assert sweep.variant_keys == ["params.feature_clip"]
        assert sorted(set(sweep.grid["params.feature_clip"]))[0] == 1.0  # unit-norm rows are a reading
        steps = {}
        for p in sweep.points:
            cell = sweep.cell(p.data)
            steps.setdefault((cell.algorithm, cell.x, cell.variant), set()).add(p.data["params"]["lr"])
        mus = set(setting.block.grid["privacy.mu"])
        for method, n in (("gdp_localnewton", 6), ("gdp_gd", 5)):
            cells = {k: v for k, v in steps.items() if k[0] == method}
            assert {k[1] for k in cells} == mus and all(len(v) == n for v in cells.values())


def test_a_gap_inside_the_seeds_spread_is_called_a_tie():
    claim = Claim(text="a beats b", better="a", than="b", metric="accuracy")
    cell = {"setting": "s", "variant": "", "x": 1.0}
    rows = [
        cell | {"algorithm": "a", "accuracy_mean": 0.801, "accuracy_std": 0.004},
        cell | {"algorithm": "b", "accuracy_mean": 0.800, "accuracy_std": 0.001},
    ]
    verdict = check_claim(claim, rows, setting="s", variant=())
    assert verdict.verdict == HOLDS
    assert verdict.detail.endswith(
        "less than the seeds' standard deviation (0.40 points of accuracy): a tie within noise"
    )
    rows[0]["accuracy_mean"] = 0.9
    assert "tie" not in check_claim(claim, rows, setting="s", variant=()).detail


def test_a_claim_against_one_x_of_the_baseline_compares_every_x_with_it():
    claim = Claim(text="a at every μ beats b at μ = 1", better="a", than="b", metric="accuracy", than_at=1)
    cell = {"setting": "s", "variant": ""}
    rows = [
        cell | {"algorithm": "a", "x": 1.0, "accuracy_mean": 0.80},
        cell | {"algorithm": "a", "x": 5.0, "accuracy_mean": 0.90},
        cell | {"algorithm": "b", "x": 1.0, "accuracy_mean": 0.82},
        cell | {"algorithm": "b", "x": 5.0, "accuracy_mean": 0.99},  # not compared
    ]
    verdict = check_claim(claim, rows, setting="s", variant=())
    assert (verdict.verdict, verdict.gap) == (HOLDS, pytest.approx(0.85 - 0.82))
    assert verdict.detail == (
        "a ahead of b by 3.00 points of accuracy on average over x ∈ {1, 5} against b at x = 1"
    )
    elsewhere = claim.model_copy(update={"than_at": 10})  # b has no x = 10
    assert check_claim(elsewhere, rows, setting="s", variant=()).verdict == CANNOT


def test_each_tuning_candidate_stands_for_its_method_in_the_sensitivity_table():
    block = ReproduceBlock.model_validate(
        {
            "title": "s",
            "grid": {"algorithm": ["m", "b"], "x": [1]},
            "x": "x",
            "claims": [{"text": "m beats b", "better": "m", "than": "b", "metric": "accuracy"}],
            "tune": {"m": [{"label": "a", "set": {"params.q": 1}}, {"label": "b", "set": {"params.q": 2}}]},
        }
    )
    runs = [
        _outcome("a", 0, 0.5, 0.90),
        _outcome("b", 0, 0.4, 0.70),  # the lower training loss: chosen
        dataclasses.replace(_outcome("", 0, None, 0.80), algorithm="b"),
    ]
    rows = summary_rows(runs, {"s": block})
    lines = sensitivity(runs, rows, {"s": block})
    assert [(s.candidate, [r["accuracy_mean"] for r in s.rows]) for s in lines] == [
        ("", [0.70]),
        ("a", [0.90]),
        ("b", [0.70]),
    ]
    assert [(s.verdicts[0].verdict, round(s.verdicts[0].gap, 9)) for s in lines] == [
        (DOES_NOT_HOLD, -0.1),
        (HOLDS, 0.1),
        (DOES_NOT_HOLD, -0.1),
    ]
