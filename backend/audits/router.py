"""HTTP for audits: request an audit of a run's first round, read the latest one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from backend import dispatch
from backend.audits import service
from backend.audits.schemas import AuditCreate, AuditRead
from backend.deps import SessionDep, SettingsDep, WriteGuard

router = APIRouter(prefix="/runs", tags=["audits"])


@router.post(
    "/{run_id}/audit",
    status_code=202,
    response_model=AuditRead,
    dependencies=[WriteGuard],
    responses={
        404: {"description": "no run with this id"},
        409: {
            "description": "the run is not private, has no audit coverage, is protected (has a budget), "
            "or is being audited"
        },
        429: {"description": "`DPFL_MAX_OPEN_AUDITS` audits are queued or running; `Retry-After` says when"},
        422: {
            "description": "`trials` outside 10,000..1,000,000, `seeds` outside 1..10, or "
            "`black_box_trials` neither 0 nor in 100..10,000"
        },
    },
)
def create_audit(
    run_id: str,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    body: Annotated[AuditCreate | None, Body()] = None,
) -> Any:
    """Queue an audit of the run: sensitivity fuzzing and a lower bound on ε for its round-1
    releases, then black-box trials of its first two rounds against the ledger's privacy profile."""
    body = body or AuditCreate()
    audit = service.create_audit(
        session,
        run_id=run_id,
        trials=body.trials,
        seeds=body.seeds,
        black_box_trials=body.black_box_trials,
        settings=settings,
    )
    session.commit()  # the worker must find the row before the message
    dispatch.send_audit(request.app.state.celery, audit.id)  # or later, by the dispatcher
    return audit


@router.get(
    "/{run_id}/audit",
    response_model=AuditRead | None,
    responses={404: {"description": "no run with this id"}},
)
def get_audit(run_id: str, session: SessionDep) -> Any:
    """The run's latest audit: its status, and per release the lower bound against the ledger's ε;
    null when it has not been audited (POST starts one)."""
    return service.latest_audit(session, run_id=run_id)
