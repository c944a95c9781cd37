"""The dashboard's HTML pages: Jinja2 templates over the same documents the API returns.

Every page renders one or more ``reports`` documents and nothing else, so what a page says, the API
and the CLI's ``--json`` say too. Mutations are plain HTML forms (they work without JavaScript):
a preview page first (the dry run), then a POST with the CSRF token, answered by a redirect (303) to
the page it came from with what was done. htmx only polls the overview's live part.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path as FilePath
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, File, Form, HTTPException, Path, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from ..errors import InvalidInput
from ..plan.profile import Profile
from ..plan.workload import Workload
from ..store.controls import REASON_MAX
from . import reports
from .api import ID_MAX, TEXT_MAX, known_slot_job, letter_filter, plan_sizes
from .context import authorize, context_of, signed_in
from .reports import LetterFilter
from .runs import BackgroundRun
from .slot_job import slot_job_view
from .task_table import task_rows
from .uploads import UPLOAD_MAX_BYTES, profile_upload, workload_upload

__all__ = ["REFRESH_S", "RUN_POLL_S", "router", "templates"]

#: How often the overview's live part is fetched again, in seconds.
REFRESH_S = 5
#: How often a running rerun's or resume's status is fetched again, in seconds.
RUN_POLL_S = 1

templates = Jinja2Templates(directory=FilePath(__file__).parent / "templates")
router = APIRouter(include_in_schema=False)


def _page(request: Request, template: str, status_code: int = 200, **values: Any) -> HTMLResponse:
    ui = context_of(request)
    values.setdefault("message", request.query_params.get("done"))
    return templates.TemplateResponse(
        request, template, {
            "signed_in": signed_in(request), "csrf": ui.guard.csrf, "app_name": ui.app.name if ui.app else None,
            "store_url": ui.store.url, "refresh_s": REFRESH_S, **values,
        }, status_code=status_code,
    )


def _back(path: str, message: str) -> RedirectResponse:
    joint = "&" if "?" in path else "?"
    return RedirectResponse(f"{path}{joint}{urlencode({'done': message})}", status_code=303)


@router.get("/", response_class=HTMLResponse)
def overview(request: Request) -> HTMLResponse:
    """Health with its reasons, the work per family, jobs, pipelines, schedules: ``vardiya status``."""
    ui = context_of(request)
    return _page(request, "overview.html", status=reports.status_document(ui.store, ui.app), page="overview")


@router.get("/fragments/overview", response_class=HTMLResponse)
def overview_fragment(request: Request) -> HTMLResponse:
    """The overview's live part, which htmx fetches every ``REFRESH_S`` seconds."""
    ui = context_of(request)
    return _page(request, "_overview.html", status=reports.status_document(ui.store, ui.app))


#: Dead letters a page of ``/handlers`` lists (the totals, the redrive and the purge cover them all).
LETTERS_PER_PAGE = 100


