"""``vardiya scheduler``: fires the planned ticks of every slot job, the triggers of every pipeline and the
planned times of every periodic function (``@app.every`` / ``@app.cron``).

What it fires is work items; workers run them. A tick item's key is its planned time, and the item
carries that planned time, never "now": the tick processes the slot it was planned for, however late
a worker starts it. Progress is kept in the store (``store.schedules``), advanced in the same
transaction as the items it enqueues, so:

- any number of schedulers may run against one store: they decide one after another on the stored
  cursor, and each tick is enqueued once (its (kind, key) is unique);
- a scheduler that comes back after downtime (all of them down) applies each schedule's
  ``CatchUpPolicy`` to the ticks missed meanwhile, exactly once, and counts the ones it passes by;
- clock steps are told apart from downtime by comparing the wall clock with the monotonic clock. A
  step backwards fires nothing again (cursors never move back); a step forwards up to ``max_jump``
  fires every tick it jumped over, as ``cron`` does; a longer one is treated as downtime.

Ticks are enqueued ``lead`` (1 s) before their planned time, with ``run_after`` at the planned time, so
an idle worker already knows when the next one comes due and starts it on the dot instead of
discovering it on its next poll. Between steps it sleeps until the next planned time (less the lead) or sensor check, at most ``poll_max`` seconds (so
it notices another scheduler's progress and new rows), and wakes at once on ``stop()``.

A step that fires nothing logs the next planned fire time (INFO, ``vardiya.scheduler``), once per
change: a quiet scheduler's log says when it will next act, without a line every poll.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..catchup import decide
from ..clock import Clock, SystemClock
from ..errors import ConfigurationError
from ..schedule.periodic import PeriodicSchedule
from ..schedule.plan import TickSchedule, TimeSchedule, TriggerSchedule
from ..schedule.triggers import Cron, DataArrival, PeriodClose, Upstream
from ..store.heartbeats import ServiceBeat, ServiceKind
from ..store.schedules import Firing as Fired
from ..store.schedules import ScheduleState, ScheduleStep
from .pauses import SchedulePauses
from .sensors import Sensor

if TYPE_CHECKING:
    from ..app import App
    from ..store.api import Store
    from .metrics import ServiceMetrics

__all__ = ["Scheduler", "SchedulerReport", "StepReport", "check_schedulable"]

log = logging.getLogger("vardiya.scheduler")


@dataclass
class StepReport:
    """What one step enqueued and passed by."""

    fired: list[Fired] = field(default_factory=list)  # the store keeps the firings it was given
    skipped: dict[str, int] = field(default_factory=dict)
    decided: int = 0


@dataclass
class SchedulerReport:
    """What a scheduler did in one ``run``."""

    steps: int = 0
    fired: int = 0
    skipped: int = 0

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


def check_schedulable(app: App, only: Iterable[str] | None) -> set[str]:
    """The names ``only`` selects, checked (before a store is opened): each exists, and something is scheduled."""
    wanted = set(only or ())
    unknown = wanted - set(app.slot_jobs) - set(app.pipelines) - set(app.periodic)
    if unknown:
        known = ", ".join(sorted([*app.slot_jobs, *app.pipelines, *app.periodic])) or "none"
        raise ConfigurationError(
            f"app {app.name!r} has no slot job, pipeline or periodic function {min(unknown)!r}; it has: {known}"
        )
    jobs = [name for name in [*app.slot_jobs, *app.periodic] if not wanted or name in wanted]
    triggered = [name for name, entry in app.pipelines.items() if entry.triggers and (not wanted or name in wanted)]
    if not jobs and not triggered:
        raise ConfigurationError(
            f"app {app.name!r} has nothing to schedule; declare a slot job, a periodic function "
            "(@app.every / @app.cron) or a pipeline with triggers"
        )
    return wanted


class Scheduler:
    """Plans and enqueues the ticks and pipeline runs of one app."""

    def __init__(
        self,
        store: Store,
        app: App,
        *,
        owner: str | None = None,
        only: Iterable[str] | None = None,
        poll_max: float = 1.0,
        max_jump: timedelta = timedelta(hours=3),
        lead: timedelta = timedelta(seconds=1),
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self.store = store
        self.clock: Clock = store.clock
        self.owner = owner or f"scheduler-{uuid.uuid4().hex[:12]}"
        self.poll_max = poll_max
        self.max_jump = max_jump
        if not isinstance(lead, timedelta) or lead < timedelta(0):
            raise ConfigurationError(f"lead must be a timedelta of 0 or more, got {lead!r}")
        self.lead = lead
        self.metrics = metrics
        wanted = check_schedulable(app, only)
        self.schedules: dict[str, TimeSchedule] = {}
        self.sensors: list[Sensor] = []
        for job in app.slot_jobs.values():
            if not wanted or job.name in wanted:
                tick = TickSchedule(job)
                self.schedules[tick.name] = tick
        for periodic in app.periodic.values():
            if not wanted or periodic.name in wanted:
                timed_function = PeriodicSchedule(periodic)
                self.schedules[timed_function.name] = timed_function
        for entry in app.pipelines.values():
            if wanted and entry.name not in wanted:
                continue
            for trigger in entry.triggers:
                if isinstance(trigger, Cron | PeriodClose):
                    timed = TriggerSchedule(entry, trigger)
                    self.schedules[timed.name] = timed
                elif isinstance(trigger, DataArrival | Upstream):
                    self.sensors.append(Sensor(store, entry, trigger))
        self._next: dict[str, datetime | None] = dict.fromkeys(self.schedules)
        self._seen: dict[str, datetime | None] = {}  # each schedule's stored cursor, as last read
        self._stale = set(self.schedules)  # not decided since this scheduler started: decide them now
        self._live_from: datetime | None = None
        self._last: tuple[datetime, float] | None = None
        self._before_start: dict[str, list[datetime]] = {}  # a first start's earlier times, to log once
        self._stop = threading.Event()
        #: whether an idle step logged since work was last fired, and the next fire time it logged
        self._idle_said = False
        self._idle_logged: tuple[str, datetime] | None = None
        self._pauses = SchedulePauses(store, [*self.schedules, *(sensor.name for sensor in self.sensors)])
        self._service = ServiceBeat(
            store, self.owner, ServiceKind.SCHEDULER, interval_s=max(poll_max, 5.0), app=app.name,
            runs=[*self.schedules, *(sensor.name for sensor in self.sensors)],
        )

    # -- control ------------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def run(self, *, steps: int | None = None) -> SchedulerReport:
        """Step until ``stop()`` (or ``steps`` steps), sleeping until the next thing is due."""
        report = SchedulerReport()
        self._service.start()
        try:
            while not self._stop.is_set():
                self._service.beat()
                step = self.step()
                report.steps += 1
                report.fired += len(step.fired)
                report.skipped += sum(step.skipped.values())
                if steps is not None and report.steps >= steps:
                    break
                self._sleep()
        finally:
            for sensor in self.sensors:
                sensor.close()
            self._service.stop()
        return report

    def _sleep(self) -> None:
        now = self.clock.now()
        moments = [moment for moment in self._next.values() if moment is not None]
        moments += [sensor.next_check for sensor in self.sensors if sensor.next_check is not None]
        delay = self.poll_max
        if moments:
            delay = min(delay, max(0.0, (min(moments) - self.lead - now).total_seconds()))
        if isinstance(self.clock, SystemClock):
            self._stop.wait(delay)
        else:
            self.clock.sleep(delay or 0.001)

    # -- one step -----------------------------------------------------------------------------------

    def step(self) -> StepReport:
        """Decide every schedule that is due (and every one not decided since start); check sensors."""
        now = self.clock.now()
        self._observe(now, self.clock.monotonic())
        report = StepReport()
        horizon = now + self.lead
        paused = self._pauses.check(now)  # a paused schedule is not decided: its cursor waits (pauses.py)
        self._next.update((name, None) for name in paused if name in self._next)
        due = [
            name for name, moment in self._next.items()
            if name not in paused and (name in self._stale or moment is None or moment <= horizon)
        ]
        if due:
            steps = self.store.schedules.advance(due, lambda name, state: self._decide(name, state, now), owner=self.owner)
            report.decided = len(due)
            for name in due:
                step = steps.get(name)
                self._stale.discard(name)
                self._after(name, step, now, report)
        for sensor in self.sensors:
            if sensor.name not in paused and sensor.due(now):
                firings = sensor.check(now)
                if firings:
                    steps = self.store.schedules.advance(
                        [sensor.name],
                        lambda _name, _state: ScheduleStep(firings=firings, checked=True),  # noqa: B023 - called at once
                        owner=self.owner,
                    )
                    step = steps.get(sensor.name)
                    sensor.fired(firings)
                    if step is not None:
                        report.fired.extend(step.new)
                        self._log_fired(step.new, now)
        if self.metrics is not None:
            self.metrics.scheduler_step(report)
        self._log_idle(report)
        return report

    def next_planned(self) -> tuple[str, datetime] | None:
        """The schedule planned to fire next and its time (None: nothing is planned, all paused)."""
        planned = [(moment, name) for name, moment in self._next.items() if moment is not None]
        if not planned:
            return None
        moment, name = min(planned)
        return name, moment

    def _log_idle(self, report: StepReport) -> None:
        """After a step that fired nothing, log what fires next, unless that is what was logged last."""
        if report.fired:
            self._idle_said = False
            return
        upcoming = self.next_planned()
        if self._idle_said and upcoming == self._idle_logged:
            return
        self._idle_said, self._idle_logged = True, upcoming
        if upcoming is None:
            checks = f"; {len(self.sensors)} sensor(s) checked" if self.sensors else ""
            log.info("%s idle: nothing planned to fire%s", self.owner, checks, extra={"owner": self.owner})
            return
        name, moment = upcoming
        log.info(
            "%s idle: next planned fire is %s at %s", self.owner, name, moment.isoformat(),
            extra={"owner": self.owner, "schedule": name, "planned_at": moment.isoformat()},
        )

    def _observe(self, now: datetime, monotonic: float) -> None:
        """Tell clock steps from downtime: ``live_from`` is when this scheduler's continuous run began."""
        if self._live_from is None:
            self._live_from = now
        elif self._last is not None:
            wall_s = (now - self._last[0]).total_seconds()
            drift = wall_s - (monotonic - self._last[1])
            if drift > self.max_jump.total_seconds():
                log.warning("the clock jumped %.0f s forwards; treating the gap as downtime", drift)
                self._live_from = now
            elif abs(drift) > 1.0:
                log.warning("the clock stepped %+.1f s; no tick is fired twice or lost", drift)
        self._last = (now, monotonic)

    def _decide(self, name: str, state: ScheduleState | None, now: datetime) -> ScheduleStep | None:
        schedule = self.schedules[name]
        after = state.planned_through if state is not None else None
        self._seen[name] = after
        if after is None:
            after = schedule.origin(now)
        horizon = now + self.lead
        if after >= horizon:
            return None  # planned beyond the horizon: another scheduler is ahead, or the clock stepped back
        assert self._live_from is not None
        policy, live_from = schedule.policy, self._pauses.live_from(name, self._live_from)
        first = state is None or state.planned_through is None
        if first:
            # Never planned: nothing came due while a scheduler ran, so no grace applies (a new job fires
            # the latest tick, whose backlog takes the period's earlier slots).
            policy, live_from = replace(policy, grace=timedelta(0)), now
        decision = decide(schedule.times(after, horizon), live_from=live_from, now=now, policy=policy)
        if decision.empty:
            return None
        firings = [firing for firing in (schedule.firing(planned) for planned in decision.fire) if firing is not None]
        if first:
            # The times before the schedule's first start were never missed: no scheduler was meant to
            # fire them. They are not counted as passed by (no "missed ticks" alert on a new store);
            # the first start says what it left and how to run it.
            self._before_start[name] = list(decision.skipped)
            return ScheduleStep(through=decision.through, firings=firings, skipped=())
        return ScheduleStep(through=decision.through, firings=firings, skipped=decision.skipped)

    def _after(self, name: str, step: ScheduleStep | None, now: datetime, report: StepReport) -> None:
        schedule = self.schedules[name]
        through = step.through if step is not None and step.through is not None else self._seen.get(name)
        self._next[name] = schedule.next_after(max(through, now) if through is not None else now)
        if step is None:
            return
        report.fired.extend(step.new)
        self._log_first_start(name, step)
        if step.skipped:
            report.skipped[name] = len(step.skipped)
            after = "" if isinstance(schedule, PeriodicSchedule) else "; the backlog takes their records"
            log.warning(
                "%s: passed by %d missed tick(s) from %s to %s (catch-up policy)%s",
                name, len(step.skipped), min(step.skipped).isoformat(), max(step.skipped).isoformat(), after,
                extra={"schedule": name, "skipped": len(step.skipped)},
            )
        self._log_fired(step.new, now)

    def _log_first_start(self, name: str, step: ScheduleStep) -> None:
        earlier = self._before_start.pop(name, None)
        fired = ", ".join(firing.run_after.isoformat() for firing in step.firings) or "nothing"
        if earlier is None:
            return
        if not earlier:
            log.info("%s: first start on this store; fires %s", name, fired, extra={"schedule": name})
            return
        schedule = self.schedules[name]
        span = f"{len(earlier)} earlier time(s) from {min(earlier).isoformat()} to {max(earlier).isoformat()}"
        if isinstance(schedule, TriggerSchedule):
            partitions = sorted({f.payload["partition"] for f in map(schedule.firing, earlier) if f is not None})
            how = (
                f"; to run partitions {partitions[0]}..{partitions[-1]}: vardiya pipeline backfill "
                f"{schedule.entry.name} --from {partitions[0]} --to {partitions[-1]}"
                if partitions else ""
            )
            log.info(
                "%s: first start on this store; fires %s; %s came before it and are not fired%s",
                name, fired, span, how, extra={"schedule": name, "not_fired": len(earlier), "partitions": partitions},
            )
        else:
            after = "" if isinstance(schedule, PeriodicSchedule) else ": the fired tick's backlog takes their records"
            log.info(
                "%s: first start on this store; fires %s; %s came before it and are not fired (not missed)%s",
                name, fired, span, after, extra={"schedule": name, "not_fired": len(earlier)},
            )

    def _log_fired(self, firings: list[Fired], now: datetime) -> None:
        for firing in firings:
            late = (now - firing.run_after).total_seconds()
            log.info(
                "fired %s %s (planned %s, %.3f s ago)", firing.kind, firing.key, firing.run_after.isoformat(), late,
                extra={"kind": firing.kind, "key": firing.key, "planned_at": firing.run_after.isoformat(), "late_s": late},
            )
