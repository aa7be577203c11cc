"""FastAPI dependencies: settings, a database session per request, and the write guard."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session

from backend.db import Database
from backend.errors import Unauthorized
from backend.settings import Settings

__all__ = ["AUTH_RESPONSE", "DatabaseDep", "SessionDep", "SettingsDep", "WriteGuard", "document_guard"]


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _database(request: Request) -> Database:
    return request.app.state.database


def _session(request: Request) -> Iterator[Session]:
    with request.app.state.database.session() as session:  # commits at the end of the request
        yield session


SettingsDep = Annotated[Settings, Depends(_settings)]
DatabaseDep = Annotated[Database, Depends(_database)]
SessionDep = Annotated[Session, Depends(_session)]


def require_token(request: Request, settings: SettingsDep) -> None:
    """Refuses a write without a valid bearer token when DPFL_API_TOKENS is set (401).

    A missing and a wrong token are both 401 with `WWW-Authenticate: Bearer` (RFC 6750 §3):
    the request is not authenticated either way, and a client retries it with a token.
    """
    if not settings.tokens:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(
            "this server requires a bearer token for writes: send 'Authorization: Bearer <token>'"
        )
    # compare_digest on every token: the time taken does not reveal how much of a token matched
    if not any(hmac.compare_digest(token, t) for t in settings.tokens):
        raise Unauthorized("the bearer token is not one of this server's tokens")


WriteGuard = Depends(require_token)

AUTH_RESPONSE: dict = {
    "description": "DPFL_API_TOKENS is set and the request has no bearer token, or not one of them "
    "(`Authorization: Bearer <token>`)",
    "headers": {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
}


def document_guard(router: APIRouter) -> None:
    """Adds the 401 response to the OpenAPI of every route of `router` behind the write guard."""
    for route in router.routes:
        if isinstance(route, APIRoute) and any(d.call is require_token for d in route.dependant.dependencies):
            route.responses.setdefault(401, AUTH_RESPONSE)
