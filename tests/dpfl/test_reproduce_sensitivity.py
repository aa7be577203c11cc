"""`reproduce.sensitivity` and `reproduce.ceiling`: the verdict under each unstated choice, and each
method without noise beside its results; neither moves the configured verdict."""

from __future__ import annotations

import contextlib
import csv
import io

import pytest

from dpfl.cli import main
from dpfl.reproduce import HOLDS, default_config_dir, load_paper
from dpfl.reproduce.calibration import PaperCalibration
from dpfl.reproduce.manifest import CEILING, SENSITIVITY, ReproduceBlock
from dpfl.reproduce.markdown import _calibration_table as markdown_table
from dpfl.reproduce.summary import DOES_NOT_HOLD, Outcome, sensitivity, summary_rows, verdicts
from dpfl.spec import parse_spec
from tests.dpfl.test_reproduce import BLOCK, SPEC, write_config
from tests.dpfl.test_reproduce_tuning import local_and_served
from tests.factories import run_cli

SENSITIVE = {"isrl_mbsgd": [{"label": "lr 0.5", "set": {"params.lr": 0.5}}]}
CEIL = {"set": {"privacy.noise_multiplier": 1.0e-3, "privacy.epsilon": None}}
EXTRAS = {k: v for k, v in BLOCK.items() if k != "quick"} | {"sensitivity": SENSITIVE, "ceiling": CEIL}


def _sweep(tmp_path):
    (setting,) = load_paper("isrl", write_config(tmp_path, block=EXTRAS))
    return setting.sweep()


def test_the_sensitivity_candidates_and_the_ceiling_run_beside_the_methods_points(tmp_path):
    sweep = _sweep(tmp_path)
    cells = [sweep.cell(parse_spec(p.data).to_json()) for p in sweep.points]
    # 2 methods × 2 ε × 2 seeds, MB-SGD's candidate at each of its 4, a ceiling per method and seed
    assert len(cells) == 8 + 4 + 4
    main_cells = [c for c in cells if not c.role]
    assert len(main_cells) == 8 and {c.candidate for c in main_cells} == {""}
    varied = [c for c in cells if c.role == SENSITIVITY]
    assert {(c.algorithm, c.candidate) for c in varied} == {("isrl_mbsgd", "lr 0.5")}
    assert sorted(c.x for c in varied) == [1.0, 1.0, 4.0, 4.0]
    ceilings = [c for c in cells if c.role == CEILING]
    assert sorted((c.algorithm, c.seed) for c in ceilings) == [
        ("isrl_localsgd", 0),
        ("isrl_localsgd", 1),
        ("isrl_mbsgd", 0),
        ("isrl_mbsgd", 1),
    ]
    assert all(c.x is None for c in ceilings)
    noise = [p.data["privacy"] for p in sweep.points if sweep.cell(p.data).role == CEILING]
    assert all(p["noise_multiplier"] == 1e-3 and p["epsilon"] is None for p in noise)


def test_a_server_runs_exactly_the_local_points(tmp_path):
    sweep = _sweep(tmp_path)
    local, served = local_and_served(sweep)
    assert served == local and len(sweep.submissions()) == 3  # the grid, the ceiling, one candidate


BLOCK_S = ReproduceBlock.model_validate(
    {
        "title": "s",
        "grid": {"algorithm": ["a", "b"], "x": [1, 2]},
        "x": "x",
        "claims": [{"text": "a beats b", "better": "a", "than": "b", "metric": "accuracy", "by": 0.05}],
        "sensitivity": {"a": [{"label": "Q = 1", "set": {"params.q": 1}}]},
        "ceiling": {"set": {"x": None}},
    }
)


def _o(algorithm, x, accuracy, *, role="", candidate="", seed=0, sigma=None):
    return Outcome("s", algorithm, x, (), seed, "succeeded", accuracy, 0.5, 1.0, 1.0, candidate=candidate,
                   role=role, sigma=sigma)  # fmt: skip


RUNS = [
    _o("a", 1.0, 0.80, sigma=2.0),
    _o("a", 2.0, 0.90, sigma=1.0),
    _o("b", 1.0, 0.70, sigma=3.0),
    _o("b", 2.0, 0.80, sigma=1.5),
    _o("a", 1.0, 0.60, role=SENSITIVITY, candidate="Q = 1", sigma=0.5),
    _o("a", 2.0, 0.70, role=SENSITIVITY, candidate="Q = 1", sigma=0.25),
    _o("a", None, 0.99, role=CEILING, sigma=1e-3),
    _o("b", None, 0.10, role=CEILING, sigma=1e-3),
]


