"""Mounts the routers under /api, and completes their OpenAPI schema."""

from typing import Any

from fastapi import APIRouter, Depends, FastAPI

from backend.algorithms.router import router as algorithms
from backend.audits.router import router as audits
from backend.budgets.router import router as budgets
from backend.datasets.router import router as datasets
from backend.deps import document_guard, refuse_nul
from backend.events.router import router as events
from backend.figures.router import router as figures
from backend.health.router import router as health
from backend.options.router import router as options
from backend.privacy.router import router as privacy
from backend.runs.router import router as runs
from backend.sweeps.router import router as sweeps
from dpfl.spec import RunSpec

api = APIRouter(prefix="/api", dependencies=[Depends(refuse_nul)])
for router in (
    runs,
    audits,
    budgets,
    sweeps,
    algorithms,
    options,
    datasets,
    privacy,
    health,
    events,
    figures,
):
    document_guard(router)  # the 401 in the OpenAPI of each route behind the write guard
    api.include_router(router)


def document_spec(app: FastAPI) -> None:
    """Makes `app`'s OpenAPI schema name the RunSpec that run and projection bodies take
    (`backend.deps.SpecBody` points at it): they are read as JSON objects, so that a bad field is
    our 422 naming it, and the schema would otherwise say only "object"."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        if "RunSpec" not in components:
            spec = RunSpec.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(spec.pop("$defs", {}) | {"RunSpec": spec})
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
