"""Budget rules: a dataset's total ε, reserved at admission and settled to what was spent.

Admission is atomic: it first updates the budget's row, which takes the row lock on Postgres
and the database's write lock on SQLite, so two concurrent admissions serialise and cannot
together overspend. Charged = settled spending + open reservations.

A run is charged its ε: for per-silo notions (record-level ISRL-DP) that is the maximum over
silos, which is sound whatever the partition. For a dataset with natural silos (the four
hospitals of `heart`), the budget also shows each silo's own spending: a record-level run on
the natural partition is charged to each silo the ε of that silo's releases, and any other
run its whole ε. Admission uses the dataset-level figures.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from backend.budgets.schemas import BudgetRead, ChargeRead, SiloUsage
from backend.datasets.service import uploads_dir
from backend.db import utcnow
from backend.errors import BudgetExceeded, Conflict, NotFound
from backend.models import LIVE, Budget, BudgetCharge, LedgerEventRow, Run
from backend.settings import Settings
from dpfl.data import dataset_info, registered_datasets
from dpfl.privacy.ledger import Ledger
from dpfl.spec import RunSpec

__all__ = [
    "budget_name",
    "delete_budget",
    "exists",
    "get_budget",
    "list_budgets",
    "put_budget",
    "reserve",
    "settle",
    "usage",
]


def budget_name(spec: RunSpec, settings: Settings) -> str:
    """Returns the name a run's data is budgeted under: an upload's own name for a CSV from the
    upload store (every upload runs through the `csv` loader, yet each is its own data), else
    the dataset's name (`csv` for any other CSV file, so one budget on `csv` covers them all)."""
    ds = spec.dataset
    path = ds.options.get("path") if ds.name == "csv" else None
    if isinstance(path, str) and path:
        resolved = Path(path).resolve()
        if resolved.parent == uploads_dir(settings).resolve() and resolved.suffix == ".csv":
            return resolved.stem
    return ds.name


def exists(session: Session, dataset: str) -> bool:
    """Returns whether the dataset has a privacy budget, which makes its runs protected."""
    return session.get(Budget, dataset) is not None


def usage(session: Session, dataset: str) -> dict[str, float]:
    """Returns {"spent", "reserved"}: settled spending and open reservations of a dataset."""
    spent = (
        session.scalar(
            select(func.coalesce(func.sum(BudgetCharge.spent), 0.0)).where(
                BudgetCharge.dataset == dataset, BudgetCharge.settled_at.is_not(None)
            )
        )
        or 0.0
    )
    reserved = (
        session.scalar(
            select(func.coalesce(func.sum(BudgetCharge.reserved), 0.0)).where(
                BudgetCharge.dataset == dataset, BudgetCharge.settled_at.is_(None)
            )
        )
        or 0.0
    )
    return {"spent": float(spent), "reserved": float(reserved)}


def reserve(session: Session, *, run: Run, epsilon: float) -> None:
    """Reserves `epsilon` of the run's dataset budget, or raises BudgetExceeded (409).

    No budget on the dataset: nothing to reserve.
    """
    locked = session.execute(update(Budget).where(Budget.dataset == run.dataset).values(updated_at=utcnow()))
    if locked.rowcount == 0:
        return
    budget = session.get(Budget, run.dataset)
    use = usage(session, run.dataset)
    remaining = budget.total_epsilon - use["spent"] - use["reserved"]
    if epsilon > remaining + 1e-12:
        raise BudgetExceeded(
            f"dataset {run.dataset!r} has ε {max(remaining, 0):.4g} left of {budget.total_epsilon:.4g}; "
            f"this run needs {epsilon:.4g}"
        )
    session.add(BudgetCharge(run_id=run.id, dataset=run.dataset, reserved=epsilon))
    session.flush()


def settle(session: Session, *, run_id: str, spent: float) -> None:
    """Settles a run's charge to the ε it actually released (the rest of the reservation is refunded)."""
    charge = session.get(BudgetCharge, run_id)
    if charge is None or charge.settled_at is not None:
        return
    charge.spent = float(spent)
    charge.settled_at = dt.datetime.now(dt.UTC)
    session.flush()


def get_budget(session: Session, dataset: str) -> BudgetRead:
    """Returns the dataset's budget: total, spent, reserved, remaining, and the runs charged."""
    budget = session.get(Budget, dataset)
    if budget is None:
        raise NotFound(f"dataset {dataset!r} has no privacy budget; set one with PUT /api/budgets/{dataset}")
    use = usage(session, dataset)
    charges = session.scalars(select(BudgetCharge).where(BudgetCharge.dataset == dataset)).all()
    return BudgetRead(
        dataset=dataset,
        total_epsilon=budget.total_epsilon,
        spent=use["spent"],
        reserved=use["reserved"],
        remaining=budget.total_epsilon - use["spent"] - use["reserved"],
        silos=_silo_usage(session, dataset, budget.total_epsilon, charges),
        charges=[
            ChargeRead(run_id=c.run_id, reserved=c.reserved, spent=c.spent, settled=c.settled_at is not None)
            for c in charges
        ],
    )


