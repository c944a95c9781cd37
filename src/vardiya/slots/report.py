"""Balance from the ledger: what one period of a slot job cost, slot by slot, after it ran.

``balance`` judges a scheme by its record counts; this report judges it by what the ledger measured.
Counts balance load only if per-record cost is similar, so the report shows both: per slot the number
of records, the rows and bytes they produced, and their durations (p50, p95, max and total).

Figures
    Every slot 0..B-1 appears, an empty one with zeros. ``count`` is every ledger row of the slot
    (done or failed), ``failed`` those still failed. Durations are the ledger's ``duration_ms`` of each
    record (the last attempt's for a failed record; a batch's time shared evenly by its records).

Percentiles
    Nearest rank: the p-th percentile of n sorted durations is the value at rank ceil(p / 100 * n)
    (1-based), so it is always a measured duration, never an interpolation; of no durations it is 0.

Overrun
    A slot overruns when its records' total duration, or its longest record, exceeds the tick interval
    (the window length of the scheme in force divided by its ``runs_per_slot``): a single run could not get
    through the slot before the next tick is due, however balanced the counts look.

Not done
    Per slot, the records the job's source has that are not done in the period (never run, or still
    failed), whatever the ledger holds. While the period is open the schedule may still run them; once
    it is closed for good (``SlotJob.closes_at``: beyond the reach of every tick's backlog) they get a
    warning naming the slots and ``vardiya slots backfill``.

``build_ledger_report`` is the pure part, over (slot, duration_ms, rows, bytes, status[, record]) samples;
``ledger_report`` gives the same report from per-slot figures the store sums in SQL
(``Ledger.period_figures``: counts, rows, bytes and failed records grouped by slot, the first failed
records in slot and record order, so a warning always names the same ones) and the durations read as
one column, for the exact total (``math.fsum``) and the nearest-rank picks.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..store.handler_figures import nearest_rank_position
from ..store.ledger import LedgerSample
from ..store.records import LedgerStatus
from .closed import not_done

if TYPE_CHECKING:
    from ..store import Store
    from .job import SlotJob

__all__ = [
    "COUNT_TOLERANCE",
    "TIME_IMBALANCE",
    "LedgerReport",
    "LedgerSample",
    "SlotLoad",
    "build_ledger_report",
    "ledger_report",
    "nearest_rank",
]

TIME_IMBALANCE = 1.5
"""Max/min of per-slot total duration above which balanced counts get the "similar cost" warning."""

COUNT_TOLERANCE = 0.10
#: Busy time below this share of the tick interval is too small to call an imbalance (timer noise).
SIGNIFICANT_SHARE = 0.01
"""Counts count as balanced when the fullest slot holds at most this much more than the emptiest."""

_LISTED = 12  # records or slots named in a warning before it says "..."


@dataclass(frozen=True, kw_only=True)
class SlotLoad:
    """What one slot's records cost in the period."""

    slot: int
    count: int
    rows: int
    bytes: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    total_ms: float
    failed: int
    overrun: bool
    not_done: int = 0


@dataclass(frozen=True, kw_only=True)
class LedgerReport:
    """Per-slot load of one period; ``to_json`` is the document of ``vardiya slots report --json``."""

    period: str
    slots: tuple[SlotLoad, ...]
    warnings: tuple[str, ...]
    tick_interval_ms: float
    job: str | None = None
    scheme: str | None = None
    failed_records: tuple[str, ...] = ()
    unplaced: int = 0
    closed: bool = False
    closes_at: datetime | None = None

    @property
    def total(self) -> int:
        """Ledger rows counted in the slots."""
        return sum(load.count for load in self.slots)

    @property
    def failed(self) -> int:
        """Records still failed in the period."""
        return sum(load.failed for load in self.slots)

    @property
    def not_done(self) -> int:
        """Records of the period's slots that are not done (never run, or failed), from the source."""
        return sum(load.not_done for load in self.slots)

    @property
    def overrun_slots(self) -> tuple[int, ...]:
        """The slots that would overrun their tick interval."""
        return tuple(load.slot for load in self.slots if load.overrun)

    def to_json(self) -> dict[str, Any]:
        """``{period, slots, warnings}`` of cli.md, plus job, scheme, interval and totals."""
        return {
            "period": self.period,
            "slots": [asdict(load) for load in self.slots],
            "warnings": list(self.warnings),
            "job": self.job,
            "scheme": self.scheme,
            "tick_interval_ms": self.tick_interval_ms,
            "total": self.total,
            "failed": self.failed,
            "overrun_slots": list(self.overrun_slots),
            "unplaced": self.unplaced,
            "not_done": self.not_done,
            "closed": self.closed,
            "closes_at": None if self.closes_at is None else self.closes_at.isoformat(),
        }


