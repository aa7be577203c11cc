"""Service health as the API shows it."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["HealthRead"]


class HealthRead(BaseModel):
    database: str = Field(description="`ok`, or the error the check met")
    broker: str = Field(description="`ok`, or the error the check met")
    workers: list[str] = Field(
        description="workers that sent a heartbeat lately, idle or running a run (any broker), "
        "or answered a ping (Redis)"
    )
    version: str
