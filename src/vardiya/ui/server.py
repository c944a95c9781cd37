"""The dashboard as an ASGI application: ``create_app(store, app, guard)``, served by ``vardiya ui``.

FastAPI gives the JSON API its validation (bad parameters are 422 with a message) and its OpenAPI
document (``/api/openapi.json``, which the test suite fuzzes with schemathesis); Jinja2 renders the
pages; htmx (vendored in ``static/``) refreshes the overview. Everything ships inside the wheel.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from fastapi.staticfiles import StaticFiles

from .. import __version__
from ..app import App
from ..errors import StoreError, VardiyaError
from ..service.status import status_report
from ..store import Store
from . import api, pages
from .context import UiContext
from .runs import RunBusy
from .security import COOKIE, Guard
from .uploads import UPLOAD_BODY_MAX_BYTES, UPLOAD_MAX_BYTES

__all__ = ["create_app"]

_STATIC = Path(__file__).parent / "static"
#: Sent with every answer: no framing by other sites, no sniffing, no referrer sent to other sites.
_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
}


def _warm(store: Store, app: App | None) -> None:
    """Read the overview's status once, so what it keeps (``IterableSource``'s open records, the
    ledger's period figures) is there before the first request; a failure is the first request's."""
    with contextlib.suppress(VardiyaError):
        status_report(store, app)


def _wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/api/")


def create_app(store: Store, app: App | None, guard: Guard, *, root: Path | None = None) -> FastAPI:
    """The dashboard over ``store`` (kept open by the caller), for ``app``'s jobs, handlers, pipelines;
    the planner reads workloads and profiles under ``root`` only (default: the working directory)."""
    context = UiContext(store=store, app=app, guard=guard, root=(root or Path.cwd()).resolve())

    @contextlib.asynccontextmanager
    async def lifespan(_server: FastAPI) -> AsyncIterator[None]:
        # The first status of a big store reads its closed periods' settled keys once (seconds on a
        # million ledger rows); done at start, the operator's first page finds them kept.
        warming = asyncio.create_task(asyncio.to_thread(_warm, store, app))
        yield
        await warming
        # A rerun or resume still running finishes (and records its outcome) before the server stops:
        # a run cut off mid-wave would leave its run row open until the next run found it.
        await asyncio.to_thread(context.runs.wait)

    server = FastAPI(
        lifespan=lifespan,
        title="vardiya dashboard API",
        version=__version__,
        description="The JSON of each endpoint is the `--json` document of the matching `vardiya` command.",
        openapi_url="/api/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
    )
    server.state.ui = context
    server.mount("/static", StaticFiles(directory=_STATIC), name="static")
    server.include_router(api.router)
    server.include_router(pages.router)

    @server.middleware("http")
    async def guard_requests(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """Answer only this server's names (DNS rebinding), take the token from a start URL, add headers."""
        if not guard.host_allowed(request.headers.get("host")):
            return PlainTextResponse(
                "this dashboard answers only the names it was started for (see vardiya ui --allowed-host)",
                status_code=400,
            )
        length = request.headers.get("content-length")
        if request.method == "POST" and length and length.isdigit() and int(length) > UPLOAD_BODY_MAX_BYTES:
            # refused before the body is read: a planner upload is two files of at most UPLOAD_MAX_BYTES
            return PlainTextResponse(
                f"this request's body is over {UPLOAD_BODY_MAX_BYTES // (1024 * 1024)} MB; the planner takes "
                f"uploads of at most {UPLOAD_MAX_BYTES // (1024 * 1024)} MB each", status_code=413,
            )
        offered = request.query_params.get("token")
        if offered is not None and request.method == "GET" and not request.url.path.startswith("/api/"):
            if not guard.matches(offered):
                return PlainTextResponse("the token in this URL is not this dashboard's", status_code=403)
            # The token moves from the URL (history, logs) into an HttpOnly cookie at once.
            answer: Response = RedirectResponse(request.url.path, status_code=303)
            answer.set_cookie(COOKIE, offered, httponly=True, samesite="strict", path="/")
        else:
            answer = await call_next(request)
        for name, value in _HEADERS.items():
            answer.headers.setdefault(name, value)
        return answer

    @server.exception_handler(StoreError)
    async def store_failed(request: Request, error: StoreError) -> Response:
        return _refuse(request, 503, str(error))

    @server.exception_handler(RunBusy)
    async def busy(request: Request, error: RunBusy) -> Response:
        return _refuse(request, 409, str(error))

    @server.exception_handler(VardiyaError)
    async def refused(request: Request, error: VardiyaError) -> Response:
        return _refuse(request, 400, str(error))

    @server.exception_handler(HTTPException)
    async def http_refused(request: Request, error: HTTPException) -> Response:
        response = _refuse(request, error.status_code, str(error.detail))
        for name, value in (error.headers or {}).items():
            response.headers[name] = value
        return response

    @server.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> Response:
        if _wants_html(request):
            lines = [f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in error.errors()]
            return pages.error_page(request, 422, "; ".join(lines))
        return JSONResponse({"detail": _plain(error.errors())}, status_code=422)

    return server


def _plain(errors: object) -> object:
    """Validation errors as JSON can carry them (a rejected value may be bytes or an exception)."""
    if isinstance(errors, dict):
        return {key: _plain(value) for key, value in errors.items() if key != "ctx"}
    if isinstance(errors, (list, tuple)):
        return [_plain(value) for value in errors]
    if isinstance(errors, (str, int, float, bool)) or errors is None:
        return errors
    return str(errors)


def _refuse(request: Request, status_code: int, message: str) -> Response:
    text = " ".join(message.split())
    if _wants_html(request):
        return pages.error_page(request, status_code, text)
    return JSONResponse({"error": text}, status_code=status_code)