def nearest_rank(ordered: Sequence[float], percent: float) -> float:
    """The nearest-rank ``percent``-th percentile of ascending ``ordered`` values (0.0 when empty)."""
    if not 0 < percent <= 100:
        raise InvalidInput(f"a percentile must be in (0, 100], got {percent!r}")
    if not ordered:
        return 0.0
    return float(ordered[nearest_rank_position(len(ordered), percent / 100) - 1])


class _SlotTally:
    """The running figures of one slot while samples stream in."""

    def __init__(self) -> None:
        self.durations = array("d")
        self.rows = 0
        self.bytes = 0
        self.failed = 0

    @classmethod
    def of(cls, durations: array[float], rows: int, size: int, failed: int) -> _SlotTally:
        """A slot's tally from figures summed elsewhere (``Ledger.period_figures``)."""
        tally = cls()
        tally.durations = durations
        tally.rows, tally.bytes, tally.failed = rows, size, failed
        return tally

    def add(self, duration_ms: float, rows: int, size: int, failed: bool) -> None:
        self.durations.append(duration_ms)
        self.rows += rows
        self.bytes += size
        self.failed += failed

    def load(self, slot: int, interval_ms: float, not_done: int = 0) -> SlotLoad:
        ordered = sorted(self.durations)
        total_ms = math.fsum(ordered)
        longest = ordered[-1] if ordered else 0.0
        return SlotLoad(
            slot=slot,
            count=len(ordered),
            rows=self.rows,
            bytes=self.bytes,
            p50_ms=nearest_rank(ordered, 50),
            p95_ms=nearest_rank(ordered, 95),
            max_ms=longest,
            total_ms=total_ms,
            failed=self.failed,
            overrun=total_ms > interval_ms or longest > interval_ms,
            not_done=not_done,
        )


def _seconds(milliseconds: float) -> str:
    return f"{milliseconds / 1000:,.1f} s"


def _listing(items: Sequence[object], total: int | None = None) -> str:
    shown = ", ".join(map(str, items[:_LISTED]))
    return shown + (", ..." if (total if total is not None else len(items)) > _LISTED else "")


def _is_failed(status: LedgerStatus | str) -> bool:
    try:
        return LedgerStatus(status) is LedgerStatus.FAILED
    except ValueError:
        raise InvalidInput(f"ledger status {status!r} is not known; use 'done' or 'failed'") from None


def _imbalance_warning(loads: Sequence[SlotLoad], interval_ms: float) -> str | None:
    counts = [load.count for load in loads]
    low, high = min(counts), max(counts)
    if low == 0 or high > low * (1 + COUNT_TOLERANCE):
        return None
    totals = [load.total_ms for load in loads]
    lightest, heaviest = min(totals), max(totals)
    if heaviest <= max(0.0, interval_ms * SIGNIFICANT_SHARE):
        return None
    if lightest > 0 and heaviest / lightest <= TIME_IMBALANCE:
        return None
    ratio = f"{heaviest / lightest:.2f}" if lightest > 0 else "inf"
    slot = max(loads, key=lambda load: load.total_ms).slot
    return (
        f"counts balance load only if per-record cost is similar: counts are within "
        f"{COUNT_TOLERANCE:.0%} ({low} to {high} a slot) but busy time runs from {_seconds(lightest)} "
        f"to {_seconds(heaviest)} a slot (max/min {ratio}, heaviest slot {slot})"
    )


def _not_done_warning(
    loads: Sequence[SlotLoad], period: str, job: str | None, closes_at: datetime | None
) -> str | None:
    """The warning of a closed period with not-done records: how many, where, and how to run them."""
    total = sum(load.not_done for load in loads)
    if not total:
        return None
    where = _listing([f"{load.slot} ({load.not_done:,})" for load in loads if load.not_done])
    since = f" since {closes_at.isoformat()}" if closes_at is not None else ""
    return (
        f"{total:,} records of period {period} were never done and no tick can take them any more "
        f"(the period is closed{since}, beyond the backlog's reach): slots {where}; run them with "
        f"vardiya slots backfill {job or 'JOB'} --period {period}"
    )


