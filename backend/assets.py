"""Third-party browser assets, served by the API itself so that every page works offline.

Plotly is our own bundle of plotly.js (backend/vendor/plotly.min.js, built by `make plotly-bundle`
from scripts/plotly-bundle/): only the trace types our figures draw (scatter, bar, parcoords),
1.4 MB where the whole library is 4.8 MB, which is what the browser spends most of a chart page's
load evaluating. It is answered at a URL that carries its version and a hash of its content,
gzip-compressed once and cached by the browser for a year: a rebuilt bundle is a new URL. The
unversioned `/vendor/plotly.min.js` redirects there, so the browser app never spells the version.
The API page (`/docs`) is Swagger UI from the `swagger-ui-bundle` package; ReDoc, which only
exists on a CDN, is not served. That Swagger UI (4.15) refuses a document labelled OpenAPI 3.1,
which FastAPI writes, so `/docs` reads the same document labelled 3.0.3; the schemas it shows
differ only in how a nullable type is spelled, which 4.15 shows as a list of types.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import re
from pathlib import Path

import swagger_ui_bundle
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

__all__ = ["PLOTLY_URL", "install"]

PLOTLY_FILE = Path(__file__).parent / "vendor" / "plotly.min.js"


def _plotly_url() -> str:
    raw = PLOTLY_FILE.read_bytes()
    version = re.search(rb"plotly\.js v([\w.]+)", raw[:200]).group(1).decode()
    return f"/vendor/plotly-{version}-{hashlib.sha256(raw).hexdigest()[:10]}.min.js"


PLOTLY_URL = _plotly_url()
SWAGGER_URL = "/vendor/swagger-ui"
# A versioned URL never changes content, so the browser may keep it without asking again.
IMMUTABLE = "public, max-age=31536000, immutable"


@functools.cache
def _plotly_bytes(compressed: bool) -> bytes:
    raw = PLOTLY_FILE.read_bytes()
    return gzip.compress(raw, compresslevel=6, mtime=0) if compressed else raw


def install(app: FastAPI) -> None:
    """Adds the vendor routes and `/docs` to `app` (built with docs_url=None, redoc_url=None)."""

    @app.get(PLOTLY_URL, include_in_schema=False)
    def plotly_js(request: Request) -> Response:
        compressed = "gzip" in request.headers.get("accept-encoding", "")
        headers = {"cache-control": IMMUTABLE, "vary": "Accept-Encoding"}
        if compressed:
            headers["content-encoding"] = "gzip"
        return Response(_plotly_bytes(compressed), media_type="text/javascript", headers=headers)

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    def plotly_latest() -> RedirectResponse:
        return RedirectResponse(PLOTLY_URL, status_code=307)

    @app.get("/docs/openapi.json", include_in_schema=False)
    def docs_openapi() -> JSONResponse:
        return JSONResponse({**app.openapi(), "openapi": "3.0.3"})

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/docs/openapi.json",
            title=f"{app.title} — API",
            swagger_js_url=f"{SWAGGER_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_URL}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER_URL}/favicon-32x32.png",
        )

    app.mount(SWAGGER_URL, StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="swagger-ui")
