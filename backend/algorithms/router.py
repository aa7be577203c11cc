"""HTTP for the algorithm catalogue."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.algorithms import service
from backend.algorithms.schemas import AlgorithmRead

router = APIRouter(prefix="/algorithms", tags=["algorithms"])


@router.get("", response_model=list[AlgorithmRead])
def list_algorithms() -> Any:
    """Every registered algorithm: paper, privacy notion, params JSON Schema and defaults."""
    return service.catalogue()
