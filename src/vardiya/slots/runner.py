"""Running one tick of a slot job, and replaying every planned tick of a time range.

A tick is identified by its *planned* time. The runner derives (period, slot) from it once, at the
start, and never asks a clock which slot it is in: a tick planned for 14:59:59 that is still running at
15:00 keeps processing slot 14, and a tick planned for 15:00 that starts at 16:02 processes slot 15.
The clock is read only for the deadline and for timing records.

Order of work in a tick:
1. the tick's own slot: records not done for the period (at most ``current_limit``);
2. the backlog: records of earlier slots of this period and of ``catch_up`` earlier periods that are
   not done, oldest first, at most ``backfill_limit`` of them. The current slot always goes first, so
   a backlog never starves the present;
3. no record starts after the deadline (counted from the tick's start); the rest waits for the next tick.

Every outcome is marked in the ledger, in chunks of ``flush_every`` (and whatever is pending when the
tick stops, however it stops). A tick killed before a chunk is flushed leaves those records not done:
the next run processes them again, which the idempotent sinks make harmless.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any

from ..clock import Clock, SystemClock, VirtualClock, ensure_aware
from ..store import LedgerEntry, LedgerStatus, Store
from .hashing import RecordId
from .job import RecordResult, SlotJob, TickContext
from .scheme import Period, SlotScheme

__all__ = ["ReplayReport", "TickReport", "planned_ticks", "replay", "run_tick"]

#: A tick that marked at least this many records refreshes the ledger's planner statistics.
ANALYZE_AFTER = 10_000


@dataclass(kw_only=True)
class TickReport:
    """What one tick did; ``to_json`` is the document of ``vardiya tick --json``."""

    job: str
    period: str
    slot: int
    planned_at: datetime
    started_at: datetime
    finished_at: datetime | None = None
    selected: int = 0
    skipped_done: int = 0
    processed: int = 0
    failed: int = 0
    backfilled: int = 0
    deadline_hit: bool = False
    backfilled_slots: list[tuple[str, int]] = field(default_factory=list)

    @property
    def lateness_s(self) -> float:
        """How long after its planned time the tick started."""
        return (self.started_at - self.planned_at).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "period": self.period,
            "slot": self.slot,
            "planned_at": self.planned_at.isoformat(),
            "selected": self.selected,
            "skipped_done": self.skipped_done,
            "processed": self.processed,
            "failed": self.failed,
            "backfilled": self.backfilled,
            "deadline_hit": self.deadline_hit,
            "started_at": self.started_at.isoformat(),
            "lateness_s": self.lateness_s,
        }


@dataclass(kw_only=True)
class ReplayReport:
    """Every tick a replay fired, in order; ``to_json`` is the document of ``vardiya replay --json``."""

    ticks: list[TickReport] = field(default_factory=list)
    #: Records still failed in the ledger, over the periods the replay touched, when it ended.
    still_failed: int = 0

    @property
    def processed(self) -> int:
        return sum(tick.processed for tick in self.ticks)

    @property
    def failed(self) -> int:
        return sum(tick.failed for tick in self.ticks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ticks": [tick.to_json() for tick in self.ticks],
            "processed": self.processed,
            "failed": self.failed,
            "still_failed": self.still_failed,
        }


class _Tick:
    """The state of one running tick: its job, clock, deadline, ledger buffer and counts."""

    def __init__(
        self, store: Store, job: SlotJob, clock: Clock, timer: Clock, report: TickReport, deadline_at: datetime
    ) -> None:
        self.store = store
        self.job = job
        self.clock = clock
        self.timer = timer
        self.report = report
        self.deadline_at = deadline_at
        self.pending: dict[str, list[LedgerEntry]] = {}
        self.buffered = 0

    def out_of_time(self) -> bool:
        if self.clock.now() >= self.deadline_at:
            self.report.deadline_hit = True
            return True
        return False

    def flush(self) -> None:
        for period, entries in self.pending.items():
            if entries:
                self.store.ledger.mark(self.job.name, period, entries)
        self.pending = {}
        self.buffered = 0

    def record(self, period: str, entry: LedgerEntry) -> None:
        self.pending.setdefault(period, []).append(entry)
        self.buffered += 1
        if entry.status is LedgerStatus.DONE:
            self.report.processed += 1
        else:
            self.report.failed += 1
        if self.buffered >= self.job.flush_every:
            self.flush()

    def run(self, records: Iterable[RecordId], period: Period, scheme: SlotScheme, slot: int, *, backfill: bool) -> int:
        """Process records until they run out or the deadline comes; returns how many were started."""
        started = 0
        size = self.job.batch_size or 1
        iterator = iter(records)
        while True:
            if self.out_of_time():
                break
            batch = list(islice(iterator, size))
            if not batch:
                break
            started += len(batch)
            self._process(batch, period, scheme, slot, backfill=backfill)
        return started

    def _process(self, batch: list[RecordId], period: Period, scheme: SlotScheme, slot: int, *, backfill: bool) -> None:
        context = TickContext(
            job=self.job.name,
            period=period,
            slot=slot,
            planned_at=self.report.planned_at,
            backfill=backfill,
            attempt=1,
        )
        begun_at = self.clock.now()
        begun = self.timer.monotonic()
        outcomes: Mapping[Any, Any]
        try:
            if self.job.batch_size is None:
                outcomes = {batch[0]: self.job.call(batch[0], context)}
            else:
                outcomes = self.job.call(batch, context) or {}
        except Exception as error:  # noqa: BLE001 - a handler error is an outcome, recorded in the ledger
            outcomes = {record: error for record in batch}
        elapsed_ms = (self.timer.monotonic() - begun) * 1000 / len(batch)
        finished_at = self.clock.now()
        for record in batch:
            outcome = outcomes.get(record)
            if isinstance(outcome, BaseException):
                error = "".join(traceback.format_exception_only(outcome)).strip()
                entry = LedgerEntry(
                    record=record, status=LedgerStatus.FAILED, started_at=begun_at, finished_at=finished_at,
                    duration_ms=elapsed_ms, error=error, slot=slot,
                )
            else:
                result = outcome if isinstance(outcome, RecordResult) else RecordResult()
                entry = LedgerEntry(
                    record=record, status=LedgerStatus.DONE, started_at=begun_at, finished_at=finished_at,
                    duration_ms=elapsed_ms, rows=result.rows, bytes=result.bytes, slot=slot,
                )
            self.record(period.key, entry)


def _backlog(
    job: SlotJob, period: Period, slot: int, history_from: datetime | None
) -> Iterator[tuple[Period, SlotScheme, int]]:
    """Slots due before (period, slot), oldest first: ``catch_up`` earlier periods, then this one's.

    Earlier periods count only from ``history_from`` on (the job's ``start``, else the first period
    the ledger has for it), so a new job does not "recover" periods from before it existed.
    """
    scheme = job.scheme_for(period)
    earlier: list[Period] = []
    cursor = period
    for _ in range(job.catch_up):
        cursor = scheme.period_after(cursor, -1)
        if history_from is None or cursor.start < history_from:
            break
        earlier.append(cursor)
    for past in reversed(earlier):
        past_scheme = job.scheme_for(past)
        for index in range(past_scheme.slots):
            yield past, past_scheme, past_scheme.slot_at_window(index)
    current = scheme.window_index(slot)
    for index in range(current):
        yield period, scheme, scheme.slot_at_window(index)


def _history_from(store: Store, job: SlotJob, scheme: SlotScheme) -> datetime | None:
    if job.start is not None:
        return scheme.period_of(job.start).start
    first = store.ledger.first_period(job.name)
    return scheme.period_for_key(first).start if first is not None else None


def run_tick(
    store: Store, job: SlotJob, planned_at: datetime, *, clock: Clock | None = None, timer: Clock | None = None
) -> TickReport:
    """Run the tick of ``job`` planned for ``planned_at`` and return what it did.

    ``clock`` (the store's by default) gives the tick's start and the deadline; ``timer`` (the clock by
    default) measures how long each record took, for the ledger.
    """
    clock = clock or store.clock
    timer = timer or clock
    planned_at = ensure_aware(planned_at, "planned time")
    scheme = job.scheme_at(planned_at)
    position = scheme.locate(planned_at)
    period, slot = position.period, position.slot
    report = TickReport(
        job=job.name, period=period.key, slot=slot, planned_at=planned_at, started_at=clock.now()
    )
    report.skipped_done = store.ledger.count_done(job.name, period.key, slot=slot)
    tick = _Tick(store, job, clock, timer, report, job.deadline_at(position, report.started_at))
    try:
        current = job.source.records(
            store=store, job=job.name, scheme=scheme, period=period.key, slot=slot,
            give_up_after=job.max_attempts, limit=job.current_limit,
        )
        report.selected = tick.run(current, period, scheme, slot, backfill=False)
        remaining = job.backfill_limit
        for past_period, past_scheme, past_slot in _backlog(job, period, slot, _history_from(store, job, scheme)):
            if remaining <= 0 or report.deadline_hit:
                break
            tick.flush()  # the backlog query must see the current slot's outcomes
            due = job.source.records(
                store=store, job=job.name, scheme=past_scheme, period=past_period.key, slot=past_slot,
                give_up_after=job.max_attempts, limit=remaining,
            )
            started = tick.run(due, past_period, past_scheme, past_slot, backfill=True)
            if started:
                report.backfilled += started
                report.backfilled_slots.append((past_period.key, past_slot))
                remaining -= started
    finally:
        tick.flush()
        report.finished_at = clock.now()
    if report.processed + report.failed >= ANALYZE_AFTER:
        store.ledger.refresh_statistics()
    return report


def replay(
    store: Store,
    job: SlotJob,
    start: datetime,
    end: datetime,
    *,
    clock: VirtualClock | None = None,
    skip: Iterable[tuple[datetime, datetime]] = (),
    on_tick: Any = None,
    timer: Clock | None = None,
) -> ReplayReport:
    """Fire every tick of ``job`` planned in [start, end), in order, on a virtual clock.

    Handlers run for real; the virtual clock is set to each tick's planned time before it runs (and
    moves only if a handler moves it). ``skip`` lists [from, to) spans when the app was "down": ticks
    planned inside them are not fired, which is what the backlog then has to recover. Record
    durations are measured on ``timer``, the real clock by default: time is virtual, the cost is not.
    """
    timer = timer or SystemClock()
    clock = clock or VirtualClock(ensure_aware(start, "start"))
    downtime = [(ensure_aware(a, "downtime start"), ensure_aware(b, "downtime end")) for a, b in skip]
    report = ReplayReport()
    for planned in planned_ticks(job, start, end):
        if any(a <= planned < b for a, b in downtime):
            continue
        if clock.now() < planned:
            clock.set(planned)
        tick = run_tick(store, job, planned, clock=clock, timer=timer)
        report.ticks.append(tick)
        if on_tick is not None:
            on_tick(tick)
    for period in dict.fromkeys(tick.period for tick in report.ticks):
        report.still_failed += store.ledger.counts(job.name, period)[LedgerStatus.FAILED]
    return report


def planned_ticks(job: SlotJob, start: datetime, end: datetime) -> Iterator[datetime]:
    """Planned tick times of ``job`` in [start, end), each from the scheme in force for its period."""
    boundaries = [ensure_aware(start, "start")]
    boundaries += [c.effective_from for c in job.scheme_changes if start < c.effective_from < end]
    boundaries.append(ensure_aware(end, "end"))
    for low, high in zip(boundaries, boundaries[1:]):
        in_force = job.scheme_at(low)
        for tick in in_force.planned_times(low, high, job.offsets):
            yield tick.planned_time