def _silo_usage(
    session: Session, dataset: str, total: float, charges: Sequence[BudgetCharge]
) -> dict[str, SiloUsage] | None:
    """Returns silo ↦ {spent, reserved, remaining} for a dataset with natural silos, else None."""
    natural = dataset_info(dataset).natural_silos if dataset in registered_datasets() else None
    if not natural:
        return None
    silos = {f"silo-{i}": {"spent": 0.0, "reserved": 0.0} for i in range(natural)}
    for charge in charges:
        if charge.settled_at is None:
            for use in silos.values():
                use["reserved"] += charge.reserved
            continue
        per_silo = _spent_per_silo(session, session.get(Run, charge.run_id))
        for name, use in silos.items():
            use["spent"] += per_silo.get(name, 0.0) if per_silo is not None else charge.spent or 0.0
    return {
        name: SiloUsage(
            spent=use["spent"], reserved=use["reserved"], remaining=total - use["spent"] - use["reserved"]
        )
        for name, use in silos.items()
    }


def _spent_per_silo(session: Session, run: Run) -> dict[str, float] | None:
    """Returns party ↦ ε from the run's ledger when its silos are the dataset's own, else None."""
    if (
        run.notion != "record"
        or (run.spec.get("dataset") or {}).get("partition", {}).get("kind") != "natural"
    ):
        return None
    rows = session.scalars(select(LedgerEventRow).where(LedgerEventRow.run_id == run.id)).all()
    book = Ledger.from_json({"round": r.round, "party": r.party, "event": e} for r in rows for e in r.events)
    if not book.entries:
        return {}
    curves = book.epsilon_curves(delta=run.delta, accountant=run.accountant or "rdp")
    return {party: float(curve[-1]) for party, curve in curves.items()}


def list_budgets(session: Session) -> list[BudgetRead]:
    """Returns every dataset's budget, as `get_budget` does, by dataset name."""
    names = session.scalars(select(Budget.dataset).order_by(Budget.dataset))
    return [get_budget(session, name) for name in names]


def put_budget(session: Session, *, dataset: str, total_epsilon: float, known: Sequence[str]) -> BudgetRead:
    """Sets (or creates) a dataset's total ε; returns the budget.

    Raises:
        NotFound: no budget exists and `dataset` is not one of the `known` datasets (404).
    """
    budget = session.get(Budget, dataset)
    if budget is None and dataset not in known:
        raise NotFound(
            f"dataset {dataset!r} is neither a registered dataset nor an upload, so it cannot have a "
            f"budget; allowed: {', '.join(sorted(known))}"
        )
    if budget is None:
        session.add(Budget(dataset=dataset, total_epsilon=total_epsilon))
    else:
        budget.total_epsilon = total_epsilon
    session.flush()
    return get_budget(session, dataset)


def delete_budget(session: Session, dataset: str) -> None:
    """Deletes a dataset's budget that nothing was spent of; its runs stay protected.

    Raises:
        NotFound: the dataset has no budget (404).
        Conflict: a run on the dataset is queued or running, holding or about to spend ε, or ε
            was spent (409): privacy loss is permanent, and a budget created again would start
            from zero.
    """
    # Takes the budget row's lock first, as admission does: an admission either ran before
    # (its run is seen below) or runs after and finds no budget.
    locked = session.execute(update(Budget).where(Budget.dataset == dataset).values(updated_at=utcnow()))
    if locked.rowcount == 0:
        budgeted = session.scalars(select(Budget.dataset).order_by(Budget.dataset)).all()
        raise NotFound(
            f"dataset {dataset!r} has no privacy budget; datasets with one: {', '.join(budgeted) or 'none'}"
        )
    active = session.scalars(
        select(Run.id).where(Run.dataset == dataset, Run.status.in_(LIVE)).order_by(Run.id).limit(5)
    ).all()
    if active:
        raise Conflict(
            f"dataset {dataset!r} has queued or running runs ({', '.join(active)}); "
            "cancel them or let them finish, then delete its budget"
        )
    spent = usage(session, dataset)["spent"]
    if spent > 0:
        raise Conflict(
            f"dataset {dataset!r} has spent ε {spent:.4g} of its budget; a budget that was spent cannot "
            "be deleted (a new one would forget that spending); change its total with PUT instead"
        )
    session.execute(delete(BudgetCharge).where(BudgetCharge.dataset == dataset))
    session.execute(delete(Budget).where(Budget.dataset == dataset))
    session.flush()
