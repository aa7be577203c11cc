"""A finished run's ledger curves and figures are computed once per accountant and δ asked and kept
(backend/runs/settled.py); a live run's are computed on every request."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, select, update

from backend.db import Database
from backend.models import LedgerEventRow, Run, RunStatus, SettledView
from tests.backend.conftest import run_here
from tests.factories import service_spec

pytestmark = pytest.mark.service

# σ given, so admission plans ε with `pld` without a calibration search
PLD = service_spec(privacy={"noise_multiplier": 1.5, "delta": 1e-5, "accountant": "pld"})


@pytest.fixture
def db(settings):
    database = Database(settings.database_url)
    yield database
    database.engine.dispose()


@pytest.fixture
def ended(settings, client) -> str:
    """A `pld` run that ran to the end in this process, as a worker runs it."""
    run_id = client.post("/api/runs", json=PLD).json()["id"]
    run_here(settings, run_id)
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "succeeded"
    return run_id


@pytest.fixture
def finished(db, ended) -> str:
    """That run with the views its worker kept forgotten: these tests compute them by request."""
    with db.session() as session:
        session.execute(delete(SettledView).where(SettledView.run_id == ended))
    return ended


def kept(db: Database, run_id: str) -> list[tuple[str, str, float]]:
    with db.session() as session:
        rows = session.execute(
            select(SettledView.view, SettledView.accountant, SettledView.delta)
            .where(SettledView.run_id == run_id)
            .order_by(SettledView.id)
        )
        return [tuple(r) for r in rows]


def tamper(db: Database, run_id: str, view: str, **fields) -> None:
    """Writes `fields` into the kept body: served back, it shows the body was read, not recomputed."""
    with db.session() as session:
        row = session.scalars(select(SettledView).filter_by(run_id=run_id, view=view)).one()
        row.body = row.body | fields


def fresh_curves(db: Database, run_id: str, *, accountant: str, delta: float) -> dict[str, list[float]]:
    """The one computation, straight from the stored ledger rows: what a kept view must equal."""
    with db.session() as session:
        book = LedgerEventRow.run_ledger(session, run_id)
    curves = book.epsilon_curves(delta=delta, accountant=accountant)
    return {p: [float(x) for x in c] for p, c in curves.items()}


def test_the_worker_keeps_a_runs_views_as_it_ends_and_its_page_reads_them(client, db, ended):
    # a `pld` page's first visit used to compute them: seconds for 25 silos (issue 43)
    assert kept(db, ended) == [("ledger", "", 1e-5), ("figures", "", 1e-5)]
    ledger = client.get(f"/api/runs/{ended}/ledger").json()
    assert ledger["parties"] == fresh_curves(db, ended, accountant="pld", delta=1e-5)
    figures = client.get(f"/api/runs/{ended}/figures").json()
    tamper(db, ended, "ledger", epsilon=123.0)
    tamper(db, ended, "figures", marker=1)
    assert client.get(f"/api/runs/{ended}/ledger").json()["epsilon"] == 123.0  # read, not recomputed
    assert client.get(f"/api/runs/{ended}/figures").json() == figures | {"marker": 1}
    assert kept(db, ended) == [("ledger", "", 1e-5), ("figures", "", 1e-5)]


def test_a_finished_runs_ledger_is_computed_once_then_read(client, db, finished):
    first = client.get(f"/api/runs/{finished}/ledger").json()
    assert (first["accountant"], first["delta"]) == ("pld", 1e-5)
    assert first["parties"] == fresh_curves(db, finished, accountant="pld", delta=1e-5)
    assert len(first["rounds"]) == 3 and len(first["parties"]) == 4
    assert first["epsilon"] == max(c[-1] for c in first["parties"].values())
    assert 0.5 < first["epsilon"] < 20
    assert kept(db, finished) == [("ledger", "", 1e-5)]

    second = client.get(f"/api/runs/{finished}/ledger").json()
    assert second == first  # the same numbers, to the last bit
    tamper(db, finished, "ledger", epsilon=123.0)
    assert client.get(f"/api/runs/{finished}/ledger").json()["epsilon"] == 123.0  # read, not recomputed
    assert kept(db, finished) == [("ledger", "", 1e-5)]


def test_another_accountant_or_delta_is_computed_anew_and_kept_beside(client, db, finished):
    default = client.get(f"/api/runs/{finished}/ledger").json()
    rdp = client.get(f"/api/runs/{finished}/ledger?accountant=rdp").json()
    tight = client.get(f"/api/runs/{finished}/ledger?accountant=pld&delta=1e-7").json()
    assert kept(db, finished) == [("ledger", "", 1e-5), ("ledger", "rdp", 1e-5), ("ledger", "pld", 1e-7)]
    assert rdp["parties"] == fresh_curves(db, finished, accountant="rdp", delta=1e-5)
    assert tight["parties"] == fresh_curves(db, finished, accountant="pld", delta=1e-7)
    # PLD is tighter than RDP for the same releases; a smaller δ costs more ε
    assert default["epsilon"] < rdp["epsilon"]
    assert tight["epsilon"] > default["epsilon"]
    # each is served from its own entry afterwards
    assert client.get(f"/api/runs/{finished}/ledger?accountant=rdp").json() == rdp
    assert client.get(f"/api/runs/{finished}/ledger?delta=1e-7&accountant=pld").json() == tight


def test_figures_are_built_once_and_equal_a_fresh_build(client, db, finished):
    first = client.get(f"/api/runs/{finished}/figures").json()
    assert set(first) >= {"learning", "epsilon"}
    assert kept(db, finished) == [("ledger", "", 1e-5), ("figures", "", 1e-5)]
    tamper(db, finished, "figures", marker=1)
    assert client.get(f"/api/runs/{finished}/figures").json() == first | {"marker": 1}
    with db.session() as session:  # forget the kept views: a fresh build gives the same figures
        session.execute(delete(SettledView).where(SettledView.run_id == finished))
    assert client.get(f"/api/runs/{finished}/figures").json() == first


def test_a_live_runs_views_are_never_kept(client, db, finished):
    computed = client.get(f"/api/runs/{finished}/ledger").json()
    tamper(db, finished, "ledger", epsilon=123.0)
    with db.session() as session:  # as while a worker holds it: its ledger may still grow
        session.execute(update(Run).where(Run.id == finished).values(status=RunStatus.running))
    assert client.get(f"/api/runs/{finished}/ledger").json() == computed
    assert client.get(f"/api/runs/{finished}/ledger?accountant=rdp").status_code == 200
    assert client.get(f"/api/runs/{finished}/figures").status_code == 200
    assert kept(db, finished) == [("ledger", "", 1e-5)]  # only the one kept while it was finished


def test_a_view_kept_by_other_code_is_recomputed_and_deleting_the_run_drops_it(client, db, finished):
    computed = client.get(f"/api/runs/{finished}/ledger").json()
    with db.session() as session:
        session.execute(update(SettledView).values(code="0" * 16, body=computed | {"epsilon": 123.0}))
    assert client.get(f"/api/runs/{finished}/ledger").json() == computed
    with db.session() as session:
        assert session.scalars(select(SettledView.code)).all() != ["0" * 16]
    assert client.delete(f"/api/runs/{finished}").status_code == 204
    assert kept(db, finished) == []


def test_a_run_deleted_while_its_view_computes_is_answered_and_nothing_is_kept(db, finished):
    # the run page asked for its figures while Delete went through: that answer was a 500
    from backend.runs import settled

    def compute_while_deleted() -> dict:
        with db.session() as other:
            other.execute(delete(Run).where(Run.id == finished))
        return {"epsilon": [1.0]}

    with db.session() as session:
        run = session.get(Run, finished)
        body = settled.kept(
            session, run, view="figures", accountant="", delta=1e-5, compute=compute_while_deleted
        )
    assert body == {"epsilon": [1.0]}
    assert kept(db, finished) == []