@router.get("/handlers", response_class=HTMLResponse)
def handlers(
    request: Request, chosen: Annotated[LetterFilter, Depends(letter_filter)],
    letters_page: Annotated[int, Query(ge=1, le=ID_MAX, description="which page of the dead letters")] = 1,
) -> HTMLResponse:
    """Per-handler metrics and the dead letters, filtered as ``vardiya dlq list`` filters them, a page
    of ``LETTERS_PER_PAGE`` at a time (a thousand table rows made the page's HTML the slow part)."""
    ui = context_of(request)
    letters = reports.dead_letters_document(ui.store, chosen)
    pages = max(1, -(-letters["total"] // LETTERS_PER_PAGE))
    shown = min(letters_page, pages)
    first = (shown - 1) * LETTERS_PER_PAGE
    return _page(
        request, "handlers.html", page="handlers", handlers=reports.handlers_document(ui.store, ui.app)["handlers"],
        letters=letters, shown_letters=letters["dead_letters"][first : first + LETTERS_PER_PAGE],
        letters_page=shown, letters_pages=pages, first_letter=first + 1, chosen=chosen,
        query=urlencode(chosen.query(), doseq=True),
    )


@router.get("/dead-letters/{item_id}", response_class=HTMLResponse)
def dead_letter(request: Request, item_id: Annotated[int, Path(ge=1, le=ID_MAX)]) -> HTMLResponse:
    """One dead letter: its records, its attempts with their tracebacks, redrive and purge."""
    try:
        document = reports.dead_letter_document(context_of(request).store, item_id)
    except InvalidInput as error:
        raise HTTPException(404, str(error)) from None
    return _page(request, "dead_letter.html", page="handlers", letter=document)


@router.get("/handlers/redrive", response_class=HTMLResponse)
def redrive_preview(
    request: Request, chosen: Annotated[LetterFilter, Depends(letter_filter)],
    rate: Annotated[float | None, Query(gt=0, le=1_000_000)] = None,
) -> HTMLResponse:
    """The dry run of a redrive: how many letters and records, how many records already succeeded."""
    preview = reports.redrive_document(context_of(request).store, chosen, rate_per_s=rate, dry_run=True)
    return _page(request, "redrive.html", page="handlers", preview=preview, chosen=chosen, rate=rate)


@router.post("/handlers/redrive")
def redrive(
    request: Request,
    csrf: Annotated[str | None, Form()] = None,
    handler: Annotated[str | None, Form(max_length=TEXT_MAX)] = None,
    older_than: Annotated[str | None, Form(max_length=40)] = None,
    error: Annotated[str | None, Form(max_length=TEXT_MAX)] = None,
    id: Annotated[list[int], Form()] = [],  # noqa: B006 - FastAPI copies it
    rate: Annotated[float | None, Form(gt=0, le=1_000_000)] = None,
) -> Response:
    """Redrive what the preview showed (the token's cookie and the form's CSRF token are required)."""
    authorize(request, csrf)
    chosen = letter_filter(handler=handler or None, older_than=older_than or None, error=error or None, id=id)
    report = reports.redrive_document(context_of(request).store, chosen, rate_per_s=rate)
    return _back("/handlers", f"redrove {report['items']} dead letter(s), {report['records']} record(s); "
                 f"{report['already_succeeded']} record(s) had already succeeded and will be skipped")


@router.get("/handlers/purge", response_class=HTMLResponse)
def purge_preview(request: Request, chosen: Annotated[LetterFilter, Depends(letter_filter)]) -> HTMLResponse:
    """The dry run of a purge: what would be deleted for good."""
    preview = reports.purge_document(context_of(request).store, chosen, dry_run=True)
    return _page(request, "purge.html", page="handlers", preview=preview, chosen=chosen)


@router.post("/handlers/purge")
def purge(
    request: Request,
    csrf: Annotated[str | None, Form()] = None,
    handler: Annotated[str | None, Form(max_length=TEXT_MAX)] = None,
    older_than: Annotated[str | None, Form(max_length=40)] = None,
    error: Annotated[str | None, Form(max_length=TEXT_MAX)] = None,
    id: Annotated[list[int], Form()] = [],  # noqa: B006 - FastAPI copies it
) -> Response:
    """Purge what the preview showed (the token's cookie and the form's CSRF token are required)."""
    authorize(request, csrf)
    chosen = letter_filter(handler=handler or None, older_than=older_than or None, error=error or None, id=id)
    report = reports.purge_document(context_of(request).store, chosen)
    return _back("/handlers", f"purged {report['items']} dead letter(s), {report['records']} record(s)")


@router.get("/errors", response_class=HTMLResponse)
def errors(
    request: Request,
    family: Annotated[str | None, Query(pattern="^(job|handler|pipeline)?$")] = None,
    name: Annotated[str | None, Query(max_length=TEXT_MAX)] = None,
    since: Annotated[str | None, Query(max_length=60)] = None,
    limit: Annotated[int, Query(ge=1, le=reports.ERRORS_LIMIT_MAX)] = 50,
) -> HTMLResponse:
    """The failures, newest first, each with its traceback: ``vardiya errors --traceback``."""
    named = {family: name or None} if family and name else {}
    document = reports.errors_document(context_of(request).store, since=since or None, limit=limit, **named)
    return _page(request, "errors.html", page="errors", failures=document["failures"], family=family or "",
                 named=name or "", since=since or "", limit=limit)


def error_page(request: Request, status_code: int, message: str) -> HTMLResponse:
    """A refused request as a page: the one line the CLI would print, and the way back."""
    return _page(request, "error.html", status_code=status_code, error=message, page=None, code=status_code)



def _pipeline_names(request: Request, name: str | None = None) -> list[str]:
    app = context_of(request).app
    names = sorted(app.pipelines) if app else []
    if name is not None and name not in names:
        raise HTTPException(404, f"no pipeline {name!r} in the dashboard's app")
    return names


#: The task states a resume would run again (the preview narrows them to the last run's selection).
_RESUMABLE = frozenset({"failed", "blocked", "pending", "running"})


@router.get("/pipelines", response_class=HTMLResponse)
def pipelines(request: Request) -> HTMLResponse:
    """The app's pipelines; each links to its grid."""
    ui = context_of(request)
    found = []
    for name in _pipeline_names(request):
        document = reports.pipeline_status_document(ui.store, ui.app, name)
        found.append((name, document, Counter(document["tasks"].values())))
    return _page(request, "pipelines.html", page="pipelines", pipelines=found)


@router.get("/pipelines/{name}", response_class=HTMLResponse)
def pipeline(request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)]) -> HTMLResponse:
    """The stage x partition grid (the colours of ``pipeline status --plot``) and every task's state."""
    _pipeline_names(request, name)
    ui = context_of(request)
    status, grid = reports.pipeline_view(ui.store, ui.app, name)
    # A resume runs the failed, blocked and never-run tasks; its preview says exactly which.
    resumable = any(state in _RESUMABLE for state in status["tasks"].values())
    rows = task_rows(reports.pipeline_graph(ui.app, name), status["tasks"], status["stale"])
    return _page(request, "pipeline.html", page="pipelines", name=name, rows=rows, grid=grid, resumable=resumable)


