"""``vardiya trigger``: a manual run of a slot job's tick, a periodic function or a pipeline trigger.

A manual run is the work item the scheduler would have enqueued (the same kind, the same payload, so a
worker runs it exactly as a scheduled one), queued to run at once, with a key of its own:

- a slot job: the tick of the slot that holds ``--at`` (default: now), planned at that slot's tick
  (the latest at or before ``--at``, else its first); key ``manual@<planned UTC>``;
- a periodic function: a run planned at ``--at`` (default: now); key ``manual@<planned UTC>``;
- a pipeline trigger: its run for the partition ``--at`` names (a partition key, or a time inside a day
  or month partition; default: the partition the trigger would run now); key ``manual:<trigger>:<partition>``.

The key makes a second trigger of the same run find the first one's item (Airflow refuses a second
run of one logical date alike): it is reported, not run twice. A scheduled tick keeps its own key, so
a manual run never stops the scheduler from firing the planned one. What is paused is refused (resume
it first), checked in the transaction that enqueues (``Controls.queue_unless_paused``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from ..errors import InvalidInput
from ..pipeline.partitions import PartitionKind
from ..schedule.periodic import PeriodicSchedule
from ..schedule.plan import TickSchedule, pipeline_kind, planned_key
from ..schedule.triggers import Cron, PeriodClose, partition_at, partition_window
from ..slots.runner import planned_ticks
from ..store.controls import ControlKind, Queued
from ..times import parse_time

if TYPE_CHECKING:
    from ..app import App
    from ..store.api import Store

__all__ = ["ManualRun", "TriggerRefused", "manual_run", "queue_manual_run"]


@dataclass(frozen=True, kw_only=True)
class ManualRun:
    """The work item of a manual run, and what would hold it (the pauses that refuse it)."""

    of: ControlKind
    name: str
    kind: str
    key: str
    payload: dict[str, Any]
    max_attempts: int
    #: what it runs, as a person reads it: "slot 3 of period 2026-12-01 (tick planned ...)"
    what: str
    holders: tuple[tuple[ControlKind, str], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.of.value, "name": self.name, "item_kind": self.kind, "key": self.key,
            "payload": self.payload, "what": self.what,
        }


class TriggerRefused(InvalidInput):
    """A manual run of something paused: resume it first."""


def _time(text: str | None, tz: str, now: datetime) -> datetime:
    return now if text is None else parse_time(text, tz=tz, what="--at")


def _slot_job(app: App, name: str, at: str | None, now: datetime) -> ManualRun:
    job = app.slot_jobs[name]
    moment = _time(at, job.scheme.tz, now)
    position = job.scheme_at(moment).locate(moment)
    window = position.window
    if not window.exists:
        raise InvalidInput(f"--at {at}: slot {position.slot} of period {position.period.key} has no wall time that day (DST)")
    ticks = list(planned_ticks(job, window.start, window.end))
    earlier = [tick for tick in ticks if tick <= moment]
    planned = (earlier[-1] if earlier else ticks[0]) if ticks else window.start
    firing = TickSchedule(job).firing(planned)
    return ManualRun(
        of=ControlKind.SLOT_JOB, name=name, kind=firing.kind, key=f"manual@{planned_key(planned)}", payload=firing.payload,
        max_attempts=firing.max_attempts, holders=((ControlKind.SLOT_JOB, job.name),),
        what=f"slot {position.slot} of period {position.period.key} (tick planned {firing.payload['planned_at']})",
    )


def _periodic(app: App, name: str, at: str | None, now: datetime) -> ManualRun:
    periodic = app.periodic[name]
    planned = _time(at, periodic.tz, now).astimezone(UTC)
    firing = PeriodicSchedule(periodic).firing(planned)
    return ManualRun(
        of=ControlKind.PERIODIC, name=name, kind=firing.kind, key=f"manual@{planned_key(planned)}", payload=firing.payload,
        max_attempts=firing.max_attempts, holders=((ControlKind.PERIODIC, periodic.name),),
        what=f"a run planned at {firing.payload['planned_at']}",
    )


def _partition(app: App, pipeline: str, trigger_name: str, at: str | None, now: datetime) -> str | None:
    entry = app.pipelines[pipeline]
    trigger = entry.trigger(trigger_name)
    partitions = entry.partitions_of(trigger)
    name = f"{pipeline}:{trigger_name}"
    if partitions.kind is PartitionKind.UNPARTITIONED:
        if at is not None:
            raise InvalidInput(f"trigger {name} runs an unpartitioned pipeline; --at names nothing, leave it out")
        return None
    if at is not None and at in partitions.keys:
        return at
    if partitions.kind is PartitionKind.STATIC:
        raise InvalidInput(
            f"trigger {name} runs static partitions; give --at one of: {', '.join(partitions.keys)}"
            if at is not None or not partitions.keys else
            f"trigger {name} runs static partitions; say which with --at (one of: {', '.join(partitions.keys)})"
        )
    tz = getattr(trigger, "tz", "UTC")
    zone = ZoneInfo(tz)
    if at is not None:
        try:
            moment = parse_time(at, tz=tz, what="--at")
        except InvalidInput:
            raise InvalidInput(
                f"--at {at!r} is neither a partition of trigger {name} ({partitions.span}) nor an ISO 8601 time"
            ) from None
        key = partition_at(partitions, moment, zone)
    elif isinstance(trigger, PeriodClose):
        closed = [
            key for key in partitions.keys
            if (window := partition_window(partitions, key, zone)) is not None and window[1] + trigger.delay <= now
        ]
        key = closed[-1] if closed else None
    else:
        key = partition_at(partitions, now, zone, trigger.lag if isinstance(trigger, Cron) else 0)
    if key is None:
        when = f"--at {at}" if at is not None else f"now ({now.isoformat()})"
        raise InvalidInput(f"{when} is in no partition of trigger {name} ({partitions.span}); give --at a partition key")
    return key


def _trigger(app: App, name: str, at: str | None, now: datetime) -> ManualRun:
    pipeline, trigger_name = name.split(":", 1)
    scheduled = app.pipelines[pipeline]
    partition = _partition(app, pipeline, trigger_name, at, now)
    payload = {
        "pipeline": pipeline, "trigger": trigger_name, "partition": partition,
        "planned_at": now.astimezone(UTC).isoformat(),
    }
    return ManualRun(
        of=ControlKind.TRIGGER, name=name, kind=pipeline_kind(pipeline), key=f"manual:{trigger_name}:{partition}", payload=payload,
        max_attempts=scheduled.max_attempts,
        holders=((ControlKind.TRIGGER, name), (ControlKind.PIPELINE, pipeline)),
        what=f"partition {partition}" if partition is not None else "the whole pipeline",
    )


def manual_run(app: App, of: ControlKind, name: str, at: str | None, now: datetime) -> ManualRun:
    """The work item that runs ``name`` (of kind ``of``) by hand at ``at`` (text, see the module doc);
    ``InvalidInput`` when ``at`` is bad or ``name`` is not something that runs on a schedule."""
    if of is ControlKind.SLOT_JOB:
        return _slot_job(app, name, at, now)
    if of is ControlKind.PERIODIC:
        return _periodic(app, name, at, now)
    if of is ControlKind.TRIGGER:
        return _trigger(app, name, at, now)
    if of is ControlKind.HANDLER:
        raise InvalidInput(
            f"handler {name} runs on submit, not on a schedule; queue a call with: vardiya invoke submit {name} PAYLOAD"
        )
    triggers = [f"{name}:{trigger.name}" for trigger in app.pipelines[name].triggers]
    hint = f"trigger one of its triggers ({', '.join(triggers)})" if triggers else "it has no triggers"
    raise InvalidInput(f"pipeline {name}: {hint}, or run it with: vardiya pipeline run {name}")


def queue_manual_run(store: Store, run: ManualRun) -> Queued:
    """Queue ``run`` unless what holds it is paused (then ``TriggerRefused``, nothing written)."""
    queued = store.controls.queue_unless_paused(
        run.holders, kind=run.kind, key=run.key, payload=run.payload, max_attempts=run.max_attempts,
        run_after=store.clock.now(),
    )
    if queued.held_by is not None:
        held = queued.held_by
        raise TriggerRefused(
            f"{held.kind.value} {held.name} is paused (since {held.paused_at.isoformat()}); resume it first: vardiya resume {held.name}"
        )
    return queued
