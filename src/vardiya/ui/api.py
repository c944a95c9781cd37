"""The JSON API under ``/api/``: each answer is the ``--json`` document of the matching CLI command.

Reads are open to whoever reaches the server (it binds loopback by default); mutations (redrive,
purge, rerun, resume, pause, trigger) need the token (``security.py``). Bad input is a 4xx with a message: ``422`` for a parameter
of the wrong type or range (FastAPI's validation, with ``detail``), ``400`` for a value vardiya refuses
(``{"error": ...}``, the line the CLI would print), ``404`` for an id or name that is not there.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigurationError, InvalidInput
from ..slots.closed import CLOSED_PERIODS
from ..store.controls import REASON_MAX
from . import reports
from .context import context_of, require_token
from .reports import LetterFilter
from .runs import BackgroundRun
from .slot_job import NEXT_TICKS, NEXT_TICKS_MAX, slot_job_document

__all__ = ["router"]

#: Ids are SQL integers: a larger number cannot name a row, and is refused as bad input.
ID_MAX = 2**63 - 1
#: The longest filter text accepted (a handler name, an error fragment, a duration).
TEXT_MAX = 500

router = APIRouter(prefix="/api", tags=["api"])

Text = Annotated[str | None, Query(max_length=TEXT_MAX)]


def letter_filter(
    handler: Text = None,
    older_than: Annotated[str | None, Query(max_length=40, description="dead for longer than this, e.g. 72h")] = None,
    error: Annotated[str | None, Query(max_length=TEXT_MAX, description="the last error contains this")] = None,
    id: Annotated[list[int], Query(description="only these dead letters (repeatable)")] = [],  # noqa: B006 - FastAPI copies it
) -> LetterFilter:
    """The ``dlq`` commands' filters, from the query string."""
    for each in id:
        if not 1 <= each <= ID_MAX:
            raise InvalidInput(f"id {each} is out of range; dead letter ids are from 1 to {ID_MAX}")
    # An empty form field means "any", as an option left out does.
    return LetterFilter(handler=handler or None, older_than=older_than or None, error=error or None, ids=tuple(id))


class LetterSelection(BaseModel):
    """Which dead letters a redrive or a purge is about: the ``dlq`` commands' filters."""

    model_config = ConfigDict(extra="forbid")

    handler: str | None = Field(default=None, max_length=TEXT_MAX)
    older_than: str | None = Field(default=None, max_length=40, description="dead for longer than this, e.g. 72h")
    error: str | None = Field(default=None, max_length=TEXT_MAX, description="the last error contains this")
    ids: list[Annotated[int, Field(ge=1, le=ID_MAX)]] = Field(default_factory=list, max_length=10_000)
    dry_run: bool = Field(default=False, description="say what would happen; change nothing")

    def chosen(self) -> LetterFilter:
        """The selection as the engine's filter."""
        return LetterFilter(handler=self.handler, older_than=self.older_than, error=self.error, ids=tuple(self.ids))


class RedriveRequest(LetterSelection):
    """``vardiya dlq redrive``'s options."""

    rate_per_s: float | None = Field(default=None, gt=0, le=1_000_000, description="make at most this many items ready per second")
    max_attempts: int | None = Field(default=None, ge=1, le=1_000_000, description="a new attempt budget")


@router.get("/status", summary="vardiya status --json")
def api_status(
    request: Request,
    late_after_s: Annotated[float, Query(ge=0, le=10**9, description="seconds due before an item counts as late")] = 60.0,
    closed_periods: Annotated[int, Query(ge=0, le=10_000)] = CLOSED_PERIODS,
) -> dict[str, Any]:
    """Health, with its reasons, and the work per family: the document of ``vardiya status --json``."""
    ui = context_of(request)
    return reports.status_document(ui.store, ui.app, late_after_s=late_after_s, closed_periods=closed_periods)


