"""Budget admission under concurrency, through a real HTTP server, and settlement when a run ends.

FastAPI's TestClient runs one request at a time, so it cannot race two admissions. Here uvicorn
serves the app on a loopback port and 20 threads post at once (released together by a barrier).
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text, update
from sqlalchemy.exc import OperationalError

from backend import migrate
from backend.budgets import service as budgets
from backend.db import Database
from backend.main import create_app
from backend.models import Run
from tests.backend.conftest import _truncate, make_settings, run_here
from tests.backend.served import at_once, serve
from tests.factories import service_spec

pytestmark = pytest.mark.service

SPEC = service_spec(privacy={"epsilon": 1.0, "delta": 1e-5})
CLIENTS = 20


def post_together(url: str, n: int) -> list[httpx.Response]:
    """Returns the responses of `n` POST /api/runs sent from `n` threads released at one instant."""
    return at_once(url, n, lambda http: [http.post("/api/runs", json=SPEC)])


def test_concurrent_admissions_cannot_overspend(settings):
    app = create_app(settings)
    with serve(app) as url:
        with httpx.Client(base_url=url, timeout=30) as http:
            assert http.put("/api/budgets/digits", json={"total_epsilon": 10.0}).status_code == 200
            # the request's session commits after its response is sent: wait to see the budget
            deadline = time.monotonic() + 10
            while http.get("/api/budgets/digits").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
        responses = post_together(url, CLIENTS)
        with httpx.Client(base_url=url, timeout=30) as http:
            budget = http.get("/api/budgets/digits").json()
            listed = http.get("/api/runs", params={"limit": 500}).json()

    codes = sorted(r.status_code for r in responses)
    assert codes == [201] * 10 + [409] * 10, [r.text for r in responses if r.status_code not in (201, 409)]
    for r in responses:
        if r.status_code == 409:
            assert r.json() == {
                "detail": "dataset 'digits' has ε 0 left of 10; this run needs 1",
                "error": "BudgetExceeded",
            }
    admitted = {r.json()["id"] for r in responses if r.status_code == 201}
    assert (budget["reserved"], budget["spent"], budget["remaining"]) == (10.0, 0.0, 0.0)
    assert {c["run_id"] for c in budget["charges"]} == admitted
    assert all(c["reserved"] == 1.0 and not c["settled"] for c in budget["charges"])
    # a refused admission leaves no run behind: its transaction was rolled back whole
    assert listed["total"] == 10 and {r["id"] for r in listed["items"]} == admitted


def test_a_finished_run_is_charged_its_real_epsilon(settings):
    with TestClient(create_app(settings)) as client:
        client.put("/api/budgets/digits", json={"total_epsilon": 10.0})
        spec = SPEC | {"privacy": {"epsilon": 3.0, "delta": 1e-5}}
        run_id = client.post("/api/runs", json=spec).json()["id"]
        assert client.get("/api/budgets/digits").json()["reserved"] == 3.0
        run_here(settings, run_id)
        run = client.get(f"/api/runs/{run_id}").json()
        ledger = client.get(f"/api/runs/{run_id}/ledger").json()
        budget = client.get("/api/budgets/digits").json()
    assert run["status"] == "succeeded", run["error"]
    spent = ledger["epsilon"]  # recomputed from the stored releases
    assert 2.9 < spent <= 3.0 + 1e-9  # calibrated to the target ε = 3
    assert run["epsilon"] == pytest.approx(spent, rel=1e-12)
    assert budget["charges"] == [
        {"run_id": run_id, "reserved": 3.0, "spent": pytest.approx(spent), "settled": True}
    ]
    assert budget["reserved"] == 0.0
    assert budget["spent"] == pytest.approx(spent)
    assert budget["remaining"] == pytest.approx(10.0 - spent)  # 3 - spent of the reservation refunded


def test_a_run_stopped_early_is_charged_what_it_released(settings):
    with TestClient(create_app(settings)) as client:
        client.put("/api/budgets/digits", json={"total_epsilon": 10.0})
        run_id = client.post(
            "/api/runs",
            json=SPEC | {"rounds": 400, "eval_every": 50, "privacy": {"epsilon": 4.0, "delta": 1e-5}},
        ).json()["id"]
        database = Database(settings.database_url)

        def cancel_after_round_5() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if client.get(f"/api/runs/{run_id}").json()["current_round"] >= 5:
                    with database.session() as session:
                        session.execute(update(Run).where(Run.id == run_id).values(cancel_requested=True))
                    return
                time.sleep(0.02)

        watcher = threading.Thread(target=cancel_after_round_5)
        watcher.start()
        try:
            run_here(settings, run_id)
        finally:
            watcher.join(timeout=130)
            database.engine.dispose()
        run = client.get(f"/api/runs/{run_id}").json()
        ledger = client.get(f"/api/runs/{run_id}/ledger").json()
        budget = client.get("/api/budgets/digits").json()
    assert run["status"] == "cancelled"
    assert 5 <= run["current_round"] < 400
    spent = ledger["epsilon"]
    assert 0 < spent < 4.0
    assert run["epsilon"] == pytest.approx(spent, rel=1e-12)
    assert budget["charges"][0]["spent"] == pytest.approx(spent) and budget["charges"][0]["settled"]
    assert (budget["reserved"], budget["spent"]) == (0.0, pytest.approx(spent))
    assert budget["remaining"] == pytest.approx(10.0 - spent)  # the unreleased part came back


@pytest.fixture
def pg_settings(request, tmp_path):
    """Postgres + Redis only: the races below are READ COMMITTED's (SQLite serialises writers)."""
    url = request.getfixturevalue("postgres_url")
    migrate.upgrade(url)
    _truncate(url)
    return make_settings(tmp_path, url, request.getfixturevalue("redis_url"))


