"""Records never done: the not-done records of periods that no tick can reach any more.

A period is *closed for good* at ``SlotJob.closes_at``: the end of the last period whose ticks' backlog
still reaches it (the job's ``catch_up`` periods, none without a backlog), the same rule the runner's
backlog follows (``SlotJob.backlog_periods``). A record that is not done then (never run, or still
failed) will never be run by the schedule: this module counts those records, per slot, so the reports
can name them (``vardiya slots report``, ``vardiya status``, the ``vardiya_slot_not_done_records``
gauge) and ``vardiya slots backfill`` can run exactly them.

Counting asks the job's source for each slot's not-done records (the ledger anti-join, given-up
records included): the same question a tick asks, so the count is what a backfill would run. A
source that can count a period at once (``sources.OpenCounts``: the in-memory source, which keeps
each slot's open records under the ledger's change marker) is asked that way.
``closed_periods`` is pure; the rest reads the store and the source, never writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .job import SlotJob
from .scheme import Period, SlotScheme
from .sources import OpenCounts

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["CLOSED_PERIODS", "NotDone", "closed_periods", "history_from", "not_done_counts", "not_done_report"]

#: How many of a job's latest closed periods ``vardiya status`` and the metrics look at (a month of a
#: daily job). Older periods are still counted by ``vardiya slots report JOB --period P``.
CLOSED_PERIODS = 31


@dataclass(frozen=True, kw_only=True)
class NotDone:
    """A period's not-done records, per slot of the scheme in force for it."""

    job: str
    period: str
    closed: bool
    closes_at: datetime
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def slots(self) -> dict[int, int]:
        """The slots that have not-done records, with their counts."""
        return {slot: count for slot, count in enumerate(self.counts) if count}

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "period": self.period,
            "not_done": self.total,
            "closed": self.closed,
            "closes_at": self.closes_at.isoformat(),
            "slots": {str(slot): count for slot, count in self.slots.items()},
        }


def history_from(store: Store, job: SlotJob, scheme: SlotScheme | None = None) -> datetime | None:
    """Where the job's history begins: the period of its ``start``, else the first period in the ledger."""
    scheme = scheme or job.scheme
    if job.start is not None:
        return scheme.period_of(job.start).start
    first = store.ledger.first_period(job.name)
    return scheme.period_for_key(first).start if first is not None else None


def closed_periods(job: SlotJob, now: datetime, since: datetime | None, *, limit: int = CLOSED_PERIODS) -> list[Period]:
    """The latest ``limit`` periods of ``job`` closed for good by ``now``, from ``since`` on, oldest first.

    Pure. ``since`` is where the job's history begins (``history_from``); None (a job that never ran
    and has no ``start``) has no closed period.
    """
    if since is None or limit <= 0:
        return []
    scheme = job.scheme_at(now)
    period = scheme.period_of(now)
    while job.closes_at(period) > now:
        period = scheme.period_after(period, -1)
    found: list[Period] = []
    while len(found) < limit and period.start >= since:
        found.append(period)
        period = scheme.period_after(period, -1)
    return found[::-1]


def not_done_counts(
    store: Store, job: SlotJob, period: Period, *, read: tuple[dict[int, int], dict[str, str]] | None = None
) -> tuple[int, ...]:
    """How many records of each slot are not done in ``period`` (never run, or failed; given up too).

    ``read`` is the period's ledger markers and live claims, when the caller read them for many
    periods at once (``not_done_report``); only a source that counts a period at once uses them."""
    scheme = job.scheme_for(period)
    if isinstance(job.source, OpenCounts):
        tokens, held = read if read is not None else (None, None)
        return job.source.open_counts(
            store=store, job=job.name, scheme=scheme, period=period.key, give_up_after=None, tokens=tokens, held=held
        )
    return tuple(
        sum(
            1
            for _ in job.source.records(
                store=store, job=job.name, scheme=scheme, period=period.key, slot=slot, give_up_after=None, limit=None
            )
        )
        for slot in range(scheme.slots)
    )


def not_done(
    store: Store, job: SlotJob, period: Period, now: datetime, *, read: tuple[dict[int, int], dict[str, str]] | None = None
) -> NotDone:
    """The not-done records of one period, and whether it is closed for good by ``now``."""
    closes = job.closes_at(period)
    return NotDone(
        job=job.name, period=period.key, closed=closes <= now, closes_at=closes,
        counts=not_done_counts(store, job, period, read=read),
    )


def not_done_report(store: Store, job: SlotJob, now: datetime, *, limit: int = CLOSED_PERIODS) -> list[NotDone]:
    """The closed periods (the latest ``limit``) that have not-done records, oldest first.

    A source that counts a period at once gets the periods' ledger markers and live claims read in
    one query each (markers first), not two queries a period."""
    periods = closed_periods(job, now, history_from(store, job), limit=limit)
    reads: dict[str, tuple[dict[int, int], dict[str, str]]] = {}
    if periods and isinstance(job.source, OpenCounts):
        keys = [period.key for period in periods]
        markers = store.ledger.changes.markers_of(job.name, keys)
        held = store.ledger.claims.held_of(job.name, keys, store.clock.now())
        reads = {key: (markers[key], held[key]) for key in keys}
    found = (not_done(store, job, period, now, read=reads.get(period.key)) for period in periods)
    return [entry for entry in found if entry.total]
