"""What a user changes of a sweep after creating it: its annotations, and deleting it.

Apart from `service.py` (creation and reads) so that the two change independently.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from backend.errors import Conflict
from backend.models import LIVE, BudgetCharge, Run, Sweep
from backend.sweeps.service import get_sweep

__all__ = ["delete_sweep", "patch_sweep"]


def patch_sweep(session: Session, sweep_id: str, *, changes: dict[str, Any]) -> Sweep:
    """Sets the sweep's name, tags, notes or archived flag (whichever `changes` holds); returns it."""
    sweep = get_sweep(session, sweep_id)
    for name, value in changes.items():
        setattr(sweep, name, value)
    session.flush()
    return sweep


def delete_sweep(session: Session, sweep_id: str) -> int:
    """Deletes the sweep and its runs (with their metrics and ledgers); returns how many runs went.

    Raises:
        NotFound: no sweep with this id (404).
        Conflict: one of its runs is queued or running, or spent ε of a dataset's privacy budget
            (409); nothing is deleted.
    """
    get_sweep(session, sweep_id)
    live = session.scalars(
        select(Run.id).where(Run.sweep_id == sweep_id, Run.status.in_(LIVE)).order_by(Run.id)
    ).all()
    if live:
        shown = ", ".join(live[:5]) + (f" and {len(live) - 5} more" if len(live) > 5 else "")
        raise Conflict(
            f"sweep {sweep_id!r} has {len(live)} queued or running run{'s' if len(live) > 1 else ''} "
            f"({shown}); cancel them (POST /api/runs/{{id}}/cancel) and wait for them to finish, "
            "or archive the sweep (PATCH archived: true)"
        )
    charged = session.execute(
        select(BudgetCharge.dataset, func.count())
        .join(Run, Run.id == BudgetCharge.run_id)
        .where(Run.sweep_id == sweep_id, BudgetCharge.spent > 0)
        .group_by(BudgetCharge.dataset)
        .order_by(BudgetCharge.dataset)
    ).all()
    if charged:
        # A run's charge goes with it, and privacy loss is permanent: the budget must keep it.
        where = ", ".join(f"{n} on dataset {d!r}" for d, n in charged)
        raise Conflict(
            f"sweep {sweep_id!r} has runs that spent privacy budget ({where}); deleting them would "
            "forget that spending, so archive the sweep instead (PATCH archived: true)"
        )
    # the database cascades to each run's metrics, ledger rows, audits and budget charge
    gone = session.execute(delete(Run).where(Run.sweep_id == sweep_id)).rowcount
    session.execute(delete(Sweep).where(Sweep.id == sweep_id))
    session.flush()
    return gone
