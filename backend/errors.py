"""Errors the API reports, each with its status code, rendered by one handler.

Body: {"detail": message, "error": ClassName}. A dpfl SpecError becomes 422 with FastAPI's
[{loc, msg, type}] detail, so the browser can show it beside the field.
"""

from __future__ import annotations

import errno
import logging
from typing import ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.db import is_locked
from dpfl.errors import DatasetUnavailable, DpflError, SpecError, UnknownNameError

__all__ = [
    "AppError",
    "BudgetExceeded",
    "Busy",
    "Conflict",
    "InsufficientStorage",
    "MethodNotAllowed",
    "NotFound",
    "ParameterError",
    "PayloadTooLarge",
    "TooManyRequests",
    "Unauthorized",
    "app_error_response",
    "install",
]

log = logging.getLogger(__name__)


class AppError(Exception):
    """Base of the API's expected errors."""

    status_code = 400
    headers: ClassVar[dict[str, str] | None] = None  # response headers the status calls for

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(AppError):
    status_code = 404


class Conflict(AppError):
    status_code = 409


class BudgetExceeded(Conflict):
    pass


class Busy(AppError):
    """The database could not take the request in time (SQLite's one writer is busy, or every
    pooled connection is taken): nothing was saved, and sending it again works."""

    status_code = 503
    headers: ClassVar[dict[str, str] | None] = {"Retry-After": "1"}


BUSY_LOCKED = (
    "the database is busy with another write (SQLite allows one at a time); "
    "nothing was saved: send the request again"
)
BUSY_POOL = "every database connection is in use; nothing was saved: send the request again"


class TooManyRequests(AppError):
    """A server-wide limit is reached for now (audits at once); sending it later works."""

    status_code = 429
    headers: ClassVar[dict[str, str] | None] = {"Retry-After": "60"}


class InsufficientStorage(AppError):
    """The server could not write what the request asked it to keep (a full or read-only disk)."""

    status_code = 507


# What a full, read-only or forbidden disk answers a write with (not a network error's errno).
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})
# SQLite's words for the same (SQLITE_FULL, SQLITE_READONLY)
_SQLITE_STORAGE = ("database or disk is full", "readonly database")


def storage_error(cause: str) -> InsufficientStorage:
    return InsufficientStorage(
        f"the server could not write to its disk ({cause}); nothing was saved: free space or make its "
        "folders writable (DPFL_HOME), then send the request again"
    )


class MethodNotAllowed(AppError):
    status_code = 405


class PayloadTooLarge(AppError):
    status_code = 413


class Unauthorized(AppError):
    """No bearer token, or not one of the server's: 401 with the challenge RFC 6750 asks for."""

    status_code = 401
    headers: ClassVar[dict[str, str] | None] = {"WWW-Authenticate": "Bearer"}


class ParameterError(SpecError):
    """A query, path or header parameter is invalid: 422 with loc [location, name] (name kept whole)."""

    def __init__(self, location: str, name: str, message: str):
        super().__init__(name, message)
        self.location = location


def app_error_response(exc: AppError) -> JSONResponse:
    """Returns the response for an AppError; middleware that answers before routing uses it too."""
    return JSONResponse(
        {"detail": exc.message, "error": type(exc).__name__}, status_code=exc.status_code, headers=exc.headers
    )


def spec_error_body(exc: SpecError | UnknownNameError, *, field: str | None = None) -> dict:
    """Returns the 422 body for a spec error: FastAPI's shape, with the dotted field as loc."""
    msg = getattr(exc, "reason", None) or str(exc)
    if isinstance(exc, ParameterError):
        loc = [exc.location, exc.field]  # as sent, even empty (`?=x`)
    else:
        loc_path = field or getattr(exc, "field", None) or exc.kind  # type: ignore[union-attr]
        loc = ["body", *loc_path.split(".")]
    return {
        "detail": [{"loc": loc, "msg": msg, "type": "value_error"}],
        "error": "SpecError" if isinstance(exc, SpecError) else type(exc).__name__,
    }


def install(app: FastAPI) -> None:
    """Registers the handlers on `app`."""

    @app.exception_handler(AppError)
    async def _app_error(_: Request, exc: AppError) -> JSONResponse:
        return app_error_response(exc)

    @app.exception_handler(SpecError)
    async def _spec_error(_: Request, exc: SpecError) -> JSONResponse:
        return JSONResponse(spec_error_body(exc), status_code=422)

    @app.exception_handler(UnknownNameError)
    async def _unknown_name(_: Request, exc: UnknownNameError) -> JSONResponse:
        field = exc.field or exc.kind.replace(" ", "_")
        body = {
            "detail": [{"loc": ["body", *field.split(".")], "msg": str(exc), "type": "value_error"}],
            "error": "UnknownNameError",
        }
        return JSONResponse(body, status_code=422)

    @app.exception_handler(DatasetUnavailable)
    async def _dataset(_: Request, exc: DatasetUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "error": "DatasetUnavailable"}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse({"detail": detail, "error": "RequestValidationError"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        cause = exc.__cause__
        if exc.status_code == 400 and isinstance(cause, UnicodeDecodeError):
            # FastAPI's 400 for a body that is not UTF-8; malformed JSON is a 422: one status for both
            byte = cause.object[cause.start]
            msg = f"must be UTF-8 JSON; byte {byte:#04x} at position {cause.start} is not UTF-8"
            detail = [{"loc": ["body"], "msg": msg, "type": "json_invalid"}]
            return JSONResponse({"detail": detail, "error": "RequestValidationError"}, status_code=422)
        return JSONResponse(
            {"detail": str(exc.detail), "error": "HTTPException"},
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(OperationalError)
    async def _operational(_: Request, exc: OperationalError) -> JSONResponse:
        if is_locked(exc):
            return app_error_response(Busy(BUSY_LOCKED))
        if any(words in str(exc.orig) for words in _SQLITE_STORAGE):
            return app_error_response(storage_error(f"the database: {exc.orig}"))
        raise exc  # a fault of ours or of the database: the server error it is (500)

    @app.exception_handler(OSError)
    async def _storage(_: Request, exc: OSError) -> JSONResponse:
        if exc.errno not in STORAGE_ERRNOS:
            raise exc
        where = f"{exc.filename}: " if exc.filename else ""
        return app_error_response(storage_error(f"{where}{exc.strerror}"))

    @app.exception_handler(PoolTimeout)
    async def _pool(_: Request, exc: PoolTimeout) -> JSONResponse:
        return app_error_response(Busy(BUSY_POOL))

    @app.exception_handler(DpflError)
    async def _dpfl(_: Request, exc: DpflError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "error": type(exc).__name__}, status_code=422)
