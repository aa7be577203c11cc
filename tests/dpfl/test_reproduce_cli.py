"""`dpfl reproduce` choosing what to run (--quick, --setting, the settings whose files are here)
and the one-line errors of its command line."""

from __future__ import annotations

import pytest

from tests.dpfl.test_reproduce import BLOCK, SPEC, read_csv, write_config
from tests.factories import run_cli


def test_quick_uses_the_quick_block_and_cannot_check_a_missing_method(capsys, tmp_path):
    configs = write_config(tmp_path / "configs")
    code, _, err = run_cli(
        capsys, "reproduce", "isrl", "--quick", "--configs", str(configs), "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    rows = read_csv(tmp_path / "o" / "summary.csv")
    assert [(r["algorithm"], r["x"], r["n"]) for r in rows] == [
        ("isrl_mbsgd", "1.0", "1"),
        ("isrl_mbsgd", "4.0", "1"),
    ]
    assert (
        "cannot be checked: MB-SGD is more accurate than Local SGD (no finished run of isrl_localsgd)" in err
    )


def test_quick_leaves_out_a_config_that_skips_it_and_says_why(capsys, tmp_path):
    configs = write_config(tmp_path / "configs")
    write_config(configs, "isrl_slow.yaml", block=BLOCK | {"quick": {"skip": "its CNN takes minutes"}})
    code, _, err = run_cli(
        capsys, "reproduce", "isrl", "--quick", "--configs", str(configs), "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    assert "isrl_slow: left out of --quick (its CNN takes minutes)" in err
    assert {r["setting"] for r in read_csv(tmp_path / "o" / "summary.csv")} == {"isrl_tiny"}
    section = (tmp_path / "o" / "reproduction.md").read_text()
    assert "Left out: `isrl_slow` (by --quick: its CNN takes minutes)." in section
    assert (
        "Left out: isrl_slow (by --quick: its CNN takes minutes)."
        in (tmp_path / "o" / "report.html").read_text()
    )


def test_quick_that_leaves_out_every_config_is_refused(capsys, tmp_path):
    configs = write_config(tmp_path / "configs", block=BLOCK | {"quick": {"skip": "slow"}})
    code, _, err = run_cli(
        capsys, "reproduce", "isrl", "--quick", "--configs", str(configs), "--out", str(tmp_path / "o")
    )
    assert (code, err) == (
        1,
        "error: `--quick` leaves out every config of this paper; run without --quick.\n",
    )
    assert not (tmp_path / "o").exists()


def test_unknown_paper_lists_the_known_ones(capsys):
    code, _, err = run_cli(capsys, "reproduce", "isrl2")
    assert (code, err) == (
        1,
        "error: `PAPER` must be one of isrl (seed 000), newton (seed 001), voting (seed 003), "
        "uldp (seed 004); got 'isrl2'.\n",
    )


def test_missing_data_names_dpfl_data_dir(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DPFL_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("DPFL_HOME", str(tmp_path / "home"))
    configs = write_config(tmp_path / "configs", spec=SPEC | {"dataset": {"name": "mnist", "silos": 4}})
    code, _, err = run_cli(
        capsys, "reproduce", "isrl", "--configs", str(configs), "--out", str(tmp_path / "o")
    )
    assert (code, err) == (
        1,
        "error: dataset 'mnist' not found: put train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz "
        "and t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz in $DPFL_DATA_DIR/mnist/ "
        f"(now {tmp_path / 'empty'}) or fetch it with `dpfl run SPEC --download`\n",
    )
    assert not (tmp_path / "o").exists()


def test_a_setting_without_its_files_is_left_out_saying_where_they_go(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DPFL_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("DPFL_HOME", str(tmp_path / "home"))
    configs = write_config(tmp_path / "configs")
    write_config(configs, "isrl_cifar.yaml", spec=SPEC | {"dataset": {"name": "cifar10", "silos": 2}})
    code, _, err = run_cli(
        capsys, "reproduce", "isrl", "--quick", "--configs", str(configs), "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    assert (
        "isrl_cifar: left out (dataset 'cifar10' not found: put cifar-10-python.tar.gz in "
        f"$DPFL_DATA_DIR/cifar10/ (now {tmp_path / 'empty'}) or fetch it with `dpfl run SPEC --download`)"
    ) in " ".join(err.split())
    assert {r["setting"] for r in read_csv(tmp_path / "o" / "summary.csv")} == {"isrl_tiny"}
    assert (
        "Left out: `isrl_cifar` (dataset 'cifar10' not found"
        in (tmp_path / "o" / "reproduction.md").read_text()
    )


def test_the_papers_cifar10_setting_named_without_its_files_is_one_line_and_exit_1(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("DPFL_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("DPFL_HOME", str(tmp_path / "home"))
    code, out, err = run_cli(
        capsys, "reproduce", "isrl", "--setting", "cifar10", "--out", str(tmp_path / "o")
    )
    assert (code, out) == (1, "")
    assert err == (
        "error: dataset 'cifar10' not found: put cifar-10-python.tar.gz in $DPFL_DATA_DIR/cifar10/ "
        f"(now {tmp_path / 'empty'}) or fetch it with `dpfl run SPEC --download`\n"
    )
    assert not (tmp_path / "o").exists()


def test_an_unknown_setting_lists_the_papers_settings(capsys, tmp_path):
    code, _, err = run_cli(capsys, "reproduce", "isrl", "--setting", "svhn", "--out", str(tmp_path / "o"))
    assert (code, err) == (
        1,
        "error: `--setting` must name settings of the paper "
        "(cifar10, mnist, mnist_paper, mnist_paper_releases); got 'svhn'.\n",
    )


@pytest.mark.parametrize(
    ("args", "files", "message"),
    [
        (["--seeds", "0"], {}, "error: `--seeds` must be an integer ≥ 1; got 0.\n"),
        (
            ["--doc", "nowhere.md"],
            {},
            "error: `--doc` names no file; got 'nowhere.md'. Give an existing Markdown file.\n",
        ),
        (
            ["--quick"],
            {"quick": None},
            "error: isrl_tiny.yaml: `reproduce.quick` is not given; run without --quick.\n",
        ),
        (
            [],
            {"block": False},
            "error: no config of paper 'isrl' in {configs} has a `reproduce:` block yet "
            "(its configs: isrl_tiny.yaml); add one as configs/paper/isrl_mnist.yaml does\n",
        ),
    ],
)
def test_cli_errors_are_one_line(capsys, tmp_path, args, files, message):
    block = (
        False if files.get("block") is False else {k: v for k, v in (BLOCK | files).items() if v is not None}
    )
    configs = write_config(tmp_path / "configs", block=block)
    code, _, err = run_cli(capsys, "reproduce", "isrl", "--configs", str(configs), *args)
    assert (code, err) == (1, message.format(configs=configs))


def test_failed_runs_are_reported_and_exit_non_zero(capsys, tmp_path):
    spec = SPEC | {"dataset": {"name": "csv", "silos": 2, "options": {"path": str(tmp_path / "nowhere.csv")}}}
    block = BLOCK | {
        "grid": {"algorithm": ["isrl_mbsgd"], "privacy.epsilon": [1.0]},
        "seeds": 1,
        "paper": [],
        "claims": [],
    }
    configs = write_config(tmp_path / "configs", spec=spec, block=block)
    code, _, err = run_cli(
        capsys, "reproduce", "isrl", "--configs", str(configs), "--out", str(tmp_path / "o")
    )
    assert code == 1
    assert err.splitlines()[-1] == (
        "error: 1 of 1 runs did not succeed (first: isrl_tiny isrl_mbsgd x=1 seed 0: `dataset.path` "
        f"names no file; got '{tmp_path / 'nowhere.csv'}'. Give the path of an existing CSV file.); "
        "the report lists them"
    )
    assert "Failed runs (1)" in (tmp_path / "o" / "report.html").read_text()
    assert read_csv(tmp_path / "o" / "summary.csv")[0]["failed"] == "1"