def test_the_configured_verdict_ignores_the_candidates_and_the_ceiling():
    rows = summary_rows(RUNS, {"s": BLOCK_S})
    assert [(r["algorithm"], r["x"], r["role"], r["candidate"]) for r in rows] == [
        ("a", 1.0, "", ""),
        ("a", 2.0, "", ""),
        ("b", 1.0, "", ""),
        ("b", 2.0, "", ""),
        ("a", 1.0, SENSITIVITY, "Q = 1"),
        ("a", 2.0, SENSITIVITY, "Q = 1"),
        ("a", None, CEILING, ""),
        ("b", None, CEILING, ""),
    ]
    assert [r["sigma"] for r in rows] == [2.0, 1.0, 3.0, 1.5, 0.5, 0.25, 1e-3, 1e-3]
    (verdict,) = verdicts(RUNS, rows, {"s": BLOCK_S})
    assert (verdict.verdict, verdict.gap) == (HOLDS, pytest.approx(0.10))


def test_each_candidate_stands_for_its_method_in_turn():
    rows = summary_rows(RUNS, {"s": BLOCK_S})
    lines = sensitivity(RUNS, rows, {"s": BLOCK_S})
    assert [(s.method, s.candidate) for s in lines] == [("a", ""), ("a", "Q = 1")]
    configured, q1 = lines
    assert [r["accuracy_mean"] for r in q1.rows] == [0.60, 0.70]
    assert (configured.verdicts[0].verdict, configured.verdicts[0].gap) == (HOLDS, pytest.approx(0.10))
    assert (q1.verdicts[0].verdict, q1.verdicts[0].gap) == (DOES_NOT_HOLD, pytest.approx(-0.10))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"ceiling": {"set": {"privacy.noise_multiplier": 0.001}}},
            "`reproduce.ceiling.set` must set the x field `privacy.epsilon` (to null, or the value that "
            "removes the noise): a ceiling run stands beside every x.",
        ),
        (
            {"ceiling": CEIL | {"methods": ["isrl_spider"]}},
            "`reproduce.ceiling.methods.0` must be one of the sweep's algorithms (isrl_mbsgd, "
            "isrl_localsgd); got 'isrl_spider'.",
        ),
        (
            {"sensitivity": {"isrl_mbsgd": [{"label": "x", "set": {"seed": 3}}]}},
            "`reproduce.sensitivity.isrl_mbsgd.0.set` may set `algorithm`, `params`, `params.<name>` or "
            "`rounds` only; got 'seed'.",
        ),
        (
            {
                "sensitivity": {"isrl_mbsgd": [{"label": "x", "set": {"params.lr": 0.5, "rounds": 3}}]},
                "grid": BLOCK["grid"] | {"rounds": [2, 4]},
            },
            "`reproduce.sensitivity.isrl_mbsgd.0.set.rounds` must not set a key the grid sweeps: every "
            "point of the grid sets it again.",
        ),
        (
            {
                "ceiling": CEIL | {"methods": ["fedavg"]},
                "grid": BLOCK["grid"] | {"algorithm": ["isrl_mbsgd", "fedavg"]},
            },
            "`reproduce.ceiling.methods.0` names 'fedavg', which adds no noise: its own results are its "
            "ceiling.",
        ),
        (
            {"sensitivity": SENSITIVE, "tune": SENSITIVE},
            "`reproduce.sensitivity.isrl_mbsgd` must not be tuned too: its own point would not stand.",
        ),
        (
            {"sensitivity": {"isrl_mbsgd": [{"label": "x", "set": {"privacy.calibration": "fast"}}]}},
            "`reproduce.sensitivity.isrl_mbsgd.0.set.privacy.calibration` input should be 'accountant' or "
            "'paper'; got 'fast'.",
        ),
    ],
)
def test_a_bad_ceiling_or_candidate_is_one_line_naming_it(capsys, tmp_path, extra, message):
    # a case that changes the grid drops the claims, which name methods it may not have
    block = {k: v for k, v in (BLOCK | extra).items() if k != "claims" or "grid" not in extra}
    configs = write_config(tmp_path, block=block)
    out = str(tmp_path / "o")
    code, _, err = run_cli(capsys, "reproduce", "isrl", "--configs", str(configs), "--out", out)
    assert (code, err) == (1, f"error: isrl_tiny.yaml: {message}\n")


