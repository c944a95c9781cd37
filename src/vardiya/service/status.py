"""``vardiya status``: what is due, late, running, failed and dead, per family of work and per job.

Read-only. From the store alone it tells the work items per family (tick, pipeline, call, batch) and
state: *due* is ready and past its run_after but not started, *late* is due for longer than
``late_after`` (workers are missing or behind), *failed* is waiting for a retry, *dead* needs a person
(``vardiya dlq``). A job is *behind* when a tick that should have been fired has not been for longer
than ``late_after``: no scheduler is running, or none keeps up. With the app it adds, per slot job, the schedule (planned through, next tick, ticks
fired and passed by), the last tick, the start lateness of recent ticks (p50 / p99), and the ledger of
the current period; per pipeline, its tasks by state and each trigger's progress.

It also says what is paused (``vardiya pause``: ``paused``, each with when and why) and which
schedulers and workers are running (``services``: their heartbeats, each ``alive`` while its last beat
is within three of its intervals). A pause is not unhealthy (someone chose it), and neither is a
service that stopped beating: ``behind`` and ``late`` already say when the work suffers from it.

It is unhealthy (``healthy`` false, ``reasons`` saying why; ``vardiya status`` exits 1) when an item is
late or dead, a job is behind, or a slot job has *not-done* records in a period closed for good (beyond
the reach of every tick's backlog, ``slots.closed``; the latest ``closed_periods`` periods are looked
at): those records will never run unless ``vardiya slots backfill`` runs them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..invoke.metrics import percentile
from ..pipeline.state import status as pipeline_status
from ..schedule.plan import TICK_PREFIX, TickSchedule, tick_kind
from ..slots.closed import CLOSED_PERIODS, not_done_report
from ..store.records import ItemState, LedgerStatus
from .metrics import family_of

if TYPE_CHECKING:
    from ..app import App
    from ..store.api import Store

__all__ = ["RECENT_TICKS", "status_report"]

#: How many of a job's latest ticks the lateness figures cover.
RECENT_TICKS = 100
_STATES = [state.value for state in ItemState]


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def status_report(
    store: Store, app: App | None = None, *, late_after: timedelta = timedelta(seconds=60),
    closed_periods: int = CLOSED_PERIODS,
) -> dict[str, Any]:
    """The document of ``vardiya status --json``; ``healthy`` is false when ``reasons`` is not empty."""
    now = store.clock.now()
    families: dict[str, dict[str, int]] = {}

    def family(name: str) -> dict[str, int]:
        return families.setdefault(name, {**dict.fromkeys(_STATES, 0), "due": 0, "late": 0})

    late_items: list[dict[str, Any]] = []
    for (kind, state), count in store.items.counts_by_kind().items():
        family(family_of(kind))[state.value] += count
    for kind, count in store.items.due_by_kind(now).items():
        family(family_of(kind))["due"] += count
    for kind, count in store.items.due_by_kind(now - late_after).items():
        family(family_of(kind))["late"] += count
    for row in store.items.due_items(now - late_after, limit=20):
        late_items.append({
            "id": row.id, "kind": row.kind, "key": row.key, "due_since": _text(row.run_after),
            "late_s": (now - row.run_after).total_seconds(), "attempts": row.attempts,
        })
    schedules = {state.name: state for state in store.schedules.all()}
    document: dict[str, Any] = {
        "now": now.isoformat(),
        "store": store.url,
        "late_after_s": late_after.total_seconds(),
        "items": families,
        "due": sum(counts["due"] for counts in families.values()),
        "late": sum(counts["late"] for counts in families.values()),
        "running": sum(counts[ItemState.RUNNING.value] for counts in families.values()),
        "failed": sum(counts[ItemState.FAILED.value] for counts in families.values()),
        "dead": sum(counts[ItemState.DEAD.value] for counts in families.values()),
        "late_items": late_items,
        "jobs": [],
        "pipelines": [],
        "schedules": [state.to_json() for state in schedules.values()],
        "paused": [pause.to_json() for pause in store.controls.paused()],
        "services": [service.to_json() for service in store.heartbeats.all()],
    }
    document["services_alive"] = sum(1 for service in document["services"] if service["alive"])
    document["behind"] = []
    document["not_done"] = []
    # Runs over their SLA (``vardiya.sla``): reported, not unhealthy (a miss is an event, not a state).
    document["sla_missed"] = [row.to_json() for row in store.failures.sla_report()]
    if app is not None:
        document["jobs"] = [_job(store, app, name, schedules, now, late_after) for name in sorted(app.slot_jobs)]
        document["pipelines"] = [_pipeline(store, app, name, schedules) for name in sorted(app.pipelines)]
        held = {(pause["kind"], pause["name"]) for pause in document["paused"]}
        for job in document["jobs"]:
            job["paused"] = ("slot_job", job["job"]) in held
        for pipeline in document["pipelines"]:
            pipeline["paused"] = ("pipeline", pipeline["pipeline"]) in held
            for trigger in pipeline["triggers"]:
                trigger["paused"] = pipeline["paused"] or ("trigger", f"{pipeline['pipeline']}:{trigger['trigger']}") in held
        # A tick that should have been fired by now and was not: no scheduler is running (or keeping up).
        # A paused job fires nothing on purpose: it is not behind.
        document["behind"] = [
            job["job"] for job in document["jobs"] if job["behind_s"] > late_after.total_seconds() and not job["paused"]
        ]
        document["not_done"] = [
            entry.to_json()
            for name in sorted(app.slot_jobs)
            for entry in not_done_report(store, app.slot_jobs[name], now, limit=closed_periods)
        ]
    document["reasons"] = reasons(document)
    document["healthy"] = not document["reasons"]
    return document


def reasons(document: dict[str, Any]) -> list[str]:
    """Why a status document is unhealthy, one sentence each (none: healthy)."""
    found = []
    if document["late"]:
        found.append(f"{document['late']} work items due for longer than {document['late_after_s']:g} s (workers missing or behind)")
    if document["dead"]:
        found.append(f"{document['dead']} dead work items (see vardiya dlq list)")
    if document["behind"]:
        found.append(f"due ticks not fired (is a scheduler running?): {', '.join(document['behind'])}")
    for entry in document["not_done"]:
        found.append(
            f"job {entry['job']}: {entry['not_done']:,} records of period {entry['period']} never done and "
            f"beyond the backlog's reach (vardiya slots backfill {entry['job']} --period {entry['period']})"
        )
    return found


def _job(
    store: Store, app: App, name: str, schedules: dict[str, Any], now: datetime, late_after: timedelta
) -> dict[str, Any]:
    job = app.slot_jobs[name]
    schedule = TickSchedule(job)
    state = schedules.get(f"{TICK_PREFIX}{name}")
    through = state.planned_through if state is not None else None
    results = store.items.latest_results(tick_kind(name), limit=RECENT_TICKS)
    lateness = sorted(float(result["lateness_s"]) for result in results if result and "lateness_s" in result)
    period = job.scheme_at(now).period_of(now)
    counts = store.ledger.counts(name, period.key)
    last = results[0] if results else None
    # How long the first tick not yet fired has been due (0: the scheduler is up to date).
    unfired = schedule.next_after(through) if through is not None else None
    behind_s = max(0.0, (now - unfired).total_seconds()) if unfired is not None else 0.0
    return {
        "job": name,
        "planned_through": _text(through),
        "next_tick": _text(schedule.next_after(max(through, now) if through is not None else now)),
        "behind_s": behind_s,
        "fired": state.fired if state is not None else 0,
        "skipped": state.skipped if state is not None else 0,
        "last_tick": last,
        "lateness_p50_s": percentile(lateness, 0.50) if lateness else None,
        "lateness_p99_s": percentile(lateness, 0.99) if lateness else None,
        "lateness_ticks": len(lateness),
        "period": period.key,
        "done": counts[LedgerStatus.DONE],
        "failed_records": counts[LedgerStatus.FAILED],
    }


def _pipeline(store: Store, app: App, name: str, schedules: dict[str, Any]) -> dict[str, Any]:
    entry = app.pipelines[name]
    summary = pipeline_status(store, entry.graph)
    triggers = []
    for trigger in entry.triggers:
        state = schedules.get(f"pipeline:{name}:{trigger.name}")
        triggers.append({
            "trigger": trigger.name, "kind": trigger.kind, "describe": trigger.describe(),
            "fired": state.fired if state is not None else 0,
            "planned_through": _text(state.planned_through) if state is not None else None,
            "checked_at": _text(state.checked_at) if state is not None else None,
        })
    return {
        "pipeline": name,
        "tasks": {state.value: count for state, count in summary.counts.items()},
        "stale": list(summary.stale),
        "triggers": triggers,
    }
