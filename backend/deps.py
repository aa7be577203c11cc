"""FastAPI dependencies: settings, a database session per request, and the write guard."""

from __future__ import annotations

import hmac
import ipaddress
import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, NoReturn

from fastapi import APIRouter, Body, Depends, Request
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session

from backend.db import Database
from backend.errors import ParameterError, Unauthorized
from backend.settings import Settings
from dpfl.errors import SpecError

__all__ = [
    "AUTH_RESPONSE",
    "MAX_OFFSET",
    "DatabaseDep",
    "SessionDep",
    "SettingsDep",
    "WriteGuard",
    "document_guard",
    "refuse_nul",
    "refuse_repeats",
]


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _database(request: Request) -> Database:
    return request.app.state.database


def _session(request: Request) -> Iterator[Session]:
    with request.app.state.database.session() as session:  # commits at the end of the request
        yield session


MAX_OFFSET = 1_000_000_000  # a page offset beyond this is refused (422), not passed to the database

SettingsDep = Annotated[Settings, Depends(_settings)]
DatabaseDep = Annotated[Database, Depends(_database)]
SessionDep = Annotated[Session, Depends(_session)]
# A run spec in a request body: a JSON object the server checks itself (a bad field is a 422 that
# names it); its schema is the RunSpec the OpenAPI document holds (`backend.openapi.complete_schema`).
SpecBody = Annotated[
    dict[str, Any],
    Body(description="a RunSpec", json_schema_extra={"$ref": "#/components/schemas/RunSpec"}),
]


def require_token(request: Request, settings: SettingsDep) -> None:
    """Refuses a write without a valid bearer token when DPFL_API_TOKENS is set (401).

    A missing and a wrong token are both 401 with `WWW-Authenticate: Bearer` (RFC 6750 §3):
    the request is not authenticated either way, and a client retries it with a token.
    """
    if not settings.tokens:
        _require_loopback(request)
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


def _require_loopback(request: Request) -> None:
    """Refuses a write without tokens that reached the server on a non-loopback address.

    `dpfl up` refuses such a bind, but a server started another way (uvicorn directly, with
    --host 0.0.0.0) would serve writes to its network; the address a connection arrived on
    (the ASGI `server`) tells, whatever the bind. A connection without one came over a Unix
    socket (`uvicorn --uds`, behind a reverse proxy that forwards any network to it): refused.
    Names that are not IP addresses (a test client's) are let through.
    """
    server = request.scope.get("server")
    if server is None or server[1] is None or request.scope.get("client") is None:
        _refuse("a Unix socket")  # uvicorn's `server` is then (its path, None), its `client` None
    host = server[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return
    if not address.is_loopback:
        _refuse(host)


def _refuse(where: str) -> NoReturn:
    raise Unauthorized(
        f"this server has no tokens, so it takes writes only over loopback; this request came in "
        f"on {where}: set DPFL_API_TOKENS (and send 'Authorization: Bearer <token>') or use 127.0.0.1"
    )


WriteGuard = Depends(require_token)


NUL_MESSAGE = "contains a NUL character (\\x00), which no id, name or filter may hold; remove it."


async def refuse_nul(request: Request) -> None:
    """Refuses a NUL character in a path or query parameter or a JSON body string (422 naming it).

    Postgres cannot store or even compare text holding NUL; no id, name or filter needs one.
    """
    for name, value in request.path_params.items():
        if isinstance(value, str) and "\x00" in value:
            raise ParameterError("path", name, NUL_MESSAGE)
    for name, value in request.query_params.multi_items():
        if "\x00" in value or "\x00" in name:
            raise ParameterError("query", name.replace("\x00", "\\x00"), NUL_MESSAGE)
    if "json" in request.headers.get("content-type", ""):
        try:
            body = await request.json()  # parsed once: FastAPI has cached it on this request
        except Exception:  # FastAPI has answered invalid JSON with 422 already
            return
        where = _nul_path(body)
        if where is not None:
            raise SpecError(".".join(map(str, where)) if where else "body", NUL_MESSAGE)


def refuse_repeats(request: Request) -> None:
    """Refuses a query parameter given more than once where the route takes one value (422 naming
    it): FastAPI would keep the last and drop the others without a word."""
    names = [name for name, _ in request.query_params.multi_items()]
    repeated = {name for name in names if names.count(name) > 1}
    route = request.scope.get("route")
    if repeated and isinstance(route, APIRoute):
        for name in sorted(repeated - _list_parameters(route)):
            raise ParameterError("query", name, "is given more than once; it takes one value.")


def _list_parameters(route: APIRoute) -> frozenset[str]:
    """Returns the route's query parameters that take several values (`tag`), its dependencies' too."""
    found: set[str] = set()
    stack = [route.dependant]
    while stack:
        dependant = stack.pop()
        found |= {f.alias for f in dependant.query_params if _sequence(f.field_info.annotation)}
        stack.extend(dependant.dependencies)
    return frozenset(found)


def _sequence(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    return origin in (typing.Union, types.UnionType) and any(
        _sequence(a) for a in typing.get_args(annotation)
    )


def _nul_path(value: object, path: tuple = ()) -> tuple | None:
    """Returns the path of the first string (or key) holding NUL in parsed JSON, else None."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return where
        elif isinstance(item, dict):
            for key, sub in item.items():
                if "\x00" in key:
                    return (*where, key.replace("\x00", "\\x00"))
                stack.append((sub, (*where, key)))
        elif isinstance(item, list):
            stack.extend((sub, (*where, i)) for i, sub in enumerate(item))
    return None


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
