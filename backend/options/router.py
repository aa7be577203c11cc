"""HTTP for the options catalogue."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.options import service
from backend.options.schemas import Options

router = APIRouter(prefix="/options", tags=["options"])


@router.get("", response_model=Options)
def get_options() -> Any:
    """The names a run spec may use, from the dpfl registries: models, partition and user kinds,
    accountants (and which may give a run's headline ε), notions."""
    return service.catalogue()
