"""Budget rules: a total ε on some records, in one unit, reserved at admission and settled to what
was spent.

A budget covers records, not a name: it keeps the content digests of the files it was set on
(`dpfl.data.identity`), so a run of any loader or path that reads those bytes is charged to it.
Its unit is ε at its δ, per one unit of its notion under its neighbouring relation: a run of
another notion or relation is refused (ε of different units do not add), and a run's ε is
charged at the budget's δ (a run whose δ is larger is refused, since its ε holds only there).

Admission is atomic: it first updates the budget's row, which takes the row lock on Postgres
and the database's write lock on SQLite, so two concurrent admissions serialise and cannot
together overspend. Charged = settled spending + open reservations. A reservation bounds every
draw the run may make (`dpfl.projection`); its worker re-checks it against its own draws before
anything is released (`secure`), so what settles never exceeds what was reserved.

A run is charged its ε: for per-silo notions (record-level ISRL-DP) that is the maximum over
silos, which is sound whatever the partition. For a dataset with natural silos (the four
hospitals of `heart`), the budget also shows each silo's own spending: a record-level run on
the natural partition is charged to each silo the ε of that silo's releases, and any other
run its whole ε. Admission uses the dataset-level figures.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.orm import Session

from backend.budgets.schemas import BudgetRead, BudgetUpdate, ChargeRead, SiloUsage
from backend.datasets.service import uploads_dir
from backend.db import utcnow
from backend.errors import BudgetExceeded, Conflict, NotFound, ParameterError
from backend.models import LIVE, Budget, BudgetCharge, LedgerEventRow, Run
from backend.settings import Settings
from dpfl.algorithms import algorithm_class
from dpfl.data import dataset_info, registered_datasets
from dpfl.data.identity import data_digests, file_digest
from dpfl.data.uploads import dataset_label
from dpfl.formats import number_text
from dpfl.spec import RunSpec

__all__ = [
    "budget_name",
    "check_bounded",
    "covering",
    "delete_budget",
    "get_budget",
    "list_budgets",
    "put_budget",
    "reserve",
    "secure",
    "settle",
    "usage",
]

log = logging.getLogger(__name__)


def budget_name(spec: RunSpec, settings: Settings) -> str:
    """Returns the name a run's data is shown under: an upload's own name for a CSV from the
    upload store (every upload runs through the `csv` loader, yet each is its own data), else
    the dataset's name (`dpfl.data.uploads.dataset_label`; a spec from before uploads were named
    gives the stored file's path)."""
    ds = spec.dataset
    if (label := dataset_label(ds.name, ds.options)) != ds.name:
        return label  # named by its upload
    path = ds.options.get("path") if ds.name == "csv" else None
    if isinstance(path, str) and path:
        resolved = Path(path).resolve()
        if resolved.parent == uploads_dir(settings).resolve() and resolved.suffix == ".csv":
            return resolved.stem
    return ds.name


def covering(session: Session, spec: RunSpec, settings: Settings) -> str | None:
    """Returns the name of the budget on the records the spec reads, or None when none has one.

    Raises:
        Conflict: the spec reads records of two budgets (409): a run is charged to one.
    """
    ds = spec.dataset
    digests = data_digests(ds.name, ds.options, search_dirs=settings.data_dirs, cache_dir=settings.cache_dir)
    found = [b.dataset for b in _budgets(session, settings) if digests & set(b.digests or ())]
    if len(found) > 1:
        raise Conflict(
            f"this run reads records under {len(found)} privacy budgets ({', '.join(found)}); a run is "
            "charged to one budget, so read the data of one of them"
        )
    return found[0] if found else None


def _budgets(session: Session, settings: Settings) -> Sequence[Budget]:
    """Returns every budget, each with its digests (one set before digests were kept gets its name's)."""
    rows = session.scalars(select(Budget).order_by(Budget.dataset)).all()
    for budget in rows:
        if budget.digests is None:
            budget.digests = sorted(
                _digests_of_name(budget.dataset, settings, public_test=budget.public_test)
            )
    return rows


def _digests_of_name(name: str, settings: Settings, *, public_test: bool = False) -> frozenset[str]:
    """Returns the digests of the records a budget named `name` covers: a registered dataset's
    files (less its test files when its test split is public), or the dataset, for bundled and
    generated data, or an upload's file."""
    if name in registered_datasets():
        return data_digests(name, {}, search_dirs=settings.data_dirs, public_test=public_test)
    return frozenset({file_digest(uploads_dir(settings) / f"{name}.csv")})


