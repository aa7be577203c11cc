"""A spec's dataset file is read only inside the data folders and the upload store (issue 17, item 2)."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from backend.db import Database
from backend.models import Run
from tests.backend.conftest import run_here

pytestmark = pytest.mark.service

SECRET = "topsecret:x:0:0"
REFUSED = "must name a file inside the data folders (DPFL_DATA_DIR) or the upload store; got {path!r}."


def spec(path: str, label: str = "x") -> dict:
    return {
        "algorithm": "isrl_mbsgd",
        "dataset": {"name": "csv", "silos": 2, "options": {"path": path, "label": label}},
        "rounds": 2,
        "privacy": {"epsilon": 3.0, "delta": 1e-5},
    }


def refusal(path: str) -> dict:
    return {
        "detail": [
            {
                "loc": ["body", "dataset", "options", "path"],
                "msg": REFUSED.format(path=path),
                "type": "value_error",
            }
        ],
        "error": "SpecError",
    }


@pytest.fixture
def outside(tmp_path):
    """A file outside every data folder, whose first line must never be echoed."""
    secret = tmp_path / "outside" / "shadow"
    secret.parent.mkdir()
    secret.write_text(f"{SECRET}\nroot:y:1:1\n")
    return secret


def test_paths_outside_the_data_folders_are_422_at_submission(client, settings, outside):
    uploads = settings.cache_dir / "uploads"
    uploads.mkdir(parents=True)
    (uploads / "link.csv").symlink_to(outside)  # a symlink inside the store to a file outside it
    for path in (
        "../../../../etc/shadow",
        str(outside),
        "/etc/passwd",
        str(uploads / ".." / ".." / "outside" / "shadow"),
        str(uploads / "link.csv"),
        str(uploads / "nowhere" / ".." / ".." / ".." / "outside" / "shadow"),
    ):
        res = client.post("/api/runs", json=spec(path))
        assert (res.status_code, res.json()) == (422, refusal(path)), path
        res = client.post("/api/privacy/project", json=spec(path))
        assert (res.status_code, res.json()) == (422, refusal(path)), path
    sweep = {"base": spec(str(uploads / "a.csv")), "grid": {"dataset.options.path": [str(outside)]}}
    res = client.post("/api/sweeps", json=sweep)
    assert res.status_code == 422
    assert res.json()["detail"][0]["msg"].startswith(REFUSED.format(path=str(outside)) + " (point 1 of 1")
    assert client.get("/api/runs").json()["items"] == []


def test_a_path_that_is_not_text_is_422(client):
    res = client.post("/api/runs", json=spec(["/etc/passwd"]))  # type: ignore[arg-type]
    assert res.status_code == 422
    assert res.json()["detail"][0] == {
        "loc": ["body", "dataset", "options", "path"],
        "msg": "must be a string: the path of a CSV file; got ['/etc/passwd'].",
        "type": "value_error",
    }


def test_the_worker_refuses_a_path_outside_and_echoes_nothing(client, settings, outside):
    # A run admitted while its path was inside; its spec then names a file outside (e.g. a row
    # written by an older server): the worker refuses it before opening anything.
    uploads = settings.cache_dir / "uploads"
    uploads.mkdir(parents=True)
    inside = uploads / "t.csv"
    inside.write_text("a,x\n" + "".join(f"{i},{i % 2}\n" for i in range(40)))
    run_id = client.post("/api/runs", json=spec(str(inside))).json()["id"]
    database = Database(settings.database_url)
    with database.session() as session:
        session.execute(update(Run).where(Run.id == run_id).values(spec=spec("../../../../etc/shadow")))
    database.engine.dispose()
    run_here(settings, run_id)
    body = client.get(f"/api/runs/{run_id}").json()
    assert body["status"] == "failed"
    assert body["error"] == "`dataset.options.path` " + REFUSED.format(path="../../../../etc/shadow")


def test_a_file_inside_that_is_no_csv_is_not_echoed(client, settings, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.csv").write_text(f"{SECRET}\nroot:y:1:1\nroot:z:2:2\n")
    (data / "dup.csv").write_text("secretcol,secretcol,x\n1,2,a\n3,4,b\n")
    (data / "one.csv").write_text("a,x\n1,secretclass\n2,secretclass\n")
    (data / "latin.csv").write_bytes("a,x\n1,caf\xe9\n".encode("latin-1"))
    settings.data_dir = str(data)  # the client's app holds this same settings object
    for name, error in (
        ("notes.csv", "`dataset.label` names a column notes.csv lacks (its header has 1 column)."),
        (
            "dup.csv",
            f"`dataset.path` header of {data / 'dup.csv'} repeats a column name (columns 1 and 2); "
            "names must be unique.",
        ),
        ("one.csv", "`dataset.label` column 'x' must hold at least 2 classes; got 1."),
        (
            "latin.csv",
            f"`dataset.path` file {data / 'latin.csv'} is not a readable UTF-8 CSV (it holds "
            "bytes that are not UTF-8); save it as UTF-8 comma-separated text.",
        ),
    ):
        res = client.post("/api/runs", json=spec(name))  # relative: in the data folder
        assert res.status_code == 422, name  # refused at submission: the spec is prepared on its data
        (problem,) = res.json()["detail"]
        assert f"`{'.'.join(problem['loc'][1:])}` {problem['msg']}" == error, name
        assert "secret" not in res.text and "root:" not in res.text, name
