"""Algorithm catalogue entries as the API shows them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["AlgorithmRead"]


class AlgorithmRead(BaseModel):
    name: str = Field(description="registry key, used as `algorithm` in a RunSpec")
    paper: str
    notion: str = Field(description="the privacy notion: none, record, user, agent, instance or gdp")
    private: bool = Field(description="whether the algorithm releases anything under differential privacy")
    summary: str
    params_schema: dict[str, Any] = Field(description="JSON Schema of `params` (drives the new-run form)")
    defaults: dict[str, Any] = Field(description="the parameters used when `params` omits them")