@router.get("/pipelines/{name}/tasks/{task}", response_class=HTMLResponse)
def pipeline_task(
    request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)], task: Annotated[str, Path(max_length=TEXT_MAX)]
) -> HTMLResponse:
    """One task: its runs, rows, reads, error and traceback, its blast radius, and the way to rerun it."""
    _pipeline_names(request, name)
    ui = context_of(request)
    try:
        document = reports.pipeline_task_document(ui.store, ui.app, name, task)
    except InvalidInput as error:
        raise HTTPException(404, str(error)) from None
    return _page(request, "task.html", page="pipelines", name=name, task=document)


@router.get("/pipelines/{name}/rerun", response_class=HTMLResponse)
def rerun_preview(
    request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)],
    task: Annotated[str, Query(min_length=1, max_length=TEXT_MAX)],
) -> HTMLResponse:
    """What a rerun of the task would do, before it does it: its blast radius and the exact task list."""
    _pipeline_names(request, name)
    impact = reports.pipeline_impact_document(context_of(request).app, name, task)
    return _page(request, "rerun.html", page="pipelines", name=name, impact=impact)


@router.post("/pipelines/{name}/rerun")
def rerun(
    request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)],
    task: Annotated[str, Form(min_length=1, max_length=TEXT_MAX)],
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """Start the rerun the preview listed (token cookie and CSRF token required) in the background, and
    send the browser to its status page; 409 while another run of the pipeline started here runs."""
    authorize(request, csrf)
    _pipeline_names(request, name)
    ui = context_of(request)
    reports.pipeline_impact_document(ui.app, name, task)  # an unknown task is refused before a thread starts
    started = ui.runs.start(name, "rerun", task, lambda: reports.pipeline_rerun_document(ui.store, ui.app, name, task))
    return RedirectResponse(f"/pipelines/{quote(name, safe='')}/runs/{started.id}", status_code=303)