def test_the_report_puts_the_ceiling_beside_each_method_and_tables_the_candidates(tmp_path):
    block = EXTRAS | {"seeds": 1}
    configs, out = write_config(tmp_path / "configs", block=block), tmp_path / "out"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        main(["reproduce", "isrl", "--configs", str(configs), "--out", str(out)])
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert sorted((r["algorithm"], r["role"]) for r in rows if r["role"]) == [
        ("isrl_localsgd", CEILING),
        ("isrl_mbsgd", CEILING),
        ("isrl_mbsgd", SENSITIVITY),
        ("isrl_mbsgd", SENSITIVITY),
    ]
    text = (out / "reproduction.md").read_text()
    table = text.split("Test accuracy %")[1].split("\n\n")[1].splitlines()
    assert table[0] == "| method | ε = 1 | ε = 4 | without noise (σ = 0.001; not private) |"
    assert len(table) == 4 and all(line.count("|") == 5 for line in table)
    assert "- isrl_mbsgd: lr 2.0, batch_size 64, clip 1.0; σ " in text
    after = text.split("Sensitivity of the verdict to isrl_mbsgd's unstated choices")[1].split("\n\n")
    (head, _, configured, candidate), legend = after[1].splitlines(), after[2]
    assert head == "| isrl_mbsgd | ε = 1 | ε = 4 | claim 1 | claim 2 |"  # σ per ε is in the parameters
    assert configured.startswith("| as configured | ") and candidate.startswith("| lr 0.5 | ")
    assert configured.count("hold") == 2  # each claim's verdict: "holds" or "does not hold"
    assert legend == (
        "Claim 1: MB-SGD is more accurate than Local SGD. Claim 2: Local SGD has the lower loss, by 5."
    )


def test_the_voting_settings_table_q_and_the_ceiling_of_labels_and_student():
    settings = load_paper("voting", default_config_dir())
    assert [s.name for s in settings] == [
        "voting_digits",
        "voting_mnist_noniid",
        "voting_mnist_six_digits",
        "voting_mnist_six_digits_cnn",
        "voting_mnist_six_digits_frozen",
    ]
    for setting in settings:
        sweep = setting.sweep()
        assert "ae_dpfl" in sweep.ceiling_methods
        qs = {c.set.get("params.queries") for c in setting.block.sensitivity["ae_dpfl"]}
        assert {100, 250, 500} <= qs or setting.name == "voting_digits"  # Digits states Q = 500
    cnn = settings[3].sweep()
    assert {p.data["model"]["name"] for p in cnn.points} == {"cnn"}
    frozen = settings[4].sweep()
    assert {p.data["params"]["pool_pca"] for p in frozen.points} == {50}  # every method, ceiling too


def test_a_non_private_method_has_no_ceiling_runs(tmp_path):
    block = EXTRAS | {
        "grid": BLOCK["grid"] | {"algorithm": ["isrl_mbsgd", "fedavg"]},
        "claims": [],
        "paper": [],
    }
    block["params_by_algorithm"] = {"fedavg": {"lr": 0.1}}
    (setting,) = load_paper("isrl", write_config(tmp_path, block=block))
    sweep = setting.sweep()
    assert sweep.ceiling_methods == ["isrl_mbsgd"]
    cells = [sweep.cell(p.data) for p in sweep.points]
    assert sum(c.algorithm == "fedavg" for c in cells) == 2  # its two seeds, once each
    assert sorted((c.algorithm, c.role) for c in cells if c.role == CEILING) == [("isrl_mbsgd", CEILING)] * 2


def test_a_ceiling_that_sets_the_swept_sigma_stands_beside_every_x(tmp_path):
    spec = SPEC | {"privacy": {"noise_multiplier": 1.0, "delta": 1e-5}}
    block = {k: v for k, v in EXTRAS.items() if k not in ("paper", "claims")} | {
        "x": "privacy.noise_multiplier",
        "grid": {"algorithm": ["isrl_mbsgd", "isrl_localsgd"], "privacy.noise_multiplier": [1.0, 2.0]},
        "ceiling": {"set": {"privacy.noise_multiplier": 1.0e-3}},
    }
    (setting,) = load_paper("isrl", write_config(tmp_path, spec=spec, block=block))
    sweep = setting.sweep()
    ceilings = [c for c in (sweep.cell(p.data) for p in sweep.points) if c.role == CEILING]
    assert len(ceilings) == 4 and {c.x for c in ceilings} == {None}


def test_the_paper_sigma_table_gives_candidates_that_spend_alike_one_line():
    def calibration(algorithm, target, spent):
        return PaperCalibration("s", algorithm, (), target, spent, 1.0, "rdp", 1e-5)

    calibrations = [
        calibration(f"m ({label})", target, target / 2)
        for label in ("α = 1", "α = 2")
        for target in (1.0, 3.0)
    ]
    calibrations += [
        calibration(f"n ({label})", 1.0, spent)
        for label, spent in (("a", 0.5), ("b", 0.5), ("c", 0.5), ("d", 2.0))
    ]
    calibrations.append(calibration("o", 1.0, 0.25))
    table = markdown_table(calibrations)
    assert table[2:] == [
        "| setting | method | accountant, δ | stated ε = 1 | stated ε = 3 |",
        "|---|---|---|---|---|",
        "| s | m (every candidate: 2) | rdp, 1e-5 | 0.5 | 1.5 |",
        "| s | n (3 candidates: a … c) | rdp, 1e-5 | 0.5 | – |",
        "| s | n (d) | rdp, 1e-5 | **2** | – |",
        "| s | o | rdp, 1e-5 | 0.25 | – |",
        "",
    ]
