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
3. no record starts after the tick's stop time: the earlier of its deadline (counted from the tick's
   start) and the end of the window of the slot it was planned for plus ``deadline_grace``; the rest
   waits for the next run of the slot or the next tick's backlog.

Records go to the handler in chunks of ``flush_every``. Each chunk is first claimed in the store
(``store.ledger.claims``: one transaction that re-checks the ledger and records this run as the owner,
with a lease of ``claim_lease``); what another live run holds is skipped and counted as ``held``. A
heartbeat thread renews the lease while the chunk runs, and the chunk's outcomes are marked in the
ledger in the transaction that releases its claims (also when the tick stops early, however it stops).
So two runs of one slot at once (the :01 run still going at :31, two ``vardiya tick`` processes, two
workers) never hand a record to the handler twice. A tick killed mid-chunk leaves that chunk not done
and claimed until its lease runs out; then the next run processes it again, which the idempotent
sinks make harmless for the records whose effect was written but not yet marked.

The words of a tick's report are the same in ``TickReport``, ``vardiya tick|replay`` (table and
``--json``), the demo and the README: ``already_done`` (the slot's records done before the tick),
``started`` (its own slot's records handed to the handler), ``backlog`` (earlier slots' records handed
to it), ``held`` (records skipped because another run held or settled them), ``done`` and ``failed``
(the outcomes of all records handed over: ``done + failed == started + backlog``) and ``cut`` (why it
stopped starting records early: ``deadline``, ``window``, or nothing).
"""

from __future__ import annotations

import enum
import logging
import os
import socket
import threading
import traceback
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any

from ..clock import Clock, SystemClock, VirtualClock, ensure_aware
from ..limits import check_time
from ..sla import log_miss, over_sla
from ..store import LedgerStatus, Store
from ..store.failures import FailureFamily, LedgerFailure, SlaMiss
from ..store.records import record_key
from ..tracebacks import format_traceback
from .closed import history_from as _history_from
from .failures import FailureTally
from .hashing import RecordId
from .job import RecordResult, SlotJob, TickContext
from .scheme import Period, SlotScheme

__all__ = ["TICK_CAPTION", "TICK_COLUMNS", "Cut", "ReplayReport", "TickReport", "planned_ticks", "replay", "run_tick"]

log = logging.getLogger("vardiya.tick")

#: A tick refreshes the ledger's planner statistics once it has marked this many records, again each
#: time it has marked ``_ANALYZE_GROWTH`` times as many, and at its end if it marked this many.
ANALYZE_AFTER = 10_000
_ANALYZE_GROWTH = 4
#: Two clock readings closer than this (by the timer) are one instant for the ledger's attempt times:
#: the end of one record and the start of the next (see ``_Tick._run_each``).
_ONE_INSTANT_S = 0.0001
_DONE = LedgerStatus.DONE.value
_FAILED = LedgerStatus.FAILED.value


#: The columns of a tick's table: the words of ``TickReport`` and of ``--json`` (module doc).
TICK_COLUMNS = ("slot", "already_done", "started", "backlog", "held", "done", "failed", "cut")
TICK_CAPTION = (
    "already_done: the slot's records done before the tick; started: its own slot's records handed to the "
    "handler; backlog: earlier slots' records handed to it; held: skipped, another run held them; "
    "done / failed: outcomes of all records handed over; cut: deadline or window, the tick stopped starting records"
)


class Cut(str, enum.Enum):
    """Why a tick stopped starting records before its records ran out."""

    #: its deadline (``SlotJob.deadline``, counted from its start) came
    DEADLINE = "deadline"
    #: the window of the slot it was planned for ended (plus ``SlotJob.deadline_grace``)
    WINDOW = "window"


@dataclass(kw_only=True)
class TickReport:
    """What one tick did; ``to_json`` is the document of ``vardiya tick --json`` (words: module doc)."""

    job: str
    period: str
    slot: int
    planned_at: datetime
    started_at: datetime
    finished_at: datetime | None = None
    #: the instant after which the tick started no record (the earlier of deadline and window end)
    stop_at: datetime | None = None
    already_done: int = 0
    started: int = 0
    backlog: int = 0
    held: int = 0
    done: int = 0
    failed: int = 0
    cut: Cut | None = None
    backlog_slots: list[tuple[str, int]] = field(default_factory=list)
    #: The records that failed: a count per error line and the first few (``slots.failures``).
    failures: FailureTally | None = None
    #: How long the tick ran (the timer's seconds) when the job's ``sla`` is set and it ran longer.
    sla_missed_s: float | None = None

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
            "already_done": self.already_done,
            "started": self.started,
            "backlog": self.backlog,
            "held": self.held,
            "done": self.done,
            "failed": self.failed,
            "cut": self.cut.value if self.cut is not None else None,
            "started_at": self.started_at.isoformat(),
            "stop_at": self.stop_at.isoformat() if self.stop_at is not None else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at is not None else None,
            "lateness_s": self.lateness_s,
            "failures": self.failures.to_json() if self.failures is not None and self.failures.count else None,
            "sla_missed_s": self.sla_missed_s,
        }


@dataclass(kw_only=True)
class ReplayReport:
    """Every tick a replay fired, in order; ``to_json`` is the document of ``vardiya replay --json``."""

    ticks: list[TickReport] = field(default_factory=list)
    #: Records still failed in the ledger, over the periods the replay touched, when it ended.
    still_failed: int = 0

    @property
    def done(self) -> int:
        return sum(tick.done for tick in self.ticks)

    @property
    def failed(self) -> int:
        return sum(tick.failed for tick in self.ticks)

    def failures(self) -> FailureTally | None:
        """The failures of every tick, together; None when nothing failed."""
        tallies = [tick.failures for tick in self.ticks if tick.failures is not None and tick.failures.count]
        if not tallies:
            return None
        together = FailureTally(job=tallies[0].job)
        for tally in tallies:
            together.merge(tally)
        return together

    def to_json(self) -> dict[str, Any]:
        failures = self.failures()
        return {
            "ticks": [tick.to_json() for tick in self.ticks],
            "started": sum(tick.started for tick in self.ticks),
            "backlog": sum(tick.backlog for tick in self.ticks),
            "done": self.done,
            "failed": self.failed,
            "still_failed": self.still_failed,
            "failures": failures.to_json() if failures is not None else None,
        }


def _error_text(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(error)).strip()


class _Heartbeat:
    """Renews a tick's record claims every third of ``claim_lease``, from a thread of its own.

    A thread, not a check between records: one slow record (or one slow batch) must not let the lease
    run out while it runs. The thread starts with the tick's first claim; a missed beat is logged and
    tried again (the lease has two more beats of slack).
    """

    def __init__(self, store: Store, owner: str, job: SlotJob, clock: Clock) -> None:
        self.store, self.owner, self.job, self.lease, self.clock = store, owner, job.name, job.claim_lease, clock
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        #: (period, keys) of the chunk the tick holds, or None: set by the tick, read by the beats
        self.chunk: tuple[str, list[str]] | None = None

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._beat, name=f"heartbeat-{self.owner}", daemon=True)
            self.thread.start()

    def _beat(self) -> None:
        interval = max(0.05, self.lease.total_seconds() / 3)
        while not self.stopped.wait(interval):
            chunk = self.chunk
            if chunk is None:
                continue
            try:
                self.store.ledger.claims.renew(self.owner, self.job, *chunk, self.clock.now() + self.lease)
            except Exception as error:  # noqa: BLE001 - retried at the next beat
                log.warning("tick %s: renewing its claims failed: %s", self.owner, error)

    def stop(self) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=30)


class _Tick:
    """The state of one running tick: its job, clocks, stop time, claims, pending ledger rows and counts.

    Outcomes are kept as prepared ledger rows (``ledger.ROW_COLUMNS``), built once per record and
    handed to ``ledger.mark_rows`` at the end of every chunk. A tick of a million records with a
    no-op handler spent more time building ``LedgerEntry`` objects, re-reading clocks and converting
    times than in the database (benchmarks/README.md), so the per-record loop (``_run_each``) keeps
    to what every record needs: the stop check, the handler call, its timing and one tuple. The
    claims cost one transaction per chunk, never a statement per record.
    """

    def __init__(
        self,
        store: Store,
        job: SlotJob,
        clock: Clock,
        timer: Clock,
        report: TickReport,
        stop_at: datetime,
        cut: Cut,
    ) -> None:
        self.store = store
        self.job = job
        self.clock = clock
        self.timer = timer
        self.report = report
        self.stop_at = stop_at
        self.cut = cut
        self.pending: list[tuple[Any, ...]] = []
        # The failures of the pending rows, with their tracebacks: stored by ``flush`` after the rows.
        self.failures: list[LedgerFailure] = []
        # One batch error fails every record of its batch: its traceback is formatted once.
        self._formatted: tuple[BaseException | None, str | None] = (None, None)
        # One converter for the whole tick: it remembers the text of the last second it converted.
        self.time = store.ledger.row_times()
        self.marked = 0
        self.analyze_at = ANALYZE_AFTER
        self.chunk_size = max(job.flush_every, job.batch_size or 1)
        self.owner = f"tick-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self.heartbeat = _Heartbeat(store, self.owner, job, clock)

    def flush(self) -> None:
        """Mark the pending rows and release the chunk's claims (one transaction); refresh statistics.

        The source's anti-join is planned from the ledger's statistics. Taken before a big tick, they
        say its period is (nearly) empty, and on PostgreSQL a page of ids late in the tick was then
        planned as a rescan of every row the tick had marked, for each id: the last page of a
        1,000,000-record tick ran for more than ten minutes. After a refresh it is an index probe per id.
        """
        held = self.heartbeat.chunk
        if not self.pending and held is None:
            return
        release = (self.owner, self.job.name, *held) if held is not None else None
        self.marked += self.store.ledger.mark_rows(self.pending, release=release)
        self.pending = []
        if self.failures:
            self.store.failures.keep_ledger(self.failures)
            self.failures = []
        self.heartbeat.chunk = None
        if self.marked >= self.analyze_at:
            self.store.ledger.refresh_statistics()
            self.analyze_at = self.marked * _ANALYZE_GROWTH

    def close(self) -> None:
        """Mark what is pending, release every claim, stop the heartbeat: however the tick ends."""
        try:
            self.flush()
        finally:
            self.heartbeat.stop()

    def run(self, records: Iterable[RecordId], period: Period, scheme: SlotScheme, slot: int, *, backfill: bool) -> int:
        """Claim and process records chunk by chunk until they run out or the stop time comes.

        Returns how many were handed to the handler.
        """
        # Every record of one run shares its context (it never says "now"), so it is built once.
        context = TickContext(
            job=self.job.name, period=period, slot=slot, planned_at=self.report.planned_at, backfill=backfill,
            attempt=1,
        )
        source = iter(records)
        started = 0
        while self.report.cut is None:
            chunk = list(islice(source, self.chunk_size))
            if not chunk:
                break
            claimed = self._claim(chunk, period.key)
            if claimed is None:
                break
            if self.job.batch_size is None:
                started += self._run_each(iter(claimed), period.key, slot, context)
            else:
                started += self._run_batches(iter(claimed), period.key, slot, context)
            self.flush()  # the chunk's outcomes, and its claims released, in one transaction
        return started

    def _claim(self, chunk: list[RecordId], period: str) -> list[RecordId] | None:
        """The records of ``chunk`` this run now holds, in order; None when the stop time has come."""
        now = self.clock.now()
        if now >= self.stop_at:
            self.report.cut = self.cut
            return None
        keys = [str(record) if type(record) is int else record_key(record) for record in chunk]
        taken = self.store.ledger.claims.take(
            self.job.name, period, keys, owner=self.owner, until=now + self.job.claim_lease, now=now,
            give_up_after=self.job.max_attempts,
        )
        if taken:
            self.heartbeat.chunk = (period, sorted(taken))
            self.heartbeat.start()
        if len(taken) == len(chunk):
            return chunk
        self.report.held += len(chunk) - len(taken)
        return [record for record, key in zip(chunk, keys, strict=True) if key in taken]

    def _run_each(self, records: Iterator[RecordId], period: str, slot: int, context: TickContext) -> int:
        """The per-record loop: per record one handler call, one clock and two timer reads, one row.

        The clock is read once between two records: that reading is when one finished (its last
        attempt time) and when the next starts (its first attempt time and its stop check). Only
        when the timer says time passed since it (more than ``_ONE_INSTANT_S``: a page of ids was
        fetched, the ledger was flushed) is the clock read again before the next record. Both times
        are the injected clock's, the duration is the timer's, measured around the handler alone.
        Reading and converting two times per record cost more than the rest of the loop.

        A handler that returns None (the common case) takes the shortest path: a done row with
        nothing to report.
        """
        job, report = self.job, self.report
        handler, with_context = job.handler, job.handler_takes_context
        now, monotonic, time = self.clock.now, self.timer.monotonic, self.time
        stop_at, name = self.stop_at, job.name
        pending = self.pending
        done = failed = 0
        # The last clock reading, its ledger form, and the timer just before it was taken.
        read_at = now()
        read_text = time(read_at)
        read_mark = monotonic()
        try:
            for record in records:
                begun = monotonic()
                if begun - read_mark > _ONE_INSTANT_S:
                    read_at = now()
                    read_text = time(read_at)
                if read_at >= stop_at:
                    report.cut = self.cut
                    break
                first = read_text
                try:
                    outcome = handler(record, context) if with_context else handler(record)
                except Exception as error:  # noqa: BLE001 - a handler error is an outcome, recorded in the ledger
                    outcome = error
                read_mark = monotonic()
                read_at = now()  # this record's end, and the next one's start
                read_text = time(read_at)
                duration_ms = (read_mark - begun) * 1000
                key = str(record) if type(record) is int else record_key(record)
                if outcome is None:
                    pending.append((name, period, key, slot, _DONE, 1, first, read_text, duration_ms, 0, 0, None))
                    done += 1
                else:
                    row = self._row(key, period, slot, outcome, first, read_text, duration_ms)
                    pending.append(row)
                    if row[4] == _DONE:
                        done += 1
                    else:
                        failed += 1
        finally:  # counted as pending for the ledger, however the loop ends
            report.done += done
            report.failed += failed
        return done + failed

    def _run_batches(self, records: Iterator[RecordId], period: str, slot: int, context: TickContext) -> int:
        """The batch loop: the handler gets ``batch_size`` records and reports per record (see ``SlotJob``)."""
        size = self.job.batch_size or 1
        started = 0
        while True:
            batch = list(islice(records, size))
            if not batch:
                break
            if self.clock.now() >= self.stop_at:
                self.report.cut = self.cut
                break
            started += len(batch)
            self._process_batch(batch, period, slot, context)
        return started

    def _process_batch(self, batch: list[RecordId], period: str, slot: int, context: TickContext) -> None:
        begun_at = self.clock.now()
        begun = self.timer.monotonic()
        outcomes: Mapping[Any, Any]
        try:
            outcomes = self.job.call(batch, context) or {}
        except Exception as error:  # noqa: BLE001 - a handler error is an outcome, recorded in the ledger
            outcomes = dict.fromkeys(batch, error)
        duration_ms = (self.timer.monotonic() - begun) * 1000 / len(batch)
        first, last = self.time(begun_at), self.time(self.clock.now())
        for record in batch:
            row = self._row(record_key(record), period, slot, outcomes.get(record), first, last, duration_ms)
            if row[4] == _FAILED:
                self.report.failed += 1
            else:
                self.report.done += 1
            self.pending.append(row)

    def _row(
        self, key: str, period: str, slot: int, outcome: Any, first: Any, last: Any, duration_ms: float
    ) -> tuple[Any, ...]:
        """The prepared ledger row of one outcome: an exception fails the record, anything else is done."""
        if isinstance(outcome, BaseException):
            error = _error_text(outcome)
            self._failed(key, period, outcome, error)
            return (self.job.name, period, key, slot, _FAILED, 1, first, last, duration_ms, 0, 0, error)
        result = outcome if isinstance(outcome, RecordResult) else RecordResult()
        return (self.job.name, period, key, slot, _DONE, 1, first, last, duration_ms, result.rows, result.bytes, None)

    def _failed(self, key: str, period: str, outcome: BaseException, error: str) -> None:
        """Keep a failed record's traceback for the store and count it in the report's tally."""
        seen, text = self._formatted
        if seen is not outcome:
            text = format_traceback(outcome)
            self._formatted = (outcome, text)
        self.failures.append(
            LedgerFailure(job=self.job.name, period=period, record=key, failed_at=self.clock.now(), error=error, traceback=text)
        )
        if self.report.failures is None:
            self.report.failures = FailureTally(job=self.job.name)
        self.report.failures.add(period, key, error)


def _backlog(
    job: SlotJob, period: Period, slot: int, history_from: datetime | None
) -> Iterator[tuple[Period, SlotScheme, int]]:
    """Slots due before (period, slot), oldest first: ``catch_up`` earlier periods, then this one's.

    Earlier periods count only from ``history_from`` on (the job's ``start``, else the first period
    the ledger has for it), so a new job does not "recover" periods from before it existed.
    """
    scheme = job.scheme_for(period)
    for past in job.backlog_periods(period, history_from):  # the reach ``SlotJob.closes_at`` uses too
        past_scheme = job.scheme_for(past)
        for index in range(past_scheme.slots):
            yield past, past_scheme, past_scheme.slot_at_window(index)
    current = scheme.window_index(slot)
    for index in range(current):
        yield period, scheme, scheme.slot_at_window(index)


def run_tick(
    store: Store,
    job: SlotJob,
    planned_at: datetime,
    *,
    clock: Clock | None = None,
    timer: Clock | None = None,
    within_window: bool = True,
) -> TickReport:
    """Run the tick of ``job`` planned for ``planned_at`` and return what it did.

    ``clock`` (the store's by default) gives the tick's start, its stop time and its claims' leases;
    ``timer`` (the clock by default) measures how long each record took, for the ledger. With
    ``within_window=False`` (``vardiya tick --outside-window``: a deliberate run of a past slot) the
    end of the slot's window does not stop the tick, only its deadline does.
    """
    clock = clock or store.clock
    timer = timer or clock
    planned_at = check_time(ensure_aware(planned_at, "planned time"), "planned time")  # before any read or write
    scheme = job.scheme_at(planned_at)
    position = scheme.locate(planned_at)
    period, slot = position.period, position.slot
    report = TickReport(
        job=job.name, period=period.key, slot=slot, planned_at=planned_at, started_at=clock.now()
    )
    stop_at, cut = job.deadline_at(position, report.started_at), Cut.DEADLINE
    window_closes = job.window_closes_at(position)
    if within_window and window_closes < stop_at:
        stop_at, cut = window_closes, Cut.WINDOW
    report.stop_at = stop_at
    report.already_done = store.ledger.count_done(job.name, period.key, slot=slot)
    begun = timer.monotonic()
    tick = _Tick(store, job, clock, timer, report, stop_at, cut)
    try:
        current = job.source.records(
            store=store, job=job.name, scheme=scheme, period=period.key, slot=slot,
            give_up_after=job.max_attempts, limit=job.current_limit,
        )
        report.started = tick.run(current, period, scheme, slot, backfill=False)
        remaining = job.backfill_limit
        for past_period, past_scheme, past_slot in _backlog(job, period, slot, _history_from(store, job, scheme)):
            if remaining <= 0 or report.cut is not None:
                break
            tick.flush()  # the backlog query must see the current slot's outcomes
            due = job.source.records(
                store=store, job=job.name, scheme=past_scheme, period=past_period.key, slot=past_slot,
                give_up_after=job.max_attempts, limit=remaining,
            )
            started = tick.run(due, past_period, past_scheme, past_slot, backfill=True)
            if started:
                report.backlog += started
                report.backlog_slots.append((past_period.key, past_slot))
                remaining -= started
    finally:
        tick.close()
        report.finished_at = clock.now()
    if report.done + report.failed >= ANALYZE_AFTER:
        store.ledger.refresh_statistics()
    _check_sla(store, job, report, timer.monotonic() - begun)
    return report


def _check_sla(store: Store, job: SlotJob, report: TickReport, took_s: float) -> None:
    """Log, count and report a tick that ran longer than its job's ``sla``."""
    if job.sla is None or not over_sla(job.sla, took_s):
        return
    ref = f"tick {report.planned_at.isoformat()}"
    report.sla_missed_s = took_s
    log_miss("job", job.name, ref, took_s, job.sla)
    store.failures.sla_missed([
        SlaMiss(
            family=FailureFamily.JOB, name=job.name, ref=ref, expected_ms=job.sla.total_seconds() * 1000,
            took_ms=took_s * 1000, at=report.finished_at or store.clock.now(),
        )
    ])


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
    start = check_time(ensure_aware(start, "start"), "start")
    end = check_time(ensure_aware(end, "end"), "end")
    clock = clock or VirtualClock(start)
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
    return (tick.planned_time for tick in job.planned_ticks(start, end))