@router.get("/errors", summary="vardiya errors --json")
def api_errors(
    request: Request,
    job: Text = None,
    handler: Text = None,
    pipeline: Text = None,
    since: Annotated[str | None, Query(max_length=60, description="ISO 8601 (naive = UTC) or back from now: 2h, 1d")] = None,
    limit: Annotated[int, Query(ge=1, le=reports.ERRORS_LIMIT_MAX)] = 20,
) -> dict[str, Any]:
    """What failed and why, newest first, with tracebacks."""
    store = context_of(request).store
    return reports.errors_document(store, job=job, handler=handler, pipeline=pipeline, since=since, limit=limit)


@router.get("/dlq", summary="vardiya dlq list --json")
def api_dead_letters(request: Request, chosen: Annotated[LetterFilter, Depends(letter_filter)]) -> dict[str, Any]:
    """Dead letters, oldest first."""
    return reports.dead_letters_document(context_of(request).store, chosen)


@router.get("/dlq/{item_id}", summary="vardiya dlq show ID --json")
def api_dead_letter(request: Request, item_id: Annotated[int, Path(ge=1, le=ID_MAX)]) -> dict[str, Any]:
    """One dead letter: its records, every attempt with its traceback, every handler call."""
    try:
        return reports.dead_letter_document(context_of(request).store, item_id)
    except InvalidInput as error:
        raise HTTPException(404, str(error)) from None


@router.post("/dlq/redrive", summary="vardiya dlq redrive --json", dependencies=[Depends(require_token)])
def api_redrive(request: Request, body: RedriveRequest) -> dict[str, Any]:
    """Make dead letters ready again (records that already succeeded are skipped); ``dry_run`` previews."""
    return reports.redrive_document(
        context_of(request).store, body.chosen(), rate_per_s=body.rate_per_s, max_attempts=body.max_attempts,
        dry_run=body.dry_run,
    )


@router.post("/dlq/purge", summary="vardiya dlq purge --json", dependencies=[Depends(require_token)])
def api_purge(request: Request, body: LetterSelection) -> dict[str, Any]:
    """Delete dead letters and their history for good (a filter is required); ``dry_run`` previews."""
    return reports.purge_document(context_of(request).store, body.chosen(), dry_run=body.dry_run)


@router.get("/handlers", summary="vardiya invoke metrics, for every async and stream handler")
def api_handlers(request: Request) -> dict[str, Any]:
    """Each async and stream handler's metrics (calls, processed, extra, dead, co-failed, latency, cost)."""
    ui = context_of(request)
    return reports.handlers_document(ui.store, ui.app)


@router.get("/handlers/{name}/metrics", summary="vardiya invoke metrics HANDLER --json")
def api_handler_metrics(
    request: Request,
    name: Annotated[str, Path(max_length=TEXT_MAX)],
    model: Annotated[str | None, Query(pattern="^(async|stream)$")] = None,
    since: Annotated[str | None, Query(max_length=60, description="ISO 8601, UTC if naive")] = None,
) -> dict[str, Any]:
    """One handler's metrics in the store."""
    ui = context_of(request)
    if ui.app is None:
        raise HTTPException(404, "the dashboard was started without --app, so it knows no handlers")
    try:
        handler = ui.app.get_handler(name)
    except ConfigurationError as error:
        raise HTTPException(404, str(error)) from None
    return reports.handler_metrics_document(ui.store, ui.app, handler.name, model=model, since=since)


@router.get("/pipelines/{name}/status", summary="vardiya pipeline status PIPE --json")
def api_pipeline_status(request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)]) -> dict[str, Any]:
    """Every task's state and the stale tasks of one of the app's pipelines."""
    return reports.pipeline_status_document(_known_pipeline(request, name).store, context_of(request).app, name)


def _known_pipeline(request: Request, name: str) -> Any:
    ui = context_of(request)
    if ui.app is None or name not in ui.app.pipelines:
        raise HTTPException(404, f"no pipeline {name!r} in the dashboard's app")
    return ui


Task = Annotated[str, Query(min_length=1, max_length=TEXT_MAX, description="STAGE@PARTITION")]


@router.get("/pipelines/{name}/impact", summary="vardiya pipeline impact PIPE --task T --json")
def api_pipeline_impact(request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)], task: Task) -> dict[str, Any]:
    """A task's blast radius and the exact list of tasks a rerun of it would run."""
    ui = _known_pipeline(request, name)
    return reports.pipeline_impact_document(ui.app, name, task)