def test_a_settle_waits_for_an_admission_that_holds_the_budget(pg_settings):
    """An admission reads settled spending and open reservations while it holds the budget row; a
    settle that committed in between was counted in neither (budget 1.0 charged 1.49). Settling
    takes the same lock, so it cannot commit while an admission reads."""
    with TestClient(create_app(pg_settings)) as client:
        client.put("/api/budgets/digits", json={"total_epsilon": 1.0})
        run_id = client.post("/api/runs", json=SPEC | {"privacy": {"epsilon": 0.5, "delta": 1e-5}}).json()[
            "id"
        ]
    database = Database(pg_settings.database_url)
    try:
        with database.session() as admission, database.session() as settling:
            assert budgets.usage(admission, "digits") == {"spent": 0.0, "reserved": 0.5}
            assert budgets._locked(admission, "digits") is not None  # an admission holds the row
            settling.execute(text("SET LOCAL lock_timeout = '300ms'"))
            with pytest.raises(OperationalError, match="lock timeout"):
                budgets.settle(settling, run_id=run_id, spent=0.49)
                settling.flush()
            settling.rollback()
            admission.commit()
            budgets.settle(settling, run_id=run_id, spent=0.49)  # once the admission is done, it settles
            settling.commit()
            assert budgets.usage(admission, "digits") == {"spent": 0.49, "reserved": 0.0}
    finally:
        database.engine.dispose()


def test_usage_is_read_in_one_statement(pg_settings, monkeypatch):
    """Spent and reserved come from one snapshot: a charge settling between two reads cannot vanish."""
    with TestClient(create_app(pg_settings)) as client:
        client.put("/api/budgets/digits", json={"total_epsilon": 1.0})
        client.post("/api/runs", json=SPEC | {"privacy": {"epsilon": 0.5, "delta": 1e-5}})
    database = Database(pg_settings.database_url)
    statements: list[str] = []
    try:
        with database.session() as session:
            event.listen(session.bind, "before_cursor_execute", lambda *a: statements.append(a[2]))
            assert budgets.usage(session, "digits") == {"spent": 0.0, "reserved": 0.5}
    finally:
        database.engine.dispose()
    assert len(statements) == 1, statements
