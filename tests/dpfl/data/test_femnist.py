"""FEMNIST from LEAF JSON files generated here in LEAF's exact layout (no network): reading, the
writers as natural users, refusing malformed files naming the file and the fault, and a ULDP-AVG
run whose users are the writers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from dpfl import runner
from dpfl.data import load_dataset
from dpfl.data.loaders import femnist
from dpfl.errors import DatasetUnavailable
from dpfl.spec import parse_spec


def leaf_object(writers: dict[str, int], *, seed: int = 0) -> tuple[dict, dict]:
    """Returns a LEAF FEMNIST JSON object (as `data_to_json.py` writes it) with `writers[w]` images
    for writer w, and the arrays it holds per writer."""
    rng = np.random.default_rng(seed)
    arrays = {
        w: (rng.integers(0, 256, (n, 784)) / 255, rng.integers(0, 62, n).astype(np.int64))
        for w, n in writers.items()
    }
    return {
        "users": list(writers),
        "num_samples": list(writers.values()),
        "user_data": {w: {"x": x.tolist(), "y": y.tolist()} for w, (x, y) in arrays.items()},
    }, arrays


def write_leaf(folder: Path, train: list[dict[str, int]], test: list[dict[str, int]]) -> dict:
    """Writes `femnist/train/*.json` and `femnist/test/*.json` under `folder`, one file per dict of
    writers (named as LEAF names them); returns {split: {writer: (x, y)}} in file order."""
    written: dict[str, dict] = {"train": {}, "test": {}}
    for split, files in (("train", train), ("test", test)):
        (folder / "femnist" / split).mkdir(parents=True)
        for index, writers in enumerate(files):
            obj, arrays = leaf_object(writers, seed=index + (100 if split == "test" else 0))
            name = f"all_data_{index}_niid_05_keep_0_{split}_9.json"
            (folder / "femnist" / split / name).write_text(json.dumps(obj))
            written[split] |= arrays
    return written


TRAIN = [{"f0104_19": 5, "f0017_07": 3}, {"f0250_33": 4, "f0104_19b": 2}]
TEST = [{"f0104_19": 2, "f0017_07": 1}, {"f0250_33": 1, "f0104_19b": 1}]


def test_the_files_are_read_in_order_with_the_writers_as_users(tmp_path):
    written = write_leaf(tmp_path, TRAIN, TEST)
    data = load_dataset("femnist", search_dirs=[tmp_path])
    order = ["f0104_19", "f0017_07", "f0250_33", "f0104_19b"]  # file 0's writers, then file 1's
    pixels = np.concatenate([written["train"][w][0] for w in order]).astype(
        np.float32
    )  # as written, in float32
    np.testing.assert_array_equal(data.x_train, pixels)
    np.testing.assert_array_equal(data.y_train, np.concatenate([written["train"][w][1] for w in order]))
    np.testing.assert_array_equal(data.y_test, np.concatenate([written["test"][w][1] for w in order]))
    # ids in sorted writer order: f0017_07 0, f0104_19 1, f0104_19b 2, f0250_33 3
    assert data.user_train.tolist() == [1] * 5 + [0] * 3 + [3] * 4 + [2] * 2
    assert (data.x_train.dtype, data.num_classes, data.num_features, data.name) == (
        np.float32,
        62,
        784,
        "femnist",
    )


def test_a_missing_folder_is_one_line_saying_where_to_put_it(tmp_path):
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("femnist", search_dirs=[tmp_path], download=True)
    assert str(caught.value) == (
        "dataset 'femnist' not found: put LEAF's train/*.json and test/*.json (made by LEAF's "
        f"data/femnist/preprocess.sh -t sample; there is nothing to download) in {tmp_path}/femnist/ "
        f"(looked in: {tmp_path})"
    )


def test_a_folder_without_test_files_is_refused_naming_it(tmp_path):
    write_leaf(tmp_path, TRAIN, [])
    with pytest.raises(DatasetUnavailable, match=rf"^{re.escape(str(tmp_path))}/femnist/test holds no LEAF"):
        load_dataset("femnist", search_dirs=[tmp_path])


def _broken(obj: dict, fault: str) -> object:
    user = obj["user_data"]["w1"]
    if fault == "not an object":
        return [obj]
    if fault == "no num_samples":
        return {k: v for k, v in obj.items() if k != "num_samples"}
    if fault == "count":
        obj["num_samples"][0] = 3
    elif fault == "pixels":
        user["x"][1] = user["x"][1][:700]
    elif fault == "short images":
        user["x"] = [row[:700] for row in user["x"]]
    elif fault == "range":
        user["x"][0][5] = 1.5
    elif fault == "class":
        user["y"][1] = 62
    elif fault == "text":
        user["x"][0][0] = "0.5"
    elif fault == "twice":
        obj["users"].append("w1")
        obj["num_samples"].append(2)
    elif fault == "absent":
        del obj["user_data"]["w1"]
    return obj


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("not an object", "it needs an object with the keys users, num_samples and user_data"),
        ("no num_samples", "it needs an object with the keys users, num_samples and user_data"),
        ("count", "writer 'w1' has num_samples 3 but 2 images and 2 classes; they must agree"),
        ("pixels", "writer 'w1''s images are not lists of 784 numbers"),
        ("short images", r"writer 'w1''s images have 700 pixels; expected 784 \(28×28\)"),
        ("range", r"writer 'w1' has a pixel outside \[0, 1\]"),
        ("class", r"writer 'w1' has a class that is not an integer in \[0, 62\)"),
        ("text", "writer 'w1''s images are not lists of 784 numbers"),
        ("twice", "users names a writer twice"),
        ("absent", "user_data lacks writer 'w1''s x and y lists"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_file_and_the_fault(tmp_path, fault, message):
    obj, _ = leaf_object({"w1": 2})
    path = tmp_path / "all_data_0.json"
    path.write_text(json.dumps(_broken(obj, fault)))
    with pytest.raises(
        DatasetUnavailable, match=rf"^{re.escape(str(path))} is not a LEAF FEMNIST file: {message}$"
    ):
        femnist.read_leaf_json(path)


def test_a_file_that_is_not_json_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "all_data_0.json"
    path.write_text('{"users": ["w1"],\n "num_samples": [1,\n')
    with pytest.raises(
        DatasetUnavailable, match=r"is not a LEAF FEMNIST file: it is not JSON text \(line 3\)$"
    ):
        femnist.read_leaf_json(path)


def test_a_uldp_avg_run_with_the_writers_as_natural_users(tmp_path):
    writers = {f"f{w:04d}_{w % 90:02d}": 12 + w for w in range(8)}
    write_leaf(
        tmp_path, [dict(list(writers.items())[:4]), dict(list(writers.items())[4:])], [{"f0000_00": 6}]
    )
    spec = parse_spec(
        {
            "algorithm": "uldp_avg",
            "params": {"global_lr": 10, "clip": 0.1, "local_lr": 0.01, "local_epochs": 1, "batch_size": 8},
            "dataset": {"name": "femnist", "silos": 3, "users": {"kind": "natural"}},
            "model": {"name": "cnn"},
            "rounds": 2,
            "privacy": {"epsilon": 4.0, "delta": 1e-5},
            "seed": 1,
        }
    )
    algorithm = runner.prepare(spec, data_dirs=[tmp_path])
    users = algorithm.data.users
    assert users.kind == "natural" and users.num_users == 8
    assert users.records_per_user().tolist() == [12 + w for w in range(8)]  # each writer's images
    assert algorithm.data.input_shape == (28, 28)
    result = runner.run(spec, data_dirs=[tmp_path], device="cpu")
    assert result.epsilon is not None and 3.9 < result.epsilon <= 4.0 + 1e-9
    assert result.final.accuracy is not None and 0.0 <= result.final.accuracy <= 1.0
