"""Mounts the routers under /api."""

from fastapi import APIRouter

from backend.budgets.router import router as budgets
from backend.runs.router import router as runs

api = APIRouter(prefix="/api")
for router in (runs, budgets):
    api.include_router(router)