@router.get("/pipelines/{name}/resume", response_class=HTMLResponse)
def resume_preview(request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)]) -> HTMLResponse:
    """What a resume would do, before it does it: the exact task list (``pipeline resume --dry-run``) and
    the blast radius of each failed task in it."""
    _pipeline_names(request, name)
    ui = context_of(request)
    preview = reports.pipeline_resume_preview_document(ui.store, ui.app, name)
    return _page(request, "resume.html", page="pipelines", name=name, preview=preview)


@router.post("/pipelines/{name}/resume")
def resume_pipeline(
    request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)], csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """Start the resume the preview listed (token cookie and CSRF token required) in the background."""
    authorize(request, csrf)
    _pipeline_names(request, name)
    ui = context_of(request)
    reports.pipeline_resume_preview_document(ui.store, ui.app, name)  # no run to resume: refused here, not in a thread
    started = ui.runs.start(name, "resume", None, lambda: reports.pipeline_resume_document(ui.store, ui.app, name))
    return RedirectResponse(f"/pipelines/{quote(name, safe='')}/runs/{started.id}", status_code=303)


def _background_run(request: Request, name: str, run_id: int) -> BackgroundRun:
    _pipeline_names(request, name)
    found = context_of(request).runs.get(run_id)
    if found is None or found.pipeline != name:
        raise HTTPException(404, f"this dashboard started no run {run_id} of pipeline {name!r} (or has forgotten it)")
    return found


@router.get("/pipelines/{name}/runs/{run_id}", response_class=HTMLResponse)
def background_run(
    request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)], run_id: Annotated[int, Path(ge=1, le=ID_MAX)],
) -> HTMLResponse:
    """A rerun or resume started here: running, done (with what it ran) or failed (with the error),
    refreshed by htmx until it ends."""
    return _page(request, "run.html", page="pipelines", **_run_values(request, name, run_id))


@router.get("/fragments/pipelines/{name}/runs/{run_id}", response_class=HTMLResponse)
def background_run_fragment(
    request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)], run_id: Annotated[int, Path(ge=1, le=ID_MAX)],
) -> HTMLResponse:
    """The run's live part, which htmx fetches every ``RUN_POLL_S`` seconds while it runs."""
    return _page(request, "_run.html", **_run_values(request, name, run_id))


def _run_values(request: Request, name: str, run_id: int) -> dict[str, Any]:
    """A run's page values; once it has ended, the pipeline's grid too (its new states)."""
    run = _background_run(request, name, run_id).to_json()
    grid = None
    if run["phase"] != "running":
        ui = context_of(request)
        grid = reports.pipeline_view(ui.store, ui.app, name)[1]
    return {"name": name, "run": run, "grid": grid, "poll_s": RUN_POLL_S}


@router.get("/slots", response_class=HTMLResponse)
def slot_jobs(
    request: Request, job: Annotated[str | None, Query(max_length=TEXT_MAX)] = None,
    period: Annotated[str | None, Query(max_length=60)] = None,
) -> HTMLResponse:
    """Each slot job's next tick, lateness and period figures (from ``status``), and one job's page
    (``/api/slots/JOB``): its current period's ledger by slot and the previous period's, as the charts
    of ``slots report --plot`` (``period`` shows another period and the one before it), each slot
    linking to its tick; its next ticks; its closed periods' not-done records (each with the backfill
    it needs). The balance report has a page of its own: it reads every id of the job's source, which
    a page opened on every visit should not pay for."""
    ui = context_of(request)
    status = reports.status_document(ui.store, ui.app)
    jobs = status["jobs"]
    chosen = job or (jobs[0]["job"] if jobs else None)
    view, charts, control = None, [], None
    if chosen is not None:
        if ui.app is None or chosen not in ui.app.slot_jobs:
            raise HTTPException(404, f"no slot job {chosen!r} in the dashboard's app")
        view, found = slot_job_view(ui.store, ui.app, chosen, status, period=period or None)
        charts = [reports.slot_report_chart(each) for each in found]
        control = next(each for each in reports.controls_document(ui.store, ui.app)["entries"]
                       if each["control"] == "slot_job" and each["name"] == chosen)
    return _page(request, "slots.html", page="slots", jobs=jobs, chosen=chosen, view=view, charts=charts, control=control,
                 back=f"/slots?{urlencode({'job': chosen})}" if chosen else "/slots")


