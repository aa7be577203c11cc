"""GET /api/datasets and CSV uploads: availability, validation by the csv loader, limits, a run on one."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from backend.datasets.upload import FRAMING_BYTES
from backend.main import create_app
from dpfl.data import dataset_info, load_dataset, registered_datasets

pytestmark = pytest.mark.service


def table_csv(rows: int = 200, seed: int = 0) -> bytes:
    """Returns a CSV with three numeric features and a label `y` in {0, 1, 2}."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 3))
    y = np.digitize(x[:, 0] + 0.5 * x[:, 1], [-0.5, 0.5])
    lines = ["x1,x2,x3,y"] + [f"{a:.4f},{b:.4f},{c:.4f},{k}" for (a, b, c), k in zip(x, y, strict=True)]
    return ("\n".join(lines) + "\n").encode()


def upload(
    client, body: bytes, *, name: str = "my_table", label: str = "y", filename: str = "t.csv", **headers
):
    return client.post(
        "/api/datasets",
        files={"file": (filename, body, "text/csv")},
        data={"name": name, "label": label},
        headers=headers,
    )


def test_catalogue_lists_every_dataset_with_its_availability(client):
    res = client.get("/api/datasets")
    assert res.status_code == 200
    body = res.json()
    by_name = {d["name"]: d for d in body["datasets"]}
    assert list(by_name) == registered_datasets()
    assert body["uploads"] == []
    digits = by_name["digits"]
    assert (digits["available"], digits["unavailable_reason"], digits["num_classes"]) == (True, None, 10)
    heart = by_name["heart"]
    assert (heart["natural_silos"], heart["options"]) == (4, {"standardise": "per_silo"})
    assert by_name["mnist"]["license"] == "CC BY-SA 3.0"
    dirs = [Path(p) for p in os.environ.get("DPFL_DATA_DIR", "").split(os.pathsep) if p]
    has_mnist = all(any((d / f.relpath).is_file() for d in dirs) for f in dataset_info("mnist").files)
    assert by_name["mnist"]["available"] is has_mnist


def test_without_a_data_dir_mnist_is_unavailable_and_says_which_files(settings):
    with TestClient(create_app(settings.model_copy(update={"data_dir": ""}))) as c:
        by_name = {d["name"]: d for d in c.get("/api/datasets").json()["datasets"]}
    assert by_name["mnist"]["available"] is False
    reason = by_name["mnist"]["unavailable_reason"]
    assert "put train-images-idx3-ubyte.gz (md5 f68b3c2dcbeaaa9fbdd348bbdeb94873)" in reason
    assert by_name["digits"]["available"] is True and by_name["synthetic"]["available"] is True


def test_upload_is_201_and_a_run_on_it_is_201(client, settings):
    body = table_csv()
    res = upload(client, body)
    assert res.status_code == 201, res.text
    stored = settings.cache_dir / "uploads" / "my_table.csv"
    out = res.json()
    assert (out["name"], out["label"], out["num_rows"], out["num_classes"]) == ("my_table", "y", 200, 3)
    assert (out["columns"], out["filename"], out["size_bytes"]) == (
        ["x1", "x2", "x3", "y"],
        "t.csv",
        len(body),
    )
    assert stored.read_bytes() == body and "path" not in out  # a server path is never shown
    assert out["spec_dataset"] == {"name": "csv", "options": {"upload": "my_table"}}
    counts = np.bincount(np.digitize(*_first_two(body)), minlength=3)
    assert out["classes"] == [{"name": str(k), "count": int(counts[k])} for k in range(3)]
    assert out["user_id"] is None
    assert client.get("/api/datasets").json()["uploads"] == [out]
    spec = {
        "algorithm": "isrl_mbsgd",
        "dataset": out["spec_dataset"] | {"silos": 2},
        "model": {"name": "mlp", "hidden": [8]},
        "rounds": 2,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
    }
    run = client.post("/api/runs", json=spec)  # σ given: admission loads the upload to project ε
    assert run.status_code == 201, run.text
    # an upload is budgeted (and listed) under its own name, though it runs through the csv loader
    assert run.json()["dataset"] == "my_table" and run.json()["projected_epsilon"] > 0


def _first_two(body: bytes):
    rows = np.array([line.split(",") for line in body.decode().splitlines()[1:]], dtype=float)
    return rows[:, 0] + 0.5 * rows[:, 1], [-0.5, 0.5]


def test_an_upload_with_a_user_column_runs_user_level_by_name_and_names_its_classes(client, settings):
    lines = ["patient_id,age,outcome"] + [
        f"p{i % 40},{20 + i % 50},{'sick' if i % 3 else 'well'}" for i in range(240)
    ]
    res = client.post(
        "/api/datasets",
        files={"file": ("patients.csv", ("\n".join(lines) + "\n").encode(), "text/csv")},
        data={"name": "patients", "label": "outcome", "user_id": "patient_id"},
    )
    assert res.status_code == 201, res.text
    out = res.json()
    assert (out["user_id"], out["classes"]) == (
        "patient_id",
        [{"name": "sick", "count": 160}, {"name": "well", "count": 80}],
    )
    spec = {
        "algorithm": "uldp_avg",
        "dataset": out["spec_dataset"] | {"silos": 2, "users": {"kind": "natural"}},
        "model": {"name": "mlp", "hidden": [8]},
        "rounds": 2,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
    }
    run = client.post("/api/runs", json=spec)
    assert run.status_code == 201, run.text
    assert run.json()["dataset"] == "patients"
    # the record's user-id column is not a feature, though the spec does not name it: age alone
    data = load_dataset("csv", upload="patients", cache_dir=settings.cache_dir)
    assert (data.feature_names, data.num_classes) == (("age",), 2)
    assert len(np.unique(data.user_train)) == 40
    missing = client.post(
        "/api/runs", json=spec | {"dataset": spec["dataset"] | {"options": {"upload": "nope"}}}
    )
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["body", "dataset", "options", "upload"]
    assert missing.json()["detail"][0]["msg"] == (
        "names no upload on this server; got 'nope'. Uploads: patients."
    )
    wrong = client.post(
        "/api/datasets",
        files={"file": ("p.csv", ("\n".join(lines) + "\n").encode(), "text/csv")},
        data={"name": "patients2", "label": "outcome", "user_id": "patient"},
    )
    assert wrong.status_code == 422
    assert wrong.json()["detail"][0]["loc"] == ["body", "user_id"]
    assert wrong.json()["detail"][0]["msg"] == (
        "names column 'patient', which patients2.csv lacks; columns found: patient_id, age, outcome."
    )