def usage(session: Session, dataset: str) -> dict[str, float]:
    """Returns {"spent", "reserved"}: settled spending and open reservations of a dataset.

    One statement, so one snapshot: read in two, a charge that settled between them (at READ
    COMMITTED, Postgres's default) was counted in neither, and an admission overspent.
    """
    open_ = BudgetCharge.settled_at.is_(None)
    spent, reserved = session.execute(
        select(
            func.coalesce(func.sum(case((open_, 0.0), else_=BudgetCharge.spent)), 0.0),
            func.coalesce(func.sum(case((open_, BudgetCharge.reserved), else_=0.0)), 0.0),
        ).where(BudgetCharge.dataset == dataset)
    ).one()
    return {"spent": float(spent or 0.0), "reserved": float(reserved or 0.0)}


def check_bounded(session: Session, *, budget: str, spec: RunSpec, uncovered: str | None) -> None:
    """Refuses a run on a budget's records that the budget could not bound (409): one whose ledger
    would not cover everything it releases (`dpfl.runner.uncovered`), or one whose server holds
    test records as a public pool (the voting family) where the test split is not public."""
    if uncovered is not None:
        raise Conflict(
            f"dataset {budget!r} has a privacy budget, so its runs' ledgers must cover everything they "
            f"release; this run's would not: {uncovered}"
        )
    row = session.get(Budget, budget)
    if row is not None and not row.public_test and algorithm_class(spec.algorithm).pool_from_test:
        raise Conflict(
            f"dataset {budget!r} has a privacy budget and its test split is not declared public, but "
            f"{spec.algorithm}'s server holds test records as its public pool and reads their labels; "
            f"declare the test split public on the budget (PUT /api/budgets/{budget} with public_test: true)"
        )


def reserve(session: Session, *, run: Run, budget: str, epsilon: float) -> None:
    """Reserves `epsilon` of the budget for the run, or raises Conflict (409): the run's unit is not
    the budget's, or its δ is above the budget's, or BudgetExceeded: too little is left.

    The first run charged to a budget without a notion sets the budget's unit.
    """
    row = _locked(session, budget)
    if row is None:
        return
    _check_unit(row, run)
    if row.notion is None:
        row.notion, row.neighbouring = run.notion, _neighbouring(run)
    _check_fits(session, row, epsilon)
    session.add(BudgetCharge(run_id=run.id, dataset=budget, reserved=epsilon))
    session.flush()


def secure(session: Session, *, run: Run, budget: str, epsilon: float) -> None:
    """Makes sure the run's reservation covers `epsilon`, the ε its worker's own draws plan, before it
    releases anything: reserves it for a run that waited in the queue while its data gained a
    budget, and raises a reservation its draws exceed (BudgetExceeded, 409, when too little is left)."""
    charge = session.get(BudgetCharge, run.id)
    if charge is None:
        reserve(session, run=run, budget=budget, epsilon=epsilon)
        return
    if epsilon <= charge.reserved * (1 + 1e-9):
        return
    row = _locked(session, charge.dataset)
    if row is None:
        return
    _check_fits(session, row, epsilon - charge.reserved)
    charge.reserved = epsilon
    session.flush()


def _locked(session: Session, budget: str) -> Budget | None:
    """Returns the budget row, locked for this transaction (see the module's note), or None."""
    locked = session.execute(update(Budget).where(Budget.dataset == budget).values(updated_at=utcnow()))
    return session.get(Budget, budget) if locked.rowcount else None


def _neighbouring(run: Run) -> str:
    return algorithm_class(run.algorithm).neighbouring


def _unit_of(budget: Budget) -> str:
    """Returns the budget's unit in words."""
    if budget.notion is None:  # no run charged yet, or a budget charged before units were kept
        return f"ε at δ = {number_text(budget.delta)}"
    relation = (budget.neighbouring or "add_remove").replace("_", "/")
    return f"ε at δ = {number_text(budget.delta)} per {budget.notion}, {relation} neighbours"


def _check_unit(budget: Budget, run: Run) -> None:
    if budget.notion is not None and (budget.notion, budget.neighbouring) != (run.notion, _neighbouring(run)):
        raise Conflict(
            f"dataset {budget.dataset!r}'s budget is in {_unit_of(budget)}; "
            f"{run.algorithm}'s ε is per {run.notion}, {_neighbouring(run).replace('_', '/')} neighbours: "
            "ε of different units do not add, so it cannot be charged to this budget"
        )
    if run.delta is None or run.delta > budget.delta * (1 + 1e-12):
        raise Conflict(
            f"dataset {budget.dataset!r}'s budget is in ε at δ = {number_text(budget.delta)}; this run's "
            f"ε holds at δ = {number_text(run.delta)}, above it: give privacy.delta ≤ "
            f"{number_text(budget.delta)}"
        )


def _check_fits(session: Session, budget: Budget, epsilon: float) -> None:
    use = usage(session, budget.dataset)
    remaining = budget.total_epsilon - use["spent"] - use["reserved"]
    if epsilon > remaining + 1e-12:
        raise BudgetExceeded(
            f"dataset {budget.dataset!r} has ε {max(remaining, 0):.4g} left of {budget.total_epsilon:.4g}; "
            f"this run needs {epsilon:.4g}"
        )


