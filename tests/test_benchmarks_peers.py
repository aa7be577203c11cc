"""The peers benchmark's parts that need no peers' venv: the rows' verdicts and the data export."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.peers import Measure, Row, render
from benchmarks.peers_data import ISRL, export, settings_of

ROOT = Path(__file__).resolve().parents[1]


def _measure(tool: str, *, seconds: float, per_round: float, accuracy: float, epsilon=(3.0,)) -> Measure:
    return Measure(tool, seconds, per_round, accuracy, tuple(epsilon))


def test_a_row_within_noise_stands_and_is_judged_by_both_ratios():
    ours = _measure("ours", seconds=5.0, per_round=0.01, accuracy=0.740)
    fast = Row("w", ours, _measure("opacus", seconds=60.0, per_round=0.3, accuracy=0.752, epsilon=(2.998,)))
    slow = Row("w", ours, _measure("opacus", seconds=30.0, per_round=0.3, accuracy=0.740))
    assert fast.void is None and fast.met is True
    assert fast.whole_speedup == pytest.approx(12.0) and fast.round_speedup == pytest.approx(30.0)
    assert slow.void is None and slow.met is False  # 6× whole process
    assert "12.0×" in render([fast]) and "**no**" in render([slow])


def test_a_row_whose_accuracy_or_epsilon_differs_is_void_and_claims_nothing():
    ours = _measure("ours", seconds=5.0, per_round=0.01, accuracy=0.740)
    accuracy = Row("w", ours, _measure("flower", seconds=100.0, per_round=1.0, accuracy=0.70))
    epsilon = Row("w", ours, _measure("flower", seconds=100.0, per_round=1.0, accuracy=0.74, epsilon=(3.3,)))
    assert accuracy.void == "accuracy differs by 0.040"
    assert epsilon.void == "ε differs"
    assert accuracy.met is None and epsilon.met is None
    table = render([accuracy, epsilon])
    assert "void: accuracy differs by 0.040" in table and "void: ε differs" in table
    assert "20.0×" not in table  # the ratio is not shown


def test_the_export_round_trips_to_what_the_peers_read(tmp_path, monkeypatch):
    """Our prepared data (digits, to stay fast), its silos and initial weights come back exactly."""
    from dpfl import runner
    from dpfl.spec import parse_spec

    spec = dict(
        ISRL, dataset={"name": "digits", "silos": 5, "partition": {"kind": "iid"}}, rounds=3, participation=5
    )
    path = export(spec, tmp_path / "w.npz")
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "peer_runs"))
    sys.modules.pop("common", None)
    from common import accuracy, load, mlp  # the peers' reader

    work = load(str(path))
    algorithm = runner.prepare(parse_spec(spec))
    data = algorithm.data
    assert torch.equal(work.x_train, data.x_train) and torch.equal(work.y_test, data.y_test)
    assert [s.tolist() for s in work.silos] == [s.tolist() for s in data.silos]
    assert work.settings == settings_of(spec) and work.settings["rounds"] == 3
    model = mlp(work)  # the peers' MLP at our initial weights computes our model's logits
    assert torch.allclose(model(work.x_test), algorithm.model(data.x_test), atol=1e-6)
    assert 0.0 <= accuracy(model, work) <= 1.0
    np.testing.assert_array_equal(
        np.load(path)["silo_offsets"], np.cumsum([0] + [len(s) for s in data.silos])
    )
