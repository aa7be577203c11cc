"""One audit's life in a worker: claim it, run `dpfl.audit.rounds.audit_first_round` (and the
black-box trials, `audit_black_box`) on the run's stored spec in a process of its own, bounded in
memory (`audit_memory_mb`) and time (`audit_timeout_s`), and record the result or the error on
the audit row. The worker survives an audit that runs out of either; the API fails an audit
whose worker died (`backend.audits.service.fail_lost`)."""

from __future__ import annotations

import functools
import json
import logging
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from sqlalchemy import update

from backend import lifeline
from backend.db import Database, utcnow
from backend.models import Audit, AuditStatus, Run
from backend.settings import Settings
from worker.audit_child import MEMORY

__all__ = ["claim", "execute"]

log = logging.getLogger(__name__)
# how a process under an address-space limit fails before our code can catch it: loading torch's
# libraries, the C runtime's threads, Python's allocator
_OUT_OF_MEMORY = ("failed to map segment", "cannot allocate memory", "MemoryError")


def claim(database: Database, audit_id: str, *, worker: str) -> bool:
    """Moves the audit queued → running in one UPDATE; False if another delivery got it first."""
    with database.session() as session:
        result = session.execute(
            update(Audit)
            .where(Audit.id == audit_id, Audit.status == AuditStatus.queued)
            .values(status=AuditStatus.running, worker=worker, started_at=utcnow(), error=None)
        )
        return result.rowcount == 1


def _bounded(memory_bytes: int) -> None:  # in the child, before exec
    lifeline.signal_when_orphaned(signal.SIGKILL)
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def execute(database: Database, settings: Settings, audit_id: str) -> None:
    """Audits a claimed audit's run in a bounded process and records the outcome on the audit row."""
    with database.session() as session:
        audit = session.get(Audit, audit_id)
        job = {
            "spec": session.get(Run, audit.run_id).spec,
            "trials": audit.trials,
            "seeds": audit.seeds,
            "black_box_trials": audit.black_box_trials,
            "data_dirs": [str(d) for d in settings.data_dirs],
        }
    status, values = _run(job, settings, audit_id)
    _finish(database, audit_id, status=status, **values)


def _run(job: dict, settings: Settings, audit_id: str) -> tuple[AuditStatus, dict]:
    limit_mb = settings.audit_memory_mb
    too_big = (
        f"the audit needed more than its {limit_mb:,} MB of memory (DPFL_AUDIT_MEMORY_MB): audit a "
        "spec with fewer silos or a smaller dataset, or raise the limit"
    )
    with tempfile.TemporaryDirectory(prefix="dpfl-audit-") as tmp:
        job_path, out_path = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_path.write_text(json.dumps(job))
        try:
            done = subprocess.run(
                [sys.executable, "-m", "worker.audit_child", str(job_path), str(out_path)],
                preexec_fn=functools.partial(_bounded, limit_mb * 2**20),
                capture_output=True,
                text=True,
                timeout=settings.audit_timeout_s,
            )
        except subprocess.TimeoutExpired:
            return AuditStatus.failed, {
                "error": f"the audit took longer than {settings.audit_timeout_s:g} s (DPFL_AUDIT_TIMEOUT_S) "
                "and was stopped; audit fewer trials or a smaller spec, or raise the limit"
            }
        outcome = json.loads(out_path.read_text()) if out_path.exists() else None
    if outcome is not None and "result" in outcome:
        return AuditStatus.succeeded, {"result": outcome["result"]}
    if outcome is not None:
        return AuditStatus.failed, {"error": too_big if outcome["error"] == MEMORY else outcome["error"]}
    log.error(
        "audit %s: its process ended without a result (%s):\n%s", audit_id, done.returncode, done.stderr
    )
    if done.returncode < 0 or any(words in done.stderr for words in _OUT_OF_MEMORY):
        return AuditStatus.failed, {"error": too_big}  # killed, or out of memory before our code ran
    return AuditStatus.failed, {"error": f"internal error in worker (audit {audit_id}); see worker log"}


def _finish(database: Database, audit_id: str, *, status: AuditStatus, **values) -> None:
    with database.session() as session:
        session.execute(
            update(Audit).where(Audit.id == audit_id).values(status=status, finished_at=utcnow(), **values)
        )