def test_upload_over_the_limit_is_413_and_stores_nothing(settings):
    small = settings.model_copy(update={"max_upload_bytes": 1000})
    with TestClient(create_app(small)) as c:
        res = upload(c, b"x" * 2000, filename="big.csv")
        assert res.status_code == 413
        assert res.json() == {
            "detail": "file 'big.csv' is 2000 bytes; this server accepts uploads of at most 1000 bytes "
            "(DPFL_MAX_UPLOAD_BYTES)",
            "error": "PayloadTooLarge",
        }
        huge = upload(c, b"x" * (1000 + FRAMING_BYTES + 1))  # refused from its Content-Length, unread
        length = int(huge.request.headers["content-length"])
        assert huge.status_code == 413
        assert huge.json()["detail"] == (
            f"the request body is {length} bytes; this server accepts uploads of at most 1000 bytes "
            "(DPFL_MAX_UPLOAD_BYTES)"
        )
        assert c.get("/api/datasets").json()["uploads"] == []
    assert list((settings.cache_dir / "uploads").iterdir()) == []


def test_missing_label_column_is_422_listing_the_columns(client):
    res = upload(client, table_csv(), label="target")
    assert res.status_code == 422
    assert res.json() == {
        "detail": [
            {
                "loc": ["body", "label"],
                "msg": "names column 'target', which my_table.csv lacks; columns found: x1, x2, x3, y.",
                "type": "value_error",
            }
        ],
        "error": "SpecError",
    }


@pytest.mark.parametrize(
    ("name", "msg"),
    [
        (
            "My Table",
            "must be snake_case (lower-case letters, digits and _, starting with a letter), "
            "1 to 40 characters; got 'My Table'.",
        ),
        (
            "t" * 41,
            "must be snake_case (lower-case letters, digits and _, starting with a letter), "
            f"1 to 40 characters; got '{'t' * 41}'.",
        ),
        ("digits", "is a registered dataset; got 'digits'. Choose another name."),
    ],
)
def test_bad_name_is_422(client, name, msg):
    res = upload(client, table_csv(), name=name)
    assert res.status_code == 422
    assert res.json()["detail"] == [{"loc": ["body", "name"], "msg": msg, "type": "value_error"}]


def test_file_the_loader_refuses_is_422_on_file(client):
    res = upload(client, b"x1,y\n")
    assert res.status_code == 422
    [error] = res.json()["detail"]
    assert error["loc"] == ["body", "file"]
    assert error["msg"].endswith("my_table.csv has a header but no data rows.")


def test_an_upload_is_never_replaced(client):
    assert upload(client, table_csv()).status_code == 201
    res = upload(client, table_csv(seed=1))
    assert res.status_code == 409
    assert res.json() == {
        "detail": "an upload named 'my_table' exists; uploads are never replaced, so choose another name",
        "error": "Conflict",
    }


def test_upload_must_be_multipart(client):
    res = client.post("/api/datasets", json={"name": "t", "label": "y"})
    assert res.status_code == 422
    assert res.json()["detail"] == [
        {
            "loc": ["body", "file"],
            "msg": "must be sent as multipart/form-data with fields file, name, label "
            "(and optionally user_id); got content type 'application/json'.",
            "type": "value_error",
        }
    ]


def test_upload_needs_a_token_when_tokens_are_set(settings):
    with TestClient(create_app(settings.model_copy(update={"api_tokens": "s3cret"}))) as c:
        assert upload(c, table_csv()).status_code == 401
        assert upload(c, table_csv(), Authorization="Bearer s3cret").status_code == 201


# A folder no process may write in, root included (sysfs is mounted read-only): where a full or
# read-only disk would stop the server.
UNWRITABLE = Path("/sys/kernel")


@pytest.mark.skipif(not UNWRITABLE.is_dir(), reason="needs /sys/kernel")
def test_an_upload_the_disk_refuses_is_507_naming_the_cause(settings):
    uploads = settings.cache_dir / "uploads"
    uploads.parent.mkdir(parents=True, exist_ok=True)
    uploads.symlink_to(UNWRITABLE)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        res = upload(client, table_csv())
    assert res.status_code == 507, res.text
    assert res.json()["error"] == "InsufficientStorage"
    assert res.json()["detail"].startswith(f"the server could not write to its disk ({uploads}/.incoming-")
    assert res.json()["detail"].endswith(
        "); nothing was saved: free space or make its folders writable (DPFL_HOME), then send the "
        "request again"
    )
    assert "Operation not permitted" in res.json()["detail"] or "Permission denied" in res.json()["detail"]