@router.get("/pipelines/{name}/resume-preview", summary="vardiya pipeline resume PIPE --dry-run --json")
def api_pipeline_resume_preview(request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)]) -> dict[str, Any]:
    """The exact task list a resume would run (its last run's failed, blocked and never-run tasks), and
    each failed task's blast radius; nothing is run."""
    ui = _known_pipeline(request, name)
    return reports.pipeline_resume_preview_document(ui.store, ui.app, name)


@router.get("/pipelines/{name}/tasks/{task}", summary="one task: state, attempts, reads, tracebacks, blast radius")
def api_pipeline_task(
    request: Request, name: Annotated[str, Path(max_length=TEXT_MAX)], task: Annotated[str, Path(max_length=TEXT_MAX)]
) -> dict[str, Any]:
    """A task's runs (rows, error), what it read, its failures with tracebacks and its blast radius."""
    ui = _known_pipeline(request, name)
    try:
        return reports.pipeline_task_document(ui.store, ui.app, name, task)
    except InvalidInput as error:
        raise HTTPException(404, str(error)) from None


class RerunRequest(BaseModel):
    """``vardiya pipeline rerun``'s task."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=TEXT_MAX, description="STAGE@PARTITION")


_BUSY: dict[int | str, dict[str, Any]] = {409: {"description": "a run of this pipeline that the dashboard started is still running"}}


def _started(response: Response, run: BackgroundRun) -> dict[str, Any]:
    """A run just started: 202, its JSON, and where to follow it (``Location`` and ``status_url``)."""
    response.headers["Location"] = url = _run_url(run.id)
    return {**run.to_json(), "status_url": url}


def _run_url(run_id: int) -> str:
    return f"/api/runs/{run_id}"


@router.post(
    "/pipelines/{name}/rerun", status_code=202, summary="vardiya pipeline rerun PIPE --task T --json, in the background",
    dependencies=[Depends(require_token)], responses=_BUSY,
)
def api_pipeline_rerun(
    request: Request, response: Response, name: Annotated[str, Path(max_length=TEXT_MAX)], body: RerunRequest,
) -> dict[str, Any]:
    """Start invalidating the task and everything downstream of it and running exactly that set, in the
    server's background: 202 with the run (follow ``status_url``, ``GET /api/runs/ID``, until its
    ``phase`` is ``done`` or ``failed``; a done run's ``result`` is ``pipeline rerun --json``). An
    unknown task is 400 before anything starts; 409 while another run of the pipeline that this
    dashboard started runs."""
    ui = _known_pipeline(request, name)
    reports.pipeline_impact_document(ui.app, name, body.task)  # an unknown task: 400, and no run started
    run = ui.runs.start(name, "rerun", body.task, lambda: reports.pipeline_rerun_document(ui.store, ui.app, name, body.task))
    return _started(response, run)


@router.post(
    "/pipelines/{name}/resume", status_code=202, summary="vardiya pipeline resume PIPE --json, in the background",
    dependencies=[Depends(require_token)], responses=_BUSY,
)
def api_pipeline_resume(request: Request, response: Response, name: Annotated[str, Path(max_length=TEXT_MAX)]) -> dict[str, Any]:
    """Start running the pipeline's last run's failed, blocked and never-run tasks (the list of
    ``resume-preview``) in the server's background: 202 with the run, as a rerun. Nothing to resume is
    400 before anything starts; 409 while another run of the pipeline that this dashboard started runs."""
    ui = _known_pipeline(request, name)
    reports.pipeline_resume_preview_document(ui.store, ui.app, name)  # no run to resume: 400, and no run started
    run = ui.runs.start(name, "resume", None, lambda: reports.pipeline_resume_document(ui.store, ui.app, name))
    return _started(response, run)


@router.get(
    "/runs/{run_id}", summary="a rerun or resume this dashboard started",
    responses={404: {"description": "this dashboard started no such run, or has forgotten it"}},
)
def api_run(request: Request, run_id: Annotated[int, Path(ge=1, le=ID_MAX)]) -> dict[str, Any]:
    """The run's ``phase`` (``running``, ``done`` or ``failed``), its ``result`` once done (the CLI's
    ``pipeline rerun`` or ``resume --json``) or its ``error`` once failed. The server keeps the last
    runs it started; a restart forgets them (the store keeps every run's outcome)."""
    found = context_of(request).runs.get(run_id)
    if found is None:
        raise HTTPException(404, f"this dashboard started no run {run_id} (or has forgotten it)")
    return {**found.to_json(), "status_url": _run_url(run_id)}


@router.get("/slots/{job}/report", summary="vardiya slots report JOB --period P --json")
def api_slot_report(
    request: Request, job: Annotated[str, Path(max_length=TEXT_MAX)],
    period: Annotated[str, Query(min_length=1, max_length=60, description="the period key, e.g. 2026-12-01")],
) -> dict[str, Any]:
    """Per-slot load of a slot job in one period, from the ledger."""
    ui = known_slot_job(request, job)
    return reports.slot_report_document(ui.store, ui.app, job, period)


def known_slot_job(request: Request, job: str) -> Any:
    """The context, once ``job`` is known to be one of the app's slot jobs (else 404)."""
    ui = context_of(request)
    if ui.app is None or job not in ui.app.slot_jobs:
        raise HTTPException(404, f"no slot job {job!r} in the dashboard's app")
    return ui


Period = Annotated[str, Query(min_length=1, max_length=60, description="the period key, e.g. 2026-12-01")]


@router.get("/slots/{job}", summary="a slot job's page: two periods' ledger by slot, its status entry, its next ticks")
def api_slot_job(
    request: Request, job: Annotated[str, Path(max_length=TEXT_MAX)],
    period: Annotated[str | None, Query(min_length=1, max_length=60, description="the period shown (default: the current one)")] = None,
    ticks: Annotated[int, Query(ge=1, le=NEXT_TICKS_MAX, description="how many next ticks to list")] = NEXT_TICKS,
) -> dict[str, Any]:
    """The slot job page's data: ``periods`` (the current period, or ``period``, then the one before it:
    each ``slots report --json``), its ``vardiya status --json`` entry, the not-done records of its
    closed periods, and ``next_ticks`` (planned time in the job's zone and in UTC, period, slot), as the
    scheduler plans them."""
    ui = known_slot_job(request, job)
    return slot_job_document(ui.store, ui.app, job, reports.status_document(ui.store, ui.app), period=period, ticks=ticks)


@router.get("/slots/{job}/balance", summary="vardiya slots balance --slots B --assign A --json, of the job's ids")
def api_slot_balance(request: Request, job: Annotated[str, Path(max_length=TEXT_MAX)]) -> dict[str, Any]:
    """How evenly the job's source fills its scheme's slots, what patterns its ids share with B, mod or hash."""
    ui = known_slot_job(request, job)
    return reports.slot_balance_document(ui.app, job)


@router.get("/slots/{job}/backfill-preview", summary="vardiya slots backfill JOB --period P --dry-run --json")
def api_backfill_preview(
    request: Request, job: Annotated[str, Path(max_length=TEXT_MAX)], period: Period,
) -> dict[str, Any]:
    """The not-done records of a closed period, per slot: what a backfill would run (nothing is written)."""
    ui = known_slot_job(request, job)
    return reports.backfill_preview_document(ui.store, ui.app, job, period)


@router.get("/slots/{job}/ticks/{period}/{slot}", summary="one tick: its slot's records, outcomes and errors")
def api_tick(
    request: Request, job: Annotated[str, Path(max_length=TEXT_MAX)],
    period: Annotated[str, Path(min_length=1, max_length=60)], slot: Annotated[int, Path(ge=0, le=1_000_000)],
    limit: Annotated[int, Query(ge=1, le=reports.TICK_RECORDS_MAX)] = 200,
) -> dict[str, Any]:
    """The tick's window and the ledger's counts, and its records (failed first) with their last failures."""
    ui = known_slot_job(request, job)
    return reports.tick_document(ui.store, ui.app, job, period, slot, limit=limit)


_KIND_HELP = "slot_job, handler, periodic, pipeline or trigger: needed when two kinds share NAME"


class PauseRequest(BaseModel):
    """``vardiya pause``'s NAME and options."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=TEXT_MAX, description="a slot job, handler, periodic function, pipeline or PIPELINE:TRIGGER")
    kind: str | None = Field(default=None, max_length=40, description=_KIND_HELP)
    reason: str | None = Field(default=None, max_length=REASON_MAX, description="why, shown by vardiya status")


class ResumeRequest(BaseModel):
    """``vardiya resume``'s NAME and options."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=TEXT_MAX)
    kind: str | None = Field(default=None, max_length=40, description=_KIND_HELP)


class TriggerRequest(ResumeRequest):
    """``vardiya trigger``'s NAME and options."""

    at: str | None = Field(default=None, max_length=60, description="the planned time, or a partition key of a trigger")


@router.get("/controls", summary="the app's entries (vardiya app show), each with its pause")
def api_controls(request: Request) -> dict[str, Any]:
    """What can be paused, resumed and triggered, and what is paused now."""
    ui = context_of(request)
    return reports.controls_document(ui.store, ui.app)


@router.post("/pause", summary="vardiya pause NAME --json", dependencies=[Depends(require_token)])
def api_pause(request: Request, body: PauseRequest) -> dict[str, Any]:
    """Pause NAME: schedulers fire none of its runs, workers claim none of its items, until resumed."""
    ui = context_of(request)
    return reports.pause_document(ui.store, ui.app, body.name, kind=body.kind, reason=body.reason)


@router.post("/resume", summary="vardiya resume NAME --json", dependencies=[Depends(require_token)])
def api_resume(request: Request, body: ResumeRequest) -> dict[str, Any]:
    """Resume NAME: its queued items run again, its schedule's catch-up policy decides the missed runs."""
    ui = context_of(request)
    return reports.resume_document(ui.store, ui.app, body.name, kind=body.kind)


@router.post("/trigger", summary="vardiya trigger NAME --json", dependencies=[Depends(require_token)])
def api_trigger(request: Request, body: TriggerRequest) -> dict[str, Any]:
    """Queue a run of NAME for the workers now, as the scheduler would fire it (the same run is queued once)."""
    ui = context_of(request)
    return reports.trigger_document(ui.store, ui.app, body.name, kind=body.kind, at=body.at)


PlanPath = Annotated[str, Query(min_length=1, max_length=1_000, description="a file under the dashboard's working directory")]
Policy = Annotated[str | None, Query(pattern="^(retry_batch|bisect|report_failures)$")]


def plan_sizes(
    sizes: Annotated[str | None, Query(max_length=1_000, description="batch sizes, e.g. 1,10,100 (default: the profile's)")] = None,
) -> list[int] | None:
    """``--sizes N,N,...``, read as ``vardiya plan batch-sweep`` reads it."""
    if not sizes:
        return None
    found = []
    for part in sizes.split(","):
        try:
            found.append(int(part.strip()))
        except ValueError:
            raise InvalidInput(f"sizes takes whole numbers separated by commas, e.g. 1,10,100; got {part.strip()!r}") from None
    return found


@router.get("/plan/batch-sweep", summary="vardiya plan batch-sweep --workload W --profile P --json")
def api_plan_sweep(
    request: Request, workload: PlanPath, profile: PlanPath,
    sizes: Annotated[list[int] | None, Depends(plan_sizes)] = None, policy: Policy = None,
) -> dict[str, Any]:
    """One stream replay per batch size: the cheapest that fits the limit, and the fastest."""
    return reports.sweep_document(context_of(request).root, workload, profile, sizes=sizes, policy=policy)


@router.get("/plan/compare", summary="vardiya plan compare --workload W --profile P --json")
def api_plan_compare(
    request: Request, workload: PlanPath, profile: PlanPath,
    batch_size: Annotated[int | None, Query(ge=1, le=1_000_000)] = None, dedup: bool = False,
) -> dict[str, Any]:
    """The three models side by side, and the stream's failure policies against each other."""
    return reports.compare_document(context_of(request).root, workload, profile, batch_size=batch_size, dedup=dedup)