@router.get("/slots/{job}/balance", response_class=HTMLResponse)
def slot_balance(request: Request, job: Annotated[str, Path(max_length=TEXT_MAX)]) -> HTMLResponse:
    """How evenly the job's ids fill its slots, with advice: ``vardiya slots balance`` of its source."""
    ui = known_slot_job(request, job)
    return _page(request, "balance.html", page="slots", chosen=job, balance=reports.slot_balance_document(ui.app, job))


@router.get("/slots/{job}/ticks/{period}/{slot}", response_class=HTMLResponse)
def slot_tick(
    request: Request, job: Annotated[str, Path(max_length=TEXT_MAX)],
    period: Annotated[str, Path(min_length=1, max_length=60)], slot: Annotated[int, Path(ge=0, le=1_000_000)],
) -> HTMLResponse:
    """One tick: its slot's window, the ledger's counts, and its records (failed first) with their
    outcomes, errors and the tracebacks ``vardiya errors`` shows."""
    ui = known_slot_job(request, job)
    document = reports.tick_document(ui.store, ui.app, job, period, slot)
    return _page(request, "tick.html", page="slots", tick=document)


def _local(path: str | None, fallback: str) -> str:
    """Where a form sends the browser back to: a path of this dashboard only (never another site)."""
    if path and path.startswith("/") and not path.startswith("//") and "\\" not in path and len(path) <= 2_000:
        return path
    return fallback


@router.get("/controls", response_class=HTMLResponse)
def controls(request: Request) -> HTMLResponse:
    """Everything the app registers, what is paused, and the pause, resume and trigger buttons."""
    ui = context_of(request)
    return _page(request, "controls.html", page="controls", entries=reports.controls_document(ui.store, ui.app)["entries"])


@router.post("/controls/pause")
def pause(
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=TEXT_MAX)],
    kind: Annotated[str | None, Form(max_length=40)] = None,
    reason: Annotated[str | None, Form(max_length=REASON_MAX)] = None,
    back: Annotated[str | None, Form(max_length=2_000)] = None,
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """``vardiya pause NAME`` from a button (the token's cookie and the form's CSRF token are required)."""
    authorize(request, csrf)
    ui = context_of(request)
    done = reports.pause_document(ui.store, ui.app, name, kind=kind or None, reason=reason or None)
    what = f"{done['kind']} {done['name']}"
    return _back(_local(back, "/controls"), f"paused {what}" if done["changed"] else f"{what} was already paused; nothing changed")


@router.post("/controls/resume")
def resume(
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=TEXT_MAX)],
    kind: Annotated[str | None, Form(max_length=40)] = None,
    back: Annotated[str | None, Form(max_length=2_000)] = None,
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """``vardiya resume NAME`` from a button (token cookie and CSRF token required)."""
    authorize(request, csrf)
    ui = context_of(request)
    done = reports.resume_document(ui.store, ui.app, name, kind=kind or None)
    what = f"{done['kind']} {done['name']}"
    return _back(_local(back, "/controls"), f"resumed {what}" if done["changed"] else f"{what} is not paused; nothing changed")


@router.post("/controls/trigger")
def trigger(
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=TEXT_MAX)],
    kind: Annotated[str | None, Form(max_length=40)] = None,
    at: Annotated[str | None, Form(max_length=60)] = None,
    back: Annotated[str | None, Form(max_length=2_000)] = None,
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """``vardiya trigger NAME`` from a button (token cookie and CSRF token required)."""
    authorize(request, csrf)
    ui = context_of(request)
    done = reports.trigger_document(ui.store, ui.app, name, kind=kind or None, at=at or None)
    if done["queued"]:
        said = f"queued {done['kind']} {done['name']}: {done['what']} as work item {done['item']}; a worker runs it"
    else:
        said = f"{done['kind']} {done['name']}: {done['what']} was already queued as work item {done['item']} ({done['state']})"
    return _back(_local(back, "/controls"), said)


