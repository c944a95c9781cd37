"""What every request of the dashboard shares: the store, the user's app and the guard."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fastapi import HTTPException, Request

from ..app import App
from ..store import Store
from .runs import BackgroundRuns
from .security import COOKIE, Access, Guard

__all__ = ["UiContext", "authorize", "context_of", "require_token", "signed_in"]


@dataclass(frozen=True, kw_only=True)
class UiContext:
    """One server's store (opened once, shared by the requests: its engine pools connections), the app
    named by ``--app`` (None: no jobs, handlers or pipelines are known), its guard, the directory
    whose files the planner may read (the working directory it was started in) and the pipeline runs
    it started."""

    store: Store
    app: App | None
    guard: Guard
    root: Path = field(default_factory=Path.cwd)
    #: The reruns and resumes this server started, each in its own thread.
    runs: BackgroundRuns = field(default_factory=BackgroundRuns)


def context_of(request: Request) -> UiContext:
    """The context the server was created with."""
    found: UiContext = request.app.state.ui
    return found


def signed_in(request: Request) -> bool:
    """Whether the browser holds the token (its pages then show the forms that change the store)."""
    return context_of(request).guard.matches(request.cookies.get(COOKIE))


def authorize(request: Request, csrf_field: str | None = None) -> None:
    """Refuse a mutation without the token (401) or with a wrong token or CSRF token (403)."""
    guard = context_of(request).guard
    if not guard.origin_allowed(request.headers.get("origin")):
        raise HTTPException(403, "the request's Origin is another site; mutations come from this dashboard only")
    access = guard.access(headers=request.headers, cookies=request.cookies, csrf_field=csrf_field)
    if access is Access.MISSING:
        raise HTTPException(
            401, "this changes the store: send the token (Authorization: Bearer TOKEN, or open the URL "
            "`vardiya ui` printed, which holds it)", headers={"WWW-Authenticate": "Bearer"},
        )
    if access is Access.WRONG:
        raise HTTPException(403, "the token is not this dashboard's (VARDIYA_UI_TOKEN, or the one printed at start)")
    if access is Access.NO_CSRF:
        raise HTTPException(403, "the CSRF token is missing or stale: reload the page and submit its form again")


def require_token(request: Request) -> None:
    """``authorize`` as a route dependency of the JSON API (the CSRF token, if any, in its header)."""
    authorize(request)