def build_ledger_report(
    samples: Iterable[LedgerSample | tuple[Any, ...]],
    *,
    slots: int,
    tick_interval: timedelta,
    period: str,
    job: str | None = None,
    scheme: str | None = None,
    not_done: Sequence[int] | None = None,
    closes_at: datetime | None = None,
    closed: bool = False,
) -> LedgerReport:
    """The per-slot report of ``samples`` (slot, duration_ms, rows, bytes, status[, record]). Pure.

    A sample whose slot is None or outside 0..B-1 is left out of the slots and counted in a warning.
    ``not_done`` is the count of not-done records per slot (from the source, ``slots.closed``); when
    the period is ``closed`` for good, not-done records get a warning that names them and the fix.
    """
    if not_done is not None and len(not_done) != slots:
        raise InvalidInput(f"not_done must give one count per slot ({slots}), got {len(not_done)}")
    if isinstance(slots, bool) or not isinstance(slots, int) or slots <= 0:
        raise InvalidInput(f"slots must be a positive integer, got {slots!r}")
    if not isinstance(tick_interval, timedelta) or tick_interval <= timedelta(0):
        raise InvalidInput(f"tick_interval must be a positive timedelta, got {tick_interval!r}")
    interval_ms = tick_interval / timedelta(milliseconds=1)
    tallies = [_SlotTally() for _ in range(slots)]
    failed_records: list[str] = []
    failed_total = unplaced = 0
    for sample in samples:
        slot, duration_ms, rows, size, status, *rest = sample
        failed = _is_failed(status)
        if slot is None or not 0 <= slot < slots:
            unplaced += 1
            continue
        tallies[slot].add(float(duration_ms), int(rows), int(size), failed)
        if failed:
            failed_total += 1
            record = rest[0] if rest else None
            if record is not None and len(failed_records) < _LISTED:
                failed_records.append(str(record))
    return _report(
        tallies,
        failed_records=failed_records,
        failed_total=failed_total,
        unplaced=unplaced,
        interval_ms=interval_ms,
        period=period,
        job=job,
        scheme=scheme,
        not_done=not_done,
        closes_at=closes_at,
        closed=closed,
    )


def _report(
    tallies: Sequence[_SlotTally],
    *,
    failed_records: Sequence[str],
    failed_total: int,
    unplaced: int,
    interval_ms: float,
    period: str,
    job: str | None,
    scheme: str | None,
    not_done: Sequence[int] | None,
    closes_at: datetime | None,
    closed: bool,
) -> LedgerReport:
    """The report of per-slot tallies: the loads and the warnings (shared by both ways in)."""
    slots = len(tallies)
    missing = tuple(not_done) if not_done is not None else (0,) * slots
    loads = tuple(tally.load(slot, interval_ms, missing[slot]) for slot, tally in enumerate(tallies))

    warnings: list[str] = []
    owner = f"job {job!r}" if job else "the job"
    if not any(load.count for load in loads):
        warnings.append(
            f"the ledger has no records of {owner} in period {period}; run its ticks first "
            "(vardiya tick or vardiya replay)"
        )
    if unplaced:
        warnings.append(
            f"{unplaced} ledger rows of period {period} have no slot in 0..{slots - 1}; they are left out "
            "(was the scheme changed in place instead of with a SchemeChange?)"
        )
    for load in loads:
        if load.overrun:
            warnings.append(
                f"slot {load.slot} would overrun its schedule: its records took {_seconds(load.total_ms)} "
                f"in all and the longest {_seconds(load.max_ms)}, against a tick interval of "
                f"{_seconds(interval_ms)}; spread the heavy records or make them cheaper"
            )
    lost = _not_done_warning(loads, period, job, closes_at) if closed else None
    if lost is not None:
        warnings.append(lost)
    imbalance = _imbalance_warning(loads, interval_ms)
    if imbalance is not None:
        warnings.append(imbalance)
    if failed_total:
        if failed_records:
            named = f"records {_listing(failed_records, failed_total)}"
        else:
            named = f"in slots {_listing([load.slot for load in loads if load.failed])}"
        warnings.append(
            f"{failed_total} records are still failed in period {period}: {named}; later ticks retry "
            "them up to max_attempts and the ledger holds their errors"
        )
    return LedgerReport(
        period=period,
        slots=loads,
        warnings=tuple(warnings),
        tick_interval_ms=interval_ms,
        job=job,
        scheme=scheme,
        failed_records=tuple(failed_records),
        unplaced=unplaced,
        closed=closed,
        closes_at=closes_at,
    )


def ledger_report(store: Store, job: SlotJob, period_key: str, *, now: datetime | None = None) -> LedgerReport:
    """The per-slot load of ``job`` in the period ``period_key`` (e.g. ``2026-12-01``), from the ledger.

    With the not-done records of each slot (asked of the job's source) and whether the period is
    closed for good by ``now`` (the store's clock by default). The same report as
    ``build_ledger_report`` over the period's samples, from figures the store sums per slot
    (``Ledger.period_figures``) instead of every row's sample.
    """
    period = job.scheme.period_for_key(period_key)
    runs = job.runs_at(period.start)
    missing = not_done(store, job, period, now or store.clock.now())
    slots = runs.scheme.slots
    figures = store.ledger.period_figures(job.name, period.key, slots, named=_LISTED)
    for status in sorted(figures.statuses):
        _is_failed(status)  # an unknown status is refused, as the samples' way does
    tallies = [
        _SlotTally.of(figures.durations[slot], figures.rows[slot], figures.bytes[slot], figures.failed[slot])
        for slot in range(slots)
    ]
    return _report(
        tallies,
        failed_records=figures.failed_records,
        failed_total=sum(figures.failed),
        unplaced=figures.unplaced,
        interval_ms=runs.tick_interval / timedelta(milliseconds=1),
        period=period.key,
        job=job.name,
        scheme=runs.scheme.fingerprint,
        not_done=missing.counts,
        closes_at=missing.closes_at,
        closed=missing.closed,
    )