def _batch_size(batch_size: str | None) -> int | None:
    if not batch_size:
        return None
    try:
        return int(batch_size)
    except ValueError:
        raise InvalidInput(f"batch_size must be a whole number, got {batch_size!r}") from None


def _planned(
    inputs: tuple[Workload, Profile], sizes: str | None, policy: str | None, batch_size: str | None
) -> dict[str, Any]:
    """The sweep and the comparison of a workload and profile, with their charts, for the planner page."""
    size = _batch_size(batch_size)
    swept = reports.sweep_of(inputs, sizes=plan_sizes(sizes), policy=policy or None)
    compared = reports.compare_of(inputs, batch_size=size)
    return {
        "sweep": swept.to_json(), "sweep_chart": reports.sweep_chart(swept),
        "comparison": compared.to_json(), "compare_chart": reports.compare_chart_svg(compared),
    }


@router.get("/planner", response_class=HTMLResponse)
def planner(
    request: Request,
    workload: Annotated[str | None, Query(max_length=1_000)] = None,
    profile: Annotated[str | None, Query(max_length=1_000)] = None,
    sizes: Annotated[str | None, Query(max_length=1_000)] = None,
    policy: Annotated[str | None, Query(pattern="^(retry_batch|bisect|report_failures)?$")] = None,
    batch_size: Annotated[str | None, Query(max_length=20)] = None,
) -> HTMLResponse:
    """The batch-size sweep and the model comparison of a workload under a cost profile (files under the
    dashboard's working directory), as the charts and tables of ``vardiya plan``."""
    ui = context_of(request)
    values: dict[str, Any] = {"workload": workload or "", "profile": profile or "", "sizes": sizes or "",
                              "policy": policy or "", "batch_size": batch_size or "", "root": str(ui.root),
                              "upload_mb": UPLOAD_MAX_BYTES // (1024 * 1024)}
    if workload and profile:
        values |= _planned(reports.plan_inputs(ui.root, workload, profile), sizes, policy, batch_size)
        values["query"] = urlencode({key: value for key, value in (
            ("workload", workload), ("profile", profile), ("sizes", sizes), ("policy", policy)) if value})
    return _page(request, "planner.html", page="planner", **values)


@router.post("/planner", response_class=HTMLResponse)
def planner_upload(
    request: Request,
    workload_file: Annotated[UploadFile, File(description="the workload CSV")],
    profile_file: Annotated[UploadFile, File(description="the cost profile TOML")],
    sizes: Annotated[str | None, Form(max_length=1_000)] = None,
    policy: Annotated[str | None, Form(pattern="^(retry_batch|bisect|report_failures)?$")] = None,
    batch_size: Annotated[str | None, Form(max_length=20)] = None,
) -> HTMLResponse:
    """The planner of an uploaded workload and profile (read in memory, nothing written): the same
    sweep and comparison as by path. Another site's page cannot post here (the Origin check)."""
    ui = context_of(request)
    if not ui.guard.origin_allowed(request.headers.get("origin")):
        raise HTTPException(403, "the request's Origin is another site; upload from this dashboard's planner")
    workload_name = (workload_file.filename or "workload")[:200]
    profile_name = (profile_file.filename or "profile")[:200]
    costs = profile_upload(profile_name, profile_file.file)  # as vardiya plan reads them: the profile first
    loaded = workload_upload(workload_name, workload_file.file)
    values: dict[str, Any] = {"workload": "", "profile": "", "shown_workload": workload_name,
                              "shown_profile": profile_name, "sizes": sizes or "",
                              "policy": policy or "", "batch_size": batch_size or "", "root": str(ui.root),
                              "upload_mb": UPLOAD_MAX_BYTES // (1024 * 1024), "uploaded": True}
    values |= _planned((loaded, costs), sizes, policy, batch_size)
    return _page(request, "planner.html", page="planner", **values)
