"""ASGI middleware that answers before routing: request body limits, and methods.

BodyLimit reads a request's body before the app does, refusing it with 413 once it passes
`limit` bytes (a Content-Length over the limit is refused before a byte is read), and a JSON
body nested deeper than MAX_JSON_DEPTH with 422. The CSV upload route streams its own body
under `max_upload_bytes` and is left alone.

Methods answers every OPTIONS request with 405 and an `Allow` header listing the methods the
path accepts: this server sends no CORS headers (the browser app is served from the same
origin), so there is no preflight to answer. So it does a method an API path does not take
(`GET /api/privacy/project`): the browser app's files, mounted at `/`, would otherwise take the
request and answer 404 or 422.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fastapi.responses import JSONResponse
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.errors import MethodNotAllowed, NotFound, PayloadTooLarge, app_error_response

__all__ = ["MAX_JSON_DEPTH", "BodyLimit", "Methods"]

MAX_JSON_DEPTH = 64


class BodyLimit:
    def __init__(self, app: ASGIApp, *, limit: int, exempt: Callable[[Scope], bool]):
        self.app, self.limit, self.exempt = app, limit, exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.exempt(scope):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > self.limit:
            await self._too_large(scope, receive, send, f"{int(length):,}")
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(scope, receive, send, f"more than {self.limit:,}")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and b"json" in headers.get(b"content-type", b""):
            problem = _json_depth_problem(body)
            if problem is not None:
                detail = [{"loc": ["body"], "msg": problem, "type": "json_invalid"}]
                response = JSONResponse(
                    {"detail": detail, "error": "RequestValidationError"}, status_code=422
                )
                await response(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # a streaming response listens for the disconnect

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, got: str) -> None:
        exc = PayloadTooLarge(
            f"the request body is over this server's limit of {self.limit:,} bytes (DPFL_MAX_BODY_BYTES); "
            f"got {got} bytes. Upload data files with POST /api/datasets."
        )
        response = app_error_response(exc)
        response.headers["Connection"] = "close"  # the rest of the body is not read
        await response(scope, receive, send)


def _json_depth_problem(body: bytes) -> str | None:
    """Returns why a JSON body is refused for its nesting, or None (invalid JSON is FastAPI's to report)."""
    try:
        value = json.loads(body)
    except RecursionError:
        return f"is nested too deeply to parse; JSON bodies may nest at most {MAX_JSON_DEPTH} levels."
    except ValueError:
        return None
    stack, deepest = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                return (
                    f"is nested more than {MAX_JSON_DEPTH} levels deep; nest at most {MAX_JSON_DEPTH} levels."
                )
            stack.extend((sub, depth + 1) for sub in (item.values() if isinstance(item, dict) else item))
    return None


class Methods:
    def __init__(self, app: ASGIApp, *, openapi: Callable[[], dict[str, Any]]):
        self.app, self.openapi = app, openapi
        self._paths: list[tuple[re.Pattern[str], set[str]]] | None = None

    def methods(self, path: str) -> set[str]:
        """Returns the methods the API's routes accept at `path` (from its OpenAPI schema)."""
        if self._paths is None:
            self._paths = [
                (compile_path(template)[0], {m.upper() for m in ops} | ({"HEAD"} if "get" in ops else set()))
                for template, ops in self.openapi()["paths"].items()
            ]
        return {m for regex, methods in self._paths if regex.match(path) for m in methods}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        api = path.startswith("/api/")
        if method != "OPTIONS" and not api:
            await self.app(scope, receive, send)
            return
        methods = self.methods(path)
        if method != "OPTIONS" and (method in methods or not methods):
            await self.app(scope, receive, send)  # the API's route, or its 404
            return
        if not methods and api:
            await app_error_response(NotFound(f"{path} is not a path of this API"))(scope, receive, send)
            return
        allow = ", ".join(sorted(methods or {"GET", "HEAD"}))  # else a file of the browser app
        if method == "OPTIONS":
            why = "OPTIONS is not supported (this server sends no CORS headers)"
        else:
            why = f"{method} is not a method of {path}"
        response = app_error_response(MethodNotAllowed(f"{why}; {path} allows {allow}"))
        response.headers["Allow"] = allow
        await response(scope, receive, send)
