"""A finished run's computed views (its ledger's ε curves, its figures), kept once computed.

Recomputing a ledger is the cost of a run's page: a `pld` run's 50 rounds compose 50 privacy loss
distributions, about 2 s a load here and 5–6 s for 25 distinct silos (issue 43), and the figures
ask for the same curves again. A finished run's ledger no longer changes (a worker writes rows
only while it holds the run, `worker.execution._hold`; an external run takes no rounds once it
has ended), so what its pages computed stays true, and is kept in the database (`settled_views`)
per (run, view, accountant as asked, δ): every API process, and the next one after a restart,
reads it. A live run's ledger grows, so its views are computed on every request and never kept;
an entry kept before the run's last end (`finished_at`) is computed again.

The stored body is the computation's own result, read back as it was written (JSON numbers
round-trip exactly), so a kept view is the same numbers as a fresh one. What else a body depends
on is the code that computed it: each entry carries a digest of the accountants', the figures'
and these services' sources and of the numerical packages they use, and an entry from other
code is recomputed (and replaced) on its next request. Deleting a run deletes its entries
(ON DELETE CASCADE).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.models import Run, RunStatus, SettledView

__all__ = ["code_digest", "kept"]

_ROOT = Path(__file__).resolve().parents[2]
# What a view's numbers and figures are computed by: the accountants and events, the figures,
# the services that assemble them, and the packages under them.
_SOURCES = ("dpfl/privacy", "dpfl/plots", "backend/runs/service.py", "backend/figures/service.py")
_PACKAGES = ("dp-accounting", "numpy", "scipy", "plotly")


@functools.cache
def code_digest() -> str:
    """Returns 16 hex digits of SHA-256 over the sources and package versions a view depends on."""
    digest = hashlib.sha256()
    for source in _SOURCES:
        path = _ROOT / source
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(str(file.relative_to(_ROOT)).encode() + b"\0" + file.read_bytes() + b"\0")
    for package in _PACKAGES:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{package}=={version}\0".encode())
    return digest.hexdigest()[:16]


def kept(
    session: Session,
    run: Run,
    *,
    view: str,
    accountant: str,
    delta: float,
    compute: Callable[[], Any],
) -> Any:
    """Returns `compute()` for a live run; for a finished one, the body kept for (run, `view`,
    `accountant`, `delta`) by this code, else `compute()`, kept for the next request.

    Args:
        view: which computation: "ledger" or "figures".
        accountant: the accountant as the request named it; "" for the run's headline one.
        delta: the δ the ε curves are at, resolved (the run's own when the request named none).
        compute: the one computation of the view, returning JSON-serialisable data; its errors
            propagate and nothing is kept.
    """
    if not RunStatus(run.status).finished:
        return compute()
    code = code_digest()
    key = {"run_id": run.id, "view": view, "accountant": accountant, "delta": float(delta)}
    stored = session.execute(
        select(SettledView.code, SettledView.body, SettledView.created_at).filter_by(**key)
    ).one_or_none()
    # kept since the run last ended: a run that ended again (failed after a lost worker was found,
    # its ledger cut back to the rounds it recorded) is not answered with what its first end kept
    ended = run.finished_at
    if stored is not None and stored.code == code and (ended is None or stored.created_at >= ended):
        return stored.body
    body = compute()
    try:  # an ε of ∞ has no JSON: such a view is served (as before) but not kept
        json.dumps(body, allow_nan=False)
    except ValueError:
        return body
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    row = key | {"code": code, "body": body, "created_at": utcnow()}
    # two requests may compute the same view at once: the later write wins, with the same numbers
    statement = insert(SettledView).values(row)
    try:
        # a savepoint: a run deleted while its page computed is answered, not failed (its
        # entry's foreign key has nothing left to point at, and nothing is kept)
        with session.begin_nested():
            session.execute(
                statement.on_conflict_do_update(
                    index_elements=list(key),
                    set_={
                        "code": statement.excluded.code,
                        "body": statement.excluded.body,
                        "created_at": utcnow(),
                    },
                )
            )
    except IntegrityError:
        pass
    return body
