"""HTTP for service health."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from backend.deps import DatabaseDep, SettingsDep
from backend.health import service
from backend.health.schemas import HealthRead

router = APIRouter(prefix="/health", tags=["health"])


@router.get("", response_model=HealthRead, responses={503: {"model": HealthRead}})
def get_health(request: Request, response: Response, database: DatabaseDep, settings: SettingsDep) -> Any:
    """Database, broker and workers; 503 unless the database and the broker are ok."""
    body = service.health(database, request.app.state.celery, settings=settings)
    response.status_code = 200 if body.database == body.broker == "ok" else 503
    return body
