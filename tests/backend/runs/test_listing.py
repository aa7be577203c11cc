"""The runs list and its CSV export against a real database (Postgres and SQLite): text search,
tag, sweep and archived filters, the sort keys, the fields each item carries, and names, tags
and notes set over PATCH (which the page cache must show at once)."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest

from backend.db import Database
from backend.models import RoundMetric, Run, Sweep

pytestmark = pytest.mark.service

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CSV_COLUMNS = [
    "id",
    "name",
    "tags",
    "status",
    "algorithm",
    "dataset",
    "sweep_id",
    "sweep_name",
    "notion",
    "target_epsilon",
    "epsilon",
    "delta",
    "accountant",
    "noise_multiplier",
    "final_accuracy",
    "best_accuracy",
    "final_balanced_accuracy",
    "final_loss",
    "rounds",
    "seed",
    "duration_s",
    "created_at",
]


def add_runs(settings) -> None:
    """Stores four finished runs (a0…a3, oldest first) and a sweep `sw` holding a1 and a2."""
    database = Database(settings.database_url)
    rows = [
        # id, algorithm, dataset, notion, rounds, seconds, name, tags, archived, sweep
        ("a0", "fedavg", "digits", "none", 5, 30.0, "Baseline", ["ref"], False, None),
        ("a1", "isrl_mbsgd", "digits", "record", 20, 10.0, "", ["paper", "Δ-test"], False, "sw"),
        ("a2", "uldp_avg", "heart", "user", 10, None, "heart users", [], False, "sw"),
        ("b3", "dp_fedavg", "adult", "agent", 3, 20.0, "old", ["ref"], True, None),
    ]
    with database.session() as session:
        session.add(Sweep(id="sw", name="grid", base={}, grid={}, num_runs=2))
        session.flush()
        for i, (rid, algorithm, dataset, notion, rounds, seconds, name, tags, archived, sweep) in enumerate(
            rows
        ):
            start = T0 + dt.timedelta(minutes=i)
            session.add(
                Run(
                    id=rid,
                    created_at=start,
                    status="succeeded" if seconds else "running",
                    algorithm=algorithm,
                    dataset=dataset,
                    notion=notion,
                    rounds=rounds,
                    spec={"seed": 10 + i, "params": {"lr": 0.1 * (i + 1)}},
                    started_at=start,
                    finished_at=start + dt.timedelta(seconds=seconds) if seconds else None,
                    name=name,
                    tags=tags,
                    archived=archived,
                    sweep_id=sweep,
                    epsilon=None if notion == "none" else 1.0 + i,
                    delta=None if notion == "none" else 1e-5,
                    accountant=None if notion == "none" else "rdp",
                )
            )
        session.flush()
        # a1's evaluated rounds: its best accuracy is not its last
        session.add_all(
            RoundMetric(run_id="a1", round=r, accuracy=a, loss=1 - a)
            for r, a in ((5, 0.6), (10, 0.8), (20, 0.7))
        )
    database.engine.dispose()


def ids(client, **params) -> list[str]:
    res = client.get("/api/runs", params=params)
    assert res.status_code == 200, res.text
    return [r["id"] for r in res.json()["items"]]


def test_items_carry_the_columns_a_table_can_choose(client, settings):
    add_runs(settings)
    item = client.get("/api/runs", params={"q": "a1"}).json()["items"][0]
    assert {k: item[k] for k in ("id", "name", "tags", "seed", "params", "rounds", "duration_s")} == {
        "id": "a1",
        "name": "",
        "tags": ["paper", "Δ-test"],
        "seed": 11,
        "params": {"lr": 0.2},
        "rounds": 20,
        "duration_s": 10.0,
    }
    assert (
        item["sweep_id"],
        item["sweep_name"],
        item["accountant"],
        item["delta"],
        item["notes"],
        item["archived"],
    ) == (
        "sw",
        "grid",
        "rdp",
        1e-5,
        "",
        False,
    )
    detail = client.get("/api/runs/a1").json()
    assert (detail["seed"], detail["params"], detail["tags"], detail["sweep_name"]) == (
        11,
        {"lr": 0.2},
        ["paper", "Δ-test"],
        "grid",
    )
    assert client.patch("/api/sweeps/sw", json={"name": "renamed grid"}).status_code == 200
    assert client.get("/api/runs", params={"q": "a1"}).json()["items"][0]["sweep_name"] == "renamed grid"


def test_archived_runs_are_hidden_unless_asked_for(client, settings):
    add_runs(settings)
    assert ids(client) == ["a2", "a1", "a0"]
    assert client.get("/api/runs").json()["total"] == 3
    assert ids(client, archived="true") == ["b3"]
    assert ids(client, archived="all") == ["b3", "a2", "a1", "a0"]
    res = client.get("/api/runs", params={"archived": "maybe"})
    assert res.status_code == 422
    assert res.json()["detail"] == [
        {"loc": ["query", "archived"], "msg": "Input should be 'false', 'true' or 'all'", "type": "enum"}
    ]


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("BASE", ["a0"]),  # name, any case
        ("heart", ["a2"]),  # dataset and name
        ("ISRL", ["a1"]),  # algorithm
        ("pap", ["a1"]),  # part of a tag
        ("Δ-TEST", ["a1"]),  # a tag beyond ASCII (case-insensitive in ASCII letters only)
        ("δ-test", []),
        ("a", ["a2", "a1", "a0"]),  # the id prefix, names, algorithms
        ("fedavg", ["a0"]),  # dp_fedavg is archived
        ("%", []),  # LIKE wildcards are literal
        ("_", ["a2", "a1"]),  # isrl_mbsgd, uldp_avg
        ("nothing", []),
    ],
)
def test_q_searches_name_tags_algorithm_dataset_and_id_prefix(client, settings, q, found):
    add_runs(settings)
    assert ids(client, q=q) == found


def test_tag_sweep_and_q_filters_combine(client, settings):
    add_runs(settings)
    assert ids(client, tag="ref") == ["a0"]
    assert ids(client, tag="ref", archived="all") == ["b3", "a0"]
    assert ids(client, tag="re") == []  # a tag matches whole
    assert ids(client, tag=["paper", "Δ-test"]) == ["a1"]
    assert ids(client, tag=["paper", "ref"]) == []
    assert ids(client, sweep="sw") == ["a2", "a1"]
    assert ids(client, sweep="sw", q="heart") == ["a2"]


@pytest.mark.parametrize(
    ("sort", "order"),
    [
        ("duration_s", ["a1", "a0", "a2"]),  # a2 is running since 2026: longest of all
        ("-rounds", ["a1", "a2", "a0"]),
        ("dataset", ["a1", "a0", "a2"]),  # digits, digits (newest id first), heart
        ("name", ["a1", "a0", "a2"]),  # "", "Baseline", "heart users"
        ("notion", ["a0", "a1", "a2"]),
        ("-epsilon", ["a2", "a1", "a0"]),  # fedavg has no ε: last
        ("epsilon", ["a1", "a2", "a0"]),  # still last
    ],
)
def test_sort_keys(client, settings, sort, order):
    add_runs(settings)
    assert ids(client, sort=sort) == order


def test_an_unknown_sort_is_a_422_listing_the_keys(client):
    res = client.get("/api/runs", params={"sort": "-colour"})
    assert res.status_code == 422
    assert res.json()["detail"] == [
        {
            "loc": ["query", "sort"],
            "msg": "must be one of accountant, algorithm, best_accuracy, created_at, dataset, delta, "
            "duration_s, epsilon, final_accuracy, final_balanced_accuracy, final_loss, name, notion, rounds, "
            "status, target_epsilon (prefix - for descending); "
            "got '-colour'.",
            "type": "value_error",
        }
    ]


def test_csv_exports_every_match_with_its_columns(client, settings):
    add_runs(settings)
    res = client.get("/api/runs.csv", params={"archived": "all", "sort": "created_at"})
    assert res.status_code == 200 and res.headers["x-total-count"] == "4"
    assert res.headers["content-type"] == "text/csv; charset=utf-8"
    table = list(csv.DictReader(io.StringIO(res.text)))
    assert list(table[0]) == [*CSV_COLUMNS, "params.lr"]  # then every param key of the runs
    assert [r["id"] for r in table] == ["a0", "a1", "a2", "b3"]
    assert table[1] | {"created_at": ""} == {
        "id": "a1",
        "name": "",
        "tags": "paper,Δ-test",
        "status": "succeeded",
        "algorithm": "isrl_mbsgd",
        "dataset": "digits",
        "sweep_id": "sw",
        "sweep_name": "grid",
        "notion": "record",
        "target_epsilon": "",
        "epsilon": "2.0",
        "delta": "1e-5",
        "accountant": "rdp",
        "noise_multiplier": "",
        "final_accuracy": "",
        "best_accuracy": "0.8",
        "final_balanced_accuracy": "",
        "final_loss": "",
        "rounds": "20",
        "seed": "11",
        "duration_s": "10.0",
        "created_at": "",
        "params.lr": "0.2",
    }
    assert (
        client.get("/api/runs", params={"sort": "-best_accuracy"}).json()["items"][0]["best_accuracy"] == 0.8
    )
    assert table[0]["created_at"] == "2026-01-01T00:00:00+00:00"
    tagged = list(csv.DictReader(io.StringIO(client.get("/api/runs.csv", params={"tag": "ref"}).text)))
    assert [r["id"] for r in tagged] == ["a0"]
    bad = client.get("/api/runs.csv", params={"sort": "colour"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "sort"]


def test_csv_cells_a_spreadsheet_would_run_are_quoted(client, settings):
    add_runs(settings)
    typed = {"name": '=HYPERLINK("http://x.test","open")', "tags": ["@SUM(1+1)", "+cmd", "-x", "ok"]}
    assert client.patch("/api/runs/a1", json=typed).status_code == 200
    (row,) = [r for r in csv.DictReader(io.StringIO(client.get("/api/runs.csv").text)) if r["id"] == "a1"]
    assert row["name"] == "'" + typed["name"]
    assert row["tags"].startswith("'") and not row["tags"][1:].startswith("'")  # the cell, quoted once
    assert sorted(row["tags"][1:].split(",")) == sorted(typed["tags"])
    assert row["epsilon"] == "2.0"  # numbers are never quoted, negative or not


def test_csv_is_not_cut_at_a_page(client, settings):
    database = Database(settings.database_url)
    with database.session() as session:
        session.add_all(
            Run(id=f"r{i:04d}", algorithm="fedavg", dataset="digits", rounds=1, spec={"seed": i})
            for i in range(1203)
        )
    database.engine.dispose()
    res = client.get("/api/runs.csv", params={"sort": "-rounds"})
    rows = list(csv.reader(io.StringIO(res.text)))
    assert res.headers["x-total-count"] == "1203" and len(rows) == 1 + 1203
    assert rows[1][0] == "r1202" and rows[-1][0] == "r0000"
    assert sorted(int(r[CSV_COLUMNS.index("seed")]) for r in rows[1:]) == list(range(1203))


@pytest.mark.parametrize(
    ("expression", "archived", "found"),
    [
        ("epsilon <= 2", "false", ["a1"]),
        ("epsilon <= 3 and status = succeeded", "false", ["a1"]),
        ("params.lr > 0.15", "false", ["a2", "a1"]),
        ("params.lr > 0.15", "all", ["b3", "a2", "a1"]),
        ("params.lr >= 0.1 AND params.lr < 0.15", "false", ["a0"]),
        ("seed = 10", "false", ["a0"]),
        ("algorithm = 'isrl_mbsgd'", "false", ["a1"]),
        ("algorithm != isrl_mbsgd and notion = none", "false", ["a0"]),
        ('params.lr = "0.1"', "false", []),  # a number in the spec is not the text "0.1"
        ("dataset.silos = 4", "false", []),  # not in these specs: no match, no error
        ("  ", "false", ["a2", "a1", "a0"]),
    ],
)
def test_a_filter_expression_narrows_the_list(client, settings, expression, archived, found):
    add_runs(settings)
    assert ids(client, filter=expression, archived=archived) == found


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("epsilon <=", "expected a value after epsilon <=; got the end."),
        ("epsilon 2", "expected an operator (= != < <= > >=) after 'epsilon'; got '2'."),
        ("epsilon <= 2 or seed = 1", "expected `and` at character 14; got 'or'."),
        (
            "epsilonn < 2",
            "names no field: 'epsilonn' is neither a column (accountant, accuracy, algorithm, "
            "balanced_accuracy, dataset, delta, epsilon, loss, name, notion, rounds, seed, status, "
            "target_epsilon) nor a path into the spec such as params.lr or dataset.silos.",
        ),
        ("epsilon = abc", "compares epsilon, a number, with 'abc'."),
        ("status = 2", "compares status, a text, with 2.0: quote it to compare as text."),
        ("params.lr < 'x'", "compares params.lr < with text 'x'; `<` and `>` take numbers."),
        ("epsilon <= 2 and $", "cannot read '$' at character 18."),
    ],
)
def test_a_filter_that_does_not_parse_is_a_422_saying_where(client, expression, message):
    res = client.get("/api/runs", params={"filter": expression})
    assert res.status_code == 422, res.text
    assert res.json()["detail"] == [{"loc": ["query", "filter"], "msg": message, "type": "value_error"}]


def test_the_csv_export_takes_the_filter(client, settings):
    add_runs(settings)
    res = client.get("/api/runs.csv", params={"filter": "epsilon >= 2", "archived": "all"})
    assert res.status_code == 200 and res.headers["x-total-count"] == "3"
    assert [row["id"] for row in csv.DictReader(io.StringIO(res.text))] == ["b3", "a2", "a1"]


def add_scored_runs(settings) -> None:
    """Stores four succeeded runs (oldest first) whose evaluated rounds carry known accuracy and
    balanced accuracy: two on creditcard, one on mnist, and one recorded before balanced accuracy was."""
    database = Database(settings.database_url)
    rows = [
        # id, dataset, each evaluated round's (round, accuracy, balanced accuracy): the last is final
        ("c1", "creditcard", ((5, 0.9990, 0.95), (10, 0.9985, 0.81))),
        ("c2", "creditcard", ((10, 0.9992, 0.74),)),
        ("m1", "mnist", ((10, 0.91, 0.905),)),
        ("old", "digits", ((10, 0.8, None),)),
    ]
    with database.session() as session:
        for i, (rid, dataset, rounds) in enumerate(rows):
            session.add(
                Run(
                    id=rid,
                    created_at=T0 + dt.timedelta(minutes=i),
                    status="succeeded",
                    algorithm="fedavg",
                    dataset=dataset,
                    rounds=10,
                    spec={"seed": i},
                    final_accuracy=rounds[-1][1],
                )
            )
            session.flush()
            session.add_all(
                RoundMetric(run_id=rid, round=r, accuracy=a, balanced_accuracy=b, loss=1 - a)
                for r, a, b in rounds
            )
    database.engine.dispose()


def test_the_list_carries_each_runs_final_balanced_accuracy_sorts_and_filters_by_it(client, settings):
    add_scored_runs(settings)
    items = client.get("/api/runs").json()["items"]
    assert {r["id"]: (r["final_accuracy"], r["final_balanced_accuracy"]) for r in items} == {
        "c1": (0.9985, 0.81),  # its last round's, not the better earlier one
        "c2": (0.9992, 0.74),
        "m1": (0.91, 0.905),
        "old": (0.8, None),
    }
    assert ids(client, sort="final_balanced_accuracy") == ["c2", "c1", "m1", "old"]  # none: last
    assert ids(client, sort="-final_balanced_accuracy") == ["m1", "c1", "c2", "old"]
    assert ids(client, filter="balanced_accuracy > 0.75") == ["m1", "c1"]
    assert ids(client, filter="balanced_accuracy < 0.8 and accuracy > 0.99") == ["c2"]
    assert ids(client, filter="accuracy > 0.99") == ["c2", "c1"]  # what plain accuracy says of frauds
    # a run without one never matches
    assert ids(client, filter="balanced_accuracy != 0.5") == ["m1", "c2", "c1"]


def test_the_csv_has_the_final_balanced_accuracy_empty_where_a_run_has_none(client, settings):
    add_scored_runs(settings)
    res = client.get("/api/runs.csv", params={"sort": "-final_balanced_accuracy"})
    table = list(csv.DictReader(io.StringIO(res.text)))
    assert [(r["id"], r["final_accuracy"], r["final_balanced_accuracy"]) for r in table] == [
        ("m1", "0.91", "0.905"),
        ("c1", "0.9985", "0.81"),
        ("c2", "0.9992", "0.74"),
        ("old", "0.8", ""),
    ]