def settle(session: Session, *, run_id: str, spent: float) -> None:
    """Settles a run's charge to the ε it actually released, at the budget's δ (the rest of the
    reservation is refunded). `spent` is its ε at the run's own δ, which is at most the budget's."""
    charge = session.get(BudgetCharge, run_id)
    if charge is None or charge.settled_at is not None:
        return
    # the lock admissions hold while they add up the budget's use: a settle never lands between
    budget = _locked(session, charge.dataset)
    session.refresh(charge)
    if charge.settled_at is not None:  # settled by another process while this one waited
        return
    run = session.get(Run, run_id)
    if spent > 0 and run.delta is not None and budget.delta > run.delta:
        spent = LedgerEventRow.run_ledger(session, run.id).headline_epsilon(
            accountant=run.accountant, delta=budget.delta
        )
    if spent > charge.reserved * (1 + 1e-6) + 1e-9:  # a plan that did not match its release: our bug
        log.error("run %s released ε %.6g, above the %.6g it reserved", run_id, spent, charge.reserved)
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
        delta=budget.delta,
        notion=budget.notion,
        neighbouring=budget.neighbouring,
        public_test=budget.public_test,
        unit=_unit_of(budget),
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
    book = LedgerEventRow.run_ledger(session, run.id)
    if not book.entries:
        return {}
    curves = book.epsilon_curves(delta=run.delta, accountant=run.accountant or "rdp")
    return {party: float(curve[-1]) for party, curve in curves.items()}


def list_budgets(session: Session) -> list[BudgetRead]:
    """Returns every dataset's budget, as `get_budget` does, by dataset name."""
    names = session.scalars(select(Budget.dataset).order_by(Budget.dataset))
    return [get_budget(session, name) for name in names]


def put_budget(
    session: Session, *, dataset: str, body: BudgetUpdate, known: Sequence[str], settings: Settings
) -> BudgetRead:
    """Sets (or creates) a dataset's budget: its total ε, and on creation its δ and unit; returns it.

    Raises:
        NotFound: no budget exists and `dataset` is not one of the `known` datasets (404).
        ParameterError: `dataset` is `csv`, a loader of any file rather than data (422).
        Conflict: the data is under another budget already, or the δ or unit of a budget that was
            charged would change (409): its charges are in the old unit.
    """
    budget = session.get(Budget, dataset)
    if budget is None and dataset not in known:
        raise NotFound(
            f"dataset {dataset!r} is neither a registered dataset nor an upload, so it cannot have a "
            f"budget; allowed: {', '.join(sorted(known))}"
        )
    if budget is None:
        budget = _new_budget(session, dataset, settings)
    unit = {
        "delta": body.delta,
        "notion": body.notion,
        "neighbouring": body.neighbouring,
        "public_test": body.public_test,
    }
    given = {k: v for k, v in unit.items() if k in body.model_fields_set}
    if given.get("notion") is not None and "neighbouring" not in given:
        given["neighbouring"] = "add_remove"
    changed = {k for k, v in given.items() if getattr(budget, k) != v}
    if changed and session.scalar(
        select(BudgetCharge.run_id).where(BudgetCharge.dataset == dataset).limit(1)
    ):
        raise Conflict(
            f"dataset {dataset!r}'s budget was charged in {_unit_of(budget)}; "
            f"its {', '.join(sorted(changed))} cannot change (its charges were made under them)"
        )
    for key, value in given.items():
        setattr(budget, key, value)
    if "public_test" in changed:  # a public test file is no longer the budget's to cover
        budget.digests = sorted(_digests_of_name(dataset, settings, public_test=budget.public_test))
    budget.total_epsilon = body.total_epsilon
    session.flush()
    return get_budget(session, dataset)


def _new_budget(session: Session, dataset: str, settings: Settings) -> Budget:
    if dataset == "csv":
        raise ParameterError(
            "path",
            "dataset",
            "must name data, and `csv` is a loader of any file: upload the CSV file and set the "
            "budget on the upload's name (it covers every path to the same bytes).",
        )
    digests = _digests_of_name(dataset, settings)
    for other in _budgets(session, settings):
        if digests & set(other.digests or ()):
            raise Conflict(
                f"the records of {dataset!r} are under the privacy budget of {other.dataset!r} already "
                f"(the same file's bytes); change that budget instead"
            )
    budget = Budget(dataset=dataset, total_epsilon=0.0, digests=sorted(digests))
    session.add(budget)
    return budget


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
        select(Run.id)
        .join(BudgetCharge, BudgetCharge.run_id == Run.id)
        .where(BudgetCharge.dataset == dataset, Run.status.in_(LIVE))
        .order_by(Run.id)
        .limit(5)
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
