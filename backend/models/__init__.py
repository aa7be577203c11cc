"""The tables, one module each; import this package to register them all on `Base.metadata`."""

from backend.models.audit import Audit, AuditStatus
from backend.models.budget import Budget, BudgetCharge
from backend.models.ledger_event import LedgerEventRow
from backend.models.round_metric import RoundMetric
from backend.models.run import CLAIMED, LIVE, Run, RunSource, RunStatus
from backend.models.settled_view import SettledView
from backend.models.sweep import Sweep
from backend.models.worker import WorkerBeat

__all__ = [
    "CLAIMED",
    "LIVE",
    "Audit",
    "AuditStatus",
    "Budget",
    "BudgetCharge",
    "LedgerEventRow",
    "RoundMetric",
    "Run",
    "RunSource",
    "RunStatus",
    "SettledView",
    "Sweep",
    "WorkerBeat",
]
