"""The documents the dashboard shows: each one the ``--json`` document of a CLI command, built by the
same engine functions from the same options, so a page, ``/api/...`` and the command never disagree.

=====================================  =========================================
function                               the command whose ``--json`` it is
=====================================  =========================================
``status_document``                    ``vardiya status``
``errors_document``                    ``vardiya errors``
``dead_letters_document``              ``vardiya dlq list``
``dead_letter_document``               ``vardiya dlq show ID``
``redrive_document``                   ``vardiya dlq redrive [--dry-run]``
``purge_document``                     ``vardiya dlq purge [--dry-run]``
``handler_metrics_document``           ``vardiya invoke metrics HANDLER``
``pipeline_status_document``           ``vardiya pipeline status PIPE``
``slot_report_document``               ``vardiya slots report JOB --period P``
``pipeline_impact_document``           ``vardiya pipeline impact PIPE --task T``
``pipeline_rerun_document``            ``vardiya pipeline rerun PIPE --task T``
``pipeline_resume_preview_document``   ``vardiya pipeline resume PIPE --dry-run``
``pipeline_resume_document``           ``vardiya pipeline resume PIPE``
``slot_balance_document``              ``vardiya slots balance --slots B --assign A --ids IDS``
                                       (B, A and IDS the job's scheme and source)
``backfill_preview_document``          ``vardiya slots backfill JOB --period P --dry-run``
``pause_document``                     ``vardiya pause NAME [--kind K] [--reason R]``
``resume_document``                    ``vardiya resume NAME [--kind K]``
``trigger_document``                   ``vardiya trigger NAME [--kind K] [--at PLANNED]``
``controls_document``                  ``vardiya app show`` (the entries), each with its pause
``sweep_document``                     ``vardiya plan batch-sweep --workload W --profile P``
``compare_document``                   ``vardiya plan compare --workload W --profile P``
=====================================  =========================================

``handlers_document`` has no single command: it is ``invoke metrics`` for each async and stream
handler of the app, in one list. ``tick_document`` neither: it is one tick's slot from the ledger
(the outcomes ``slots report`` counts) with each failed record's last failure (what ``vardiya errors``
lists). ``tests/acceptance/test_ui_api.py`` compares each with the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..app import App
from ..catalog import Entry, EntryKind, catalog, resolve
from ..errors import InvalidInput
from ..invoke import dlq as letters
from ..invoke.handlers import Model
from ..invoke.metrics import store_metrics
from ..pipeline import descendant_counts, rerun, resume, resume_preview, task_impact
from ..pipeline import status as pipeline_status
from ..pipeline.graph import TaskGraph
from ..pipeline.grid import grid_svg
from ..plan.compare import Comparison, compare
from ..plan.profile import Profile, load_profile
from ..plan.replay import check_batch_size
from ..plan.sweep import Sweep, sweep, sweep_chart_svg
from ..plan.workload import Workload, load_workload
from ..schedule.pipelines import ScheduledPipeline
from ..service.manual import manual_run, queue_manual_run
from ..service.status import status_report
from ..slots.backfill import backfill
from ..slots.balance import balance
from ..slots.chart import bar_chart_svg, report_chart_svg
from ..slots.closed import CLOSED_PERIODS
from ..slots.job import SlotJob
from ..slots.report import LedgerReport, ledger_report
from ..slots.sources import IterableSource
from ..store import LedgerStatus, Store
from ..store.failures import FailureFamily
from ..store.pipeline_reads import PipelineReads
from ..store.ui_reads import task_failures, tick_counts, tick_records
from ..times import parse_duration, parse_time

__all__ = [
    "ERRORS_LIMIT_MAX",
    "TICK_RECORDS_MAX",
    "LetterFilter",
    "PLAN_SIZES_MAX",
    "backfill_preview_document",
    "compare_chart_svg",
    "compare_document",
    "compare_of",
    "plan_compare",
    "plan_inputs",
    "plan_sweep",
    "sweep_of",
    "sweep_document",
    "controls_document",
    "pause_document",
    "resume_document",
    "trigger_document",
    "dead_letter_document",
    "dead_letters_document",
    "errors_document",
    "handler_metrics_document",
    "handlers_document",
    "pipeline_grid",
    "pipeline_impact_document",
    "pipeline_rerun_document",
    "pipeline_resume_document",
    "pipeline_resume_preview_document",
    "pipeline_status_document",
    "pipeline_task_document",
    "purge_document",
    "redrive_document",
    "slot_balance_document",
    "slot_report",
    "slot_report_document",
    "status_document",
    "tick_document",
]

#: The most failures one listing shows (as ``vardiya errors --limit``).
ERRORS_LIMIT_MAX = 10_000
#: The most records a tick's page lists (failed first); its counts cover them all.
TICK_RECORDS_MAX = 5_000


def status_document(
    store: Store, app: App | None, *, late_after_s: float = 60.0, closed_periods: int = CLOSED_PERIODS
) -> dict[str, Any]:
    """``vardiya status --json``."""
    if late_after_s < 0:
        raise InvalidInput(f"late_after_s must be 0 or more seconds, got {late_after_s}")
    if closed_periods < 0:
        raise InvalidInput(f"closed_periods must be 0 or more, got {closed_periods}")
    return status_report(store, app, late_after=timedelta(seconds=late_after_s), closed_periods=closed_periods)


def _since(text: str | None, now: datetime) -> datetime | None:
    """An ISO 8601 time (naive = UTC) or a duration back from now (``2h``, ``1d``), as ``errors --since``."""
    if text is None:
        return None
    if text[:1].isdigit() and not any(mark in text for mark in "-:T"):
        return now - parse_duration(text, what="since")
    return parse_time(text, tz="UTC", what="since")


def errors_document(
    store: Store, *, job: str | None = None, handler: str | None = None, pipeline: str | None = None,
    since: str | None = None, limit: int = 20,
) -> dict[str, Any]:
    """``vardiya errors --json``: failures newest first, with their tracebacks."""
    given = [(family, name) for family, name in (
        (FailureFamily.JOB, job), (FailureFamily.HANDLER, handler), (FailureFamily.PIPELINE, pipeline),
    ) if name is not None]
    if len(given) > 1:
        raise InvalidInput("give at most one of job, handler and pipeline")
    if not 1 <= limit <= ERRORS_LIMIT_MAX:
        raise InvalidInput(f"limit {limit} is out of range; give a number from 1 to {ERRORS_LIMIT_MAX}")
    family, name = given[0] if given else (None, None)
    moment = _since(since, store.clock.now())
    found = store.failures.listing(family=family, name=name, since=moment, limit=limit)
    return {"failures": [failure.to_json() for failure in found], "limit": limit}


@dataclass(frozen=True, kw_only=True)
class LetterFilter:
    """Which dead letters a listing, a redrive or a purge is about (the ``dlq`` commands' filters)."""

    handler: str | None = None
    older_than: str | None = None
    error: str | None = None
    ids: Sequence[int] = ()

    @property
    def older_than_s(self) -> float | None:
        """``older_than`` (``72h``) in seconds; a bad duration is an ``InvalidInput``."""
        if self.older_than is None:
            return None
        return parse_duration(self.older_than, what="older_than").total_seconds()

    @property
    def empty(self) -> bool:
        """Whether nothing narrows the selection (a purge refuses that)."""
        return not (self.handler or self.older_than or self.error or self.ids)

    def query(self) -> dict[str, Any]:
        """The filter as query parameters, for links and forms that carry it on."""
        found: dict[str, Any] = {}
        for name in ("handler", "older_than", "error"):
            value = getattr(self, name)
            if value:
                found[name] = value
        if self.ids:
            found["id"] = list(self.ids)
        return found


def dead_letters_document(store: Store, chosen: LetterFilter) -> dict[str, Any]:
    """``vardiya dlq list --json``."""
    found = letters.dead_letters(
        store, handler=chosen.handler, older_than_s=chosen.older_than_s, error=chosen.error, ids=chosen.ids or None
    )
    return {"dead_letters": [letter.to_json() for letter in found], "total": len(found),
            "records": sum(letter.records for letter in found)}


def dead_letter_document(store: Store, item_id: int) -> dict[str, Any]:
    """``vardiya dlq show ID --json``: records, every attempt with its traceback, handler calls."""
    document = letters.show(store, item_id)
    for attempt, text in zip(document["history"], store.failures.attempt_tracebacks(item_id), strict=False):
        attempt["traceback"] = text
    return document


def redrive_document(
    store: Store, chosen: LetterFilter, *, rate_per_s: float | None = None, max_attempts: int | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """``vardiya dlq redrive --json``; with ``dry_run`` the preview: how many records already succeeded."""
    age = chosen.older_than_s
    letters.check_redrive(rate_per_s=rate_per_s, max_attempts=max_attempts)
    report = letters.redrive(
        store, handler=chosen.handler, older_than_s=age, error=chosen.error, ids=chosen.ids or None,
        rate_per_s=rate_per_s, max_attempts=max_attempts, dry_run=dry_run,
    )
    return report.to_json()


def purge_document(store: Store, chosen: LetterFilter, *, dry_run: bool = False) -> dict[str, Any]:
    """``vardiya dlq purge --json``; refuses an empty filter, as the command does (it deletes for good)."""
    if chosen.empty:
        raise InvalidInput("purge deletes for good: name what to purge with handler, older_than, error or id")
    age = chosen.older_than_s
    return dict(letters.purge(
        store, handler=chosen.handler, older_than_s=age, error=chosen.error, ids=chosen.ids or None, dry_run=dry_run
    ))


def handler_metrics_document(
    store: Store, app: App, name: str, *, model: str | None = None, since: str | None = None
) -> dict[str, Any]:
    """``vardiya invoke metrics HANDLER --json``."""
    handler = app.get_handler(name)
    if model is not None and model not in (Model.ASYNC.value, Model.STREAM.value):
        raise InvalidInput(f"model must be async or stream, got {model!r}")
    if model is None and handler.model is Model.SYNC:
        raise InvalidInput(f"handler {name!r} is sync, which leaves no metrics in the store; pass model async or stream")
    start = parse_time(since, tz="UTC", what="since") if since else None
    return store_metrics(store, handler.with_model(model) if model else handler, since=start).to_json()


def handlers_document(store: Store, app: App | None) -> dict[str, Any]:
    """The metrics of every async and stream handler of the app (sync ones leave none in the store)."""
    if app is None:
        return {"handlers": []}
    return {"handlers": [
        handler_metrics_document(store, app, name)
        for name in sorted(app.handlers) if app.handlers[name].model is not Model.SYNC
    ]}


def _pipeline(app: App | None, name: str) -> ScheduledPipeline:
    if app is None:
        raise InvalidInput("the dashboard was started without --app, so it knows no pipelines")
    return app.get_pipeline(name)


def pipeline_graph(app: App | None, name: str) -> TaskGraph:
    """The task graph the app built at load for one of its pipelines (every request shares it)."""
    return _pipeline(app, name).graph


def pipeline_status_document(store: Store, app: App | None, name: str) -> dict[str, Any]:
    """``vardiya pipeline status PIPE --json`` for a pipeline of the app (its graph built once, at load)."""
    return pipeline_status(store, _pipeline(app, name).graph).to_json()


def pipeline_view(store: Store, app: App | None, name: str) -> tuple[dict[str, Any], str]:
    """The status document and the grid of one pipeline from one read of its tasks (a page shows both)."""
    graph = _pipeline(app, name).graph
    current = pipeline_status(store, graph)
    grid = grid_svg(graph, current.tasks, title=f"pipeline {graph.pipeline}: task states", stale=current.stale)
    return current.to_json(), grid


def pipeline_grid(store: Store, app: App | None, name: str) -> str:
    """The stage x partition grid coloured by state, the SVG of ``pipeline status --plot``."""
    return pipeline_view(store, app, name)[1]


def pipeline_impact_document(app: App | None, name: str, task: str) -> dict[str, Any]:
    """``vardiya pipeline impact PIPE --task T --json``: the blast radius and the exact rerun list."""
    graph = _pipeline(app, name).graph
    if task not in graph.names:
        raise InvalidInput(f"pipeline {name!r} has no task {task!r}; a task is STAGE@PARTITION")
    return task_impact(graph, task).to_json()


def pipeline_rerun_document(store: Store, app: App | None, name: str, task: str) -> dict[str, Any]:
    """``vardiya pipeline rerun PIPE --task T --json``, with the app's root, concurrency and strictness."""
    entry = _pipeline(app, name)
    pipeline_impact_document(app, name, task)  # an unknown task is refused before anything is written
    return rerun(store, entry.pipeline, task, root=entry.root, concurrency=entry.concurrency, strict=entry.strict).to_json()


def pipeline_resume_preview_document(store: Store, app: App | None, name: str) -> dict[str, Any]:
    """``vardiya pipeline resume PIPE --dry-run --json`` (the exact task list, planned as the resume
    plans it), with each failed task of that list and its blast radius: what the resume retries first."""
    graph = _pipeline(app, name).graph
    document = resume_preview(store, graph).to_json()
    # Every task's blast radius, counted once per graph (the graph never changes): a walk per failed
    # task costs the size of its blast radius, which a fan-out makes the whole pipeline.
    counts, ids = graph.derived(descendant_counts, descendant_counts), graph.ids
    document["failed"] = [{"task": task, "blast_radius": counts[ids[task]]} for task in document["failed"]]
    return document


def pipeline_resume_document(store: Store, app: App | None, name: str) -> dict[str, Any]:
    """``vardiya pipeline resume PIPE --json``: the last run's failed, blocked and never-run tasks."""
    return resume(store, _pipeline(app, name).graph).to_json()


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def pipeline_task_document(store: Store, app: App | None, name: str, task: str) -> dict[str, Any]:
    """One task: its state and checkpoint, every attempt (rows, error), what it read, its failures'
    tracebacks and its blast radius (no single command prints all of it; each part is one's)."""
    impact = pipeline_impact_document(app, name, task)
    reads = PipelineReads(store, name)
    record = reads.task(task)
    return {
        "pipeline": name,
        "task": task,
        "state": record.state.value if record else "pending",
        "rows": record.rows if record else None,
        "output_path": record.output_path if record else None,
        "materialized_at": _time(record.materialized_at) if record else None,
        "error": record.error if record else None,
        "attempts": [
            {"run_id": each.run_id, "attempt": each.attempt, "state": each.state.value, "started_at": _time(each.started_at),
             "finished_at": _time(each.finished_at), "rows": each.rows, "error": each.error}
            for each in reads.history(task=task)
        ],
        "reads": [{"run_id": each.run_id, "read": each.read_task, "declared": each.declared} for each in reads.reads(task=task)],
        "failures": [failure.to_json() for failure in task_failures(store, name, task)],
        "impact": impact,
    }


def _slot_job(app: App | None, job_name: str) -> SlotJob:
    if app is None:
        raise InvalidInput("the dashboard was started without --app, so it knows no slot jobs")
    return app.get_slot_job(job_name)


def slot_report(store: Store, app: App | None, job_name: str, period: str) -> LedgerReport:
    """The per-slot ledger report of a job's period (a bad period key is an ``InvalidInput``)."""
    job = _slot_job(app, job_name)
    job.scheme.period_for_key(period)  # a bad key is refused before the store is read
    return ledger_report(store, job, period)


def slot_report_document(store: Store, app: App | None, job_name: str, period: str) -> dict[str, Any]:
    """``vardiya slots report JOB --period P --json``."""
    return slot_report(store, app, job_name, period).to_json()


def slot_report_chart(report: LedgerReport) -> str:
    """The bar chart of ``slots report --plot``, as SVG text."""
    return report_chart_svg(report)


def slot_balance_document(app: App | None, job_name: str) -> dict[str, Any]:
    """``vardiya slots balance --json`` of the job's own ids (its source's) under its current scheme."""
    job = _slot_job(app, job_name)
    if isinstance(job.source, IterableSource):
        return job.source.balance(job.scheme).to_json()  # kept per scheme: the ids never change
    return balance(job.source.all_ids(), job.scheme).to_json()


def backfill_preview_document(store: Store, app: App | None, job_name: str, period: str) -> dict[str, Any]:
    """``vardiya slots backfill JOB --period P --dry-run --json``: a closed period's not-done records per
    slot (a period not closed yet is refused, as the command refuses it)."""
    job = _slot_job(app, job_name)
    job.scheme.period_for_key(period)
    return backfill(store, job, period, dry_run=True).to_json()


def tick_document(
    store: Store, app: App | None, job_name: str, period: str, slot: int, *, limit: int = 200
) -> dict[str, Any]:
    """One tick of a job: its slot of one period, the slot's window, the ledger's counts and its records
    (failed first, at most ``limit``) with their outcomes, errors and last failures' tracebacks."""
    job = _slot_job(app, job_name)
    found = job.scheme.period_for_key(period)
    scheme = job.scheme_for(found)
    if not 0 <= slot < scheme.slots:
        raise InvalidInput(f"slot {slot} is out of range; job {job_name!r} has slots 0 to {scheme.slots - 1} in period {period}")
    if not 1 <= limit <= TICK_RECORDS_MAX:
        raise InvalidInput(f"limit {limit} is out of range; give a number from 1 to {TICK_RECORDS_MAX}")
    window = scheme.window(found, slot)
    counts = tick_counts(store, job.name, found.key, slot)
    records = tick_records(store, job.name, found.key, slot, limit=limit)
    recorded = sum(counts.values())
    return {
        "job": job.name,
        "period": found.key,
        "slot": slot,
        "window_start": window.start.isoformat(),
        "window_end": window.end.isoformat(),
        "closes_at": job.closes_at(found).isoformat(),
        "counts": {status.value: counts.get(status, 0) for status in LedgerStatus},
        "recorded": recorded,
        "records": [record.to_json() for record in records],
        "limit": limit,
        "truncated": recorded > len(records),
    }


def _entry(app: App | None, name: str, kind: str | None) -> Entry:
    """NAME resolved as ``vardiya pause/resume/trigger`` resolve it (a name two kinds share needs kind)."""
    if app is None:
        raise InvalidInput("the dashboard was started without --app, so it knows nothing to pause, resume or trigger")
    return resolve(app, name, EntryKind.parse(kind) if kind is not None else None)


def _change_document(entry: Entry, change: Any, paused: bool) -> dict[str, Any]:
    pause = change.pause
    return {
        "kind": entry.kind.control.value, "name": entry.name, "changed": change.changed,
        "paused": paused, "pause": None if pause is None else pause.to_json(),
    }


def pause_document(
    store: Store, app: App | None, name: str, *, kind: str | None = None, reason: str | None = None
) -> dict[str, Any]:
    """``vardiya pause NAME --json``: schedulers fire none of its runs, workers claim none of its items."""
    entry = _entry(app, name, kind)
    return _change_document(entry, store.controls.pause(entry.kind.control, entry.name, reason=reason), True)


def resume_document(store: Store, app: App | None, name: str, *, kind: str | None = None) -> dict[str, Any]:
    """``vardiya resume NAME --json``."""
    entry = _entry(app, name, kind)
    return _change_document(entry, store.controls.resume(entry.kind.control, entry.name), False)


def trigger_document(
    store: Store, app: App | None, name: str, *, kind: str | None = None, at: str | None = None
) -> dict[str, Any]:
    """``vardiya trigger NAME --json``: the run a scheduler would fire, queued for the workers now (the
    same run twice is queued once; something paused is refused)."""
    entry = _entry(app, name, kind)
    assert app is not None
    run = manual_run(app, entry.kind.control, entry.name, at, store.clock.now())  # bad at: nothing written
    queued = queue_manual_run(store, run)
    item = queued.item
    assert item is not None
    return {**run.to_json(), "queued": queued.new, "item": item.id, "state": item.state.value}


#: The kinds a manual run exists for (``vardiya trigger``); handlers run on submit, pipelines by trigger.
TRIGGERED_KINDS = frozenset({EntryKind.SLOT_JOB, EntryKind.PERIODIC, EntryKind.TRIGGER})


def controls_document(store: Store, app: App | None) -> dict[str, Any]:
    """Every entry of the app (``vardiya app show``'s), each with its pause if it is paused and whether
    ``trigger`` can run it by hand."""
    if app is None:
        return {"entries": []}
    pauses = {(pause.kind, pause.name): pause for pause in store.controls.paused()}
    entries = []
    for entry in catalog(app):
        pause = pauses.get((entry.kind.control, entry.name))
        entries.append({
            **entry.to_json(), "control": entry.kind.control.value, "paused": pause is not None,
            "pause": None if pause is None else pause.to_json(), "triggerable": entry.kind in TRIGGERED_KINDS,
        })
    return {"entries": entries}


#: The most batch sizes one sweep replays from the dashboard (each is one replay of the workload).
PLAN_SIZES_MAX = 50


def under_root(root: Path, given: str, what: str) -> Path:
    """``given`` (relative to ``root``, or absolute) if it names a file under ``root``, else ``InvalidInput``:
    the dashboard reads server-side files for the planner only below the directory it was started in,
    so a request cannot make it read (and echo parts of) any other file of the machine."""
    if not given or "\x00" in given:
        raise InvalidInput(f"{what} is empty; give a path under {root}")
    base = root.resolve()
    found = (base / given).resolve()
    if not found.is_relative_to(base):
        raise InvalidInput(f"{what} {given!r} is outside the dashboard's working directory {base}; give a path under it")
    if not found.is_file():
        raise InvalidInput(f"{what} {given!r} is not a file under {base}")
    return found


def plan_inputs(root: Path, workload: str, profile: str) -> tuple[Workload, Profile]:
    """The profile first (as ``vardiya plan`` reads them: its errors are the likelier ones), then the workload."""
    profile_path = under_root(root, profile, "profile")
    workload_path = under_root(root, workload, "workload")
    return load_workload(workload_path), load_profile(profile_path)


def _sizes(sizes: Sequence[int] | None) -> list[int] | None:
    if not sizes:
        return None
    if len(sizes) > PLAN_SIZES_MAX:
        raise InvalidInput(f"give at most {PLAN_SIZES_MAX} batch sizes, got {len(sizes)}")
    return [check_batch_size(size, "every one of sizes") for size in sizes]


def plan_sweep(root: Path, workload: str, profile: str, *, sizes: Sequence[int] | None = None,
               policy: str | None = None) -> Sweep:
    """One stream replay per batch size, as ``vardiya plan batch-sweep`` replays them."""
    chosen = _sizes(sizes)
    return sweep_of(plan_inputs(root, workload, profile), sizes=chosen, policy=policy)


def sweep_of(inputs: tuple[Workload, Profile], *, sizes: Sequence[int] | None = None, policy: str | None = None) -> Sweep:
    """``plan_sweep`` of a workload and profile already read (from files or uploads)."""
    loaded, costs = inputs
    return sweep(loaded, costs, sizes=_sizes(sizes), policy=policy)


def sweep_document(root: Path, workload: str, profile: str, *, sizes: Sequence[int] | None = None,
                   policy: str | None = None) -> dict[str, Any]:
    """``vardiya plan batch-sweep --json`` (without ``--plot``: the page draws the chart itself)."""
    return plan_sweep(root, workload, profile, sizes=sizes, policy=policy).to_json()


def plan_compare(root: Path, workload: str, profile: str, *, batch_size: int | None = None, dedup: bool = False) -> Comparison:
    """The three models and the stream's policies, as ``vardiya plan compare`` replays them."""
    size = None if batch_size is None else check_batch_size(batch_size, "batch_size")
    return compare_of(plan_inputs(root, workload, profile), batch_size=size, dedup=dedup)


def compare_of(inputs: tuple[Workload, Profile], *, batch_size: int | None = None, dedup: bool = False) -> Comparison:
    """``plan_compare`` of a workload and profile already read (from files or uploads)."""
    loaded, costs = inputs
    size = None if batch_size is None else check_batch_size(batch_size, "batch_size")
    return compare(loaded, costs, batch_size=size, dedup=dedup)


def compare_document(root: Path, workload: str, profile: str, *, batch_size: int | None = None,
                     dedup: bool = False) -> dict[str, Any]:
    """``vardiya plan compare --json``."""
    return plan_compare(root, workload, profile, batch_size=batch_size, dedup=dedup).to_json()


def sweep_chart(result: Sweep) -> str:
    """The chart of ``plan batch-sweep --plot``."""
    return sweep_chart_svg(result)


def compare_chart_svg(result: Comparison) -> str:
    """The models and the stream's policies side by side (cost, caller wait, completion p99, dead
    letters), drawn as the sweep's chart is; a row that cannot fit the time limit in red."""
    rows = [*result.models, *(row for row in result.policies if all(row is not model for model in result.models))]
    labels = [row.model.value if row.policy is None else f"stream {row.policy.value}" for row in rows]
    return bar_chart_svg(
        f"models and stream policies compared (stream batch size {result.batch_size})",
        labels,
        {
            "cost": [row.cost for row in rows],
            "caller wait (ms)": [row.metrics.caller_wait_ms or 0.0 for row in rows],
            "completion p99 (s)": [row.metrics.completion_p99_ms / 1000 for row in rows],
            "dead letters": [float(row.metrics.dead_letter) for row in rows],
        },
        highlight=[index for index, row in enumerate(rows) if not row.fits_limit],
        highlight_label="cannot fit the time limit",
        x_label="model",
    )
