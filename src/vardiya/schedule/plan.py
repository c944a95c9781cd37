"""The planned times of every time schedule, and the work item each planned time becomes. Pure.

A *time schedule* is a slot job's ticks (``TickSchedule``: its ``runs_per_slot`` offsets in every slot
window, from the scheme in force, DST handled by the scheme) or a pipeline's time trigger
(``TriggerSchedule``: ``Cron`` or ``PeriodClose``). The scheduler asks each for the times planned since
its cursor, lets the catch-up policy decide, and enqueues a ``Firing`` per time it fires: a work item
whose key is derived from the planned time alone, so the same tick is one item however many
schedulers fire it, and the item carries that planned time, never "now".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import ZoneInfo

from ..catchup import CatchUpPolicy
from .triggers import Cron, PeriodClose, partition_at, partition_window

if TYPE_CHECKING:
    from ..slots.job import SlotJob
    from ..slots.scheme import PlannedTick
    from .pipelines import ScheduledPipeline

__all__ = [
    "PIPELINE_PREFIX",
    "TICK_PREFIX",
    "Firing",
    "TickSchedule",
    "TimeSchedule",
    "TriggerSchedule",
    "pipeline_kind",
    "planned_key",
    "tick_kind",
]

TICK_PREFIX = "tick:"
PIPELINE_PREFIX = "pipeline:"
_TINY = timedelta(microseconds=1)
#: Work-item attempts of a tick or a triggered pipeline run (a crash, a source that was unreachable).
SERVICE_ATTEMPTS = 3


def tick_kind(job: str) -> str:
    return f"{TICK_PREFIX}{job}"


def pipeline_kind(pipeline: str) -> str:
    return f"{PIPELINE_PREFIX}{pipeline}"


def planned_key(planned: datetime) -> str:
    """The item key of a planned time: its UTC instant, to the microsecond (DST-proof, sortable)."""
    return planned.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class Firing:
    """One work item to enqueue: the scheduler's output for a planned time or a sensed partition."""

    schedule: str
    kind: str
    key: str
    payload: dict[str, Any]
    run_after: datetime
    max_attempts: int = SERVICE_ATTEMPTS


class TimeSchedule(Protocol):
    """What the scheduler needs of a schedule with planned times."""

    name: str
    policy: CatchUpPolicy

    def origin(self, now: datetime) -> datetime:
        """Where planning starts for a schedule that has never run (its first planned time may be it)."""
        ...

    def times(self, after: datetime, through: datetime) -> list[datetime]:
        """Planned times in (after, through], ascending, in UTC."""
        ...

    def next_after(self, moment: datetime) -> datetime | None:
        """The first planned time after ``moment`` (None: there is none)."""
        ...

    def firing(self, planned: datetime) -> Firing | None:
        """The work item of a planned time (None: nothing to run for it)."""
        ...


class TickSchedule:
    """The planned ticks of a slot job."""

    def __init__(self, job: SlotJob) -> None:
        self.job = job
        self.name = f"{TICK_PREFIX}{job.name}"
        self.kind = tick_kind(job.name)
        self.policy: CatchUpPolicy = job.downtime

    def origin(self, now: datetime) -> datetime:
        # A job that never ran has missed nothing before its start, or else before the current period
        # (of which the policy fires the latest tick: the current slot's).
        if self.job.start is not None:
            return utc(self.job.start) - _TINY
        return utc(self.job.scheme_at(now).period_of(now).start) - _TINY

    def times(self, after: datetime, through: datetime) -> list[datetime]:
        from ..slots.runner import planned_ticks

        return [utc(planned) for planned in planned_ticks(self.job, after + _TINY, through + _TINY)]

    def next_after(self, moment: datetime) -> datetime | None:
        from ..slots.runner import planned_ticks

        horizon = moment + self.job.scheme.period * 2 + _TINY
        return next((utc(planned) for planned in planned_ticks(self.job, moment + _TINY, horizon)), None)

    def upcoming(self, moment: datetime, count: int) -> list[PlannedTick]:
        """The first ``count`` planned ticks after ``moment``, with their period and slot (in the scheme's
        zone), as ``next_after`` finds the first: what the scheduler will fire next."""
        horizon = moment + self.job.scheme.period * (count + 1) + _TINY  # every period has a tick
        return list(islice(self.job.planned_ticks(moment + _TINY, horizon), count))

    def firing(self, planned: datetime) -> Firing:
        return Firing(
            self.name, self.kind, planned_key(planned),
            {"job": self.job.name, "planned_at": utc(planned).isoformat()}, utc(planned),
        )


class TriggerSchedule:
    """The planned times of a pipeline's ``Cron`` or ``PeriodClose`` trigger."""

    def __init__(self, entry: ScheduledPipeline, trigger: Cron | PeriodClose) -> None:
        self.entry = entry
        self.trigger = trigger
        assert trigger.name is not None
        self.name = f"{PIPELINE_PREFIX}{entry.name}:{trigger.name}"
        self.kind = pipeline_kind(entry.name)
        self.policy: CatchUpPolicy = trigger.downtime
        self.zone = ZoneInfo(trigger.tz)
        self.partitions = entry.partitions_of(trigger)

    def origin(self, now: datetime) -> datetime:
        # Never run: every close so far (of which the policy fires the latest), or the last day of cron.
        if isinstance(self.trigger, PeriodClose):
            return min((planned for planned, _ in self._closes()), default=utc(now)) - _TINY
        return utc(now) - timedelta(days=1)

    def _closes(self) -> Iterator[tuple[datetime, str]]:
        assert isinstance(self.trigger, PeriodClose)
        for key in self.partitions:
            window = partition_window(self.partitions, key, self.zone)
            if window is not None:
                yield utc(window[1] + self.trigger.delay), key

    def times(self, after: datetime, through: datetime) -> list[datetime]:
        if isinstance(self.trigger, Cron):
            return list(self.trigger.times(after, through))
        return sorted(planned for planned, _ in self._closes() if after < planned <= through)

    def next_after(self, moment: datetime) -> datetime | None:
        if isinstance(self.trigger, Cron):
            return next(self.trigger.times(moment, moment + timedelta(days=400)), None)
        return min((planned for planned, _ in self._closes() if planned > moment), default=None)

    def firing(self, planned: datetime) -> Firing | None:
        trigger = self.trigger
        if isinstance(trigger, Cron):
            partition = partition_at(self.partitions, planned, self.zone, trigger.lag)
            if partition is None and self.entry.time_partitioned(trigger):
                return None  # the lagged period is outside the pipeline's partitions: nothing to run
            key = f"{trigger.name}@{planned_key(planned)}"
        else:
            partition = next(key for at, key in self._closes() if at == planned)
            key = f"{trigger.name}:{partition}"
        payload = {
            "pipeline": self.entry.name, "trigger": trigger.name, "partition": partition,
            "planned_at": utc(planned).isoformat(),
        }
        return Firing(self.name, self.kind, key, payload, utc(planned), self.entry.max_attempts)
