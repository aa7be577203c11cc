"""HTTP for external runs: describe one (POST /runs, `source: external`), append its rounds, end
it, or import a whole one that `dpfl.track` wrote without a server."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from backend.deps import SessionDep, SettingsDep, WriteGuard
from backend.models import Run
from backend.runs import external
from backend.runs.idempotency import created_once
from backend.runs.schemas import RoundRecorded, RunDetail
from dpfl.external import parse_end, parse_external, parse_import, parse_round

router = APIRouter(prefix="/runs", tags=["runs"])

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "no run with this id"},
    409: {"description": "not an external run, a finished one, or a round sent again with other values"},
    422: {"description": "a field is invalid; `detail[].loc` names it, and nothing of the body is stored"},
}


def _body(name: str, description: str) -> Any:
    return Body(description=description, json_schema_extra={"$ref": f"#/components/schemas/{name}"})


RoundBody = Annotated[dict[str, Any], _body("ReportedRound", "one round's metrics and releases")]
EndBody = Annotated[dict[str, Any], _body("RunEnd", "how the run ended")]
ImportBody = Annotated[dict[str, Any], _body("ExternalImport", "a whole run, as dpfl.track writes it")]


def create(
    response: Response, session: SessionDep, settings: SettingsDep, body: dict[str, Any], key: str | None
) -> Run:
    """POST /runs with `source: external`: the run added, running (201), or the one a retry with the
    same `Idempotency-Key` created (`Idempotent-Replayed: true`)."""
    description = parse_external(body)
    run, _ = created_once(
        response,
        session,
        find=lambda: None if key is None else external.keyed_external(session, key, description),
        create=lambda: external.create_external(
            session, description=description, settings=settings, idempotency_key=key
        ),
    )
    return run


@router.post(
    "/import", status_code=201, response_model=RunDetail, responses=ERRORS, dependencies=[WriteGuard]
)
def import_run(body: ImportBody, session: SessionDep, settings: SettingsDep) -> Any:
    """Add a whole external run (description, rounds, end) in one transaction: all of it or nothing."""
    description, rounds, end = parse_import(body)
    run = external.import_external(
        session, description=description, rounds=rounds, end=end, settings=settings
    )
    session.commit()
    return run


@router.post(
    "/{run_id}/rounds",
    status_code=201,
    response_model=RoundRecorded,
    responses=ERRORS | {200: {"description": "this round was stored before with the same values"}},
    dependencies=[WriteGuard],
)
def append_round(
    run_id: str, body: RoundBody, response: Response, session: SessionDep, settings: SettingsDep
) -> Any:
    """Append one round of an external run; the same round sent again changes nothing (200)."""
    reported, releases = parse_round(body)
    row, replayed = external.append_round(
        session, run_id, reported=reported, releases=releases, settings=settings
    )
    session.commit()
    if replayed:
        response.status_code = 200
    run = session.get(Run, run_id)
    return RoundRecorded(
        round=row.round, epsilon=row.epsilon, reported_epsilon=run.reported_epsilon, replayed=replayed
    )


@router.post("/{run_id}/finish", response_model=RunDetail, responses=ERRORS, dependencies=[WriteGuard])
def finish_run(run_id: str, body: EndBody, session: SessionDep) -> Any:
    """End an external run: succeeded, failed or cancelled, with the ε its tool reported last."""
    run = external.finish_external(session, run_id, end=parse_end(body))
    session.commit()
    return run
