"""Mounts the routers under /api (their OpenAPI schema is completed in `backend.openapi`)."""

from fastapi import APIRouter, Depends

from backend.algorithms.router import router as algorithms
from backend.audits.router import router as audits
from backend.budgets.router import router as budgets
from backend.datasets.router import router as datasets
from backend.deps import document_guard, refuse_nul, refuse_repeats
from backend.events.router import router as events
from backend.figures.router import router as figures
from backend.health.router import router as health
from backend.options.router import router as options
from backend.privacy.router import router as privacy
from backend.runs.ingest import router as ingest
from backend.runs.router import router as runs
from backend.sweeps.router import router as sweeps

api = APIRouter(prefix="/api", dependencies=[Depends(refuse_nul), Depends(refuse_repeats)])
for router in (
    runs,
    ingest,
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
