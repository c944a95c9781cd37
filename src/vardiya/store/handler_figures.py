"""The invocation metrics' figures of one kind of work item, as SQL aggregates (both backends).

``InvocationReads`` inherits these. ``invoke.metrics.store_metrics`` used to read every item of the
handler and every logged call and add them up in Python (100,000 items: 1-2 s); here the database
counts, sums and ranks, and hands back a dozen numbers whatever the number of items.

What they mean (spec invocation.md, "Metrics"): the logged calls are the call-log rows of at least one
record of the items; a successful async call is told by its item's ``busy_ms`` instead (one call of one
record). An item's completion latency is its ``updated_at`` minus its ``created_at``, each first cut to
whole milliseconds since the epoch (``streams.epoch_ms``: rounded down), for succeeded and dead items.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

import sqlalchemy as sa

from ..rules.calls import CallOutcome
from .records import ItemState
from .schema import invocation_calls, work_items
from .stream_figures import stream_latencies, stream_sums
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["CallTotals", "HandlerFigureReads", "ItemTotals", "StreamTotals", "nearest_rank_position"]

_FINISHED = (ItemState.SUCCEEDED, ItemState.DEAD)


class ItemTotals(NamedTuple):
    """The items of one kind: how many, how many dead, their latencies, the calls they told."""

    items: int
    dead: int
    finished: int
    """Succeeded or dead: the items that have a completion latency."""
    latency_sum_ms: int
    latency_p99_ms: int | None
    """The nearest-rank 99th percentile of the finished items' latencies (None: none finished)."""
    told_calls: int
    told_busy_ms: float | int
    """The sum of the told calls' ``busy_ms`` (the integer 0 when there is none, as Python's ``sum``)."""


class CallTotals(NamedTuple):
    """The logged calls (of at least one record) of the items of one kind."""

    calls: int
    records: int
    busy_ms: float | int
    """The sum of their ``busy_ms`` (the integer 0 when there is none, as Python's ``sum``)."""
    failed: int
    """Calls that did not succeed (failed or timed out)."""
    timed_out: int


class StreamTotals(NamedTuple):
    """The records of the batches of one stream, from the batches' payloads and results.

    A batch's payload holds its records still to run (``records``: ``[offset, key, record,
    arrived_ms, ...]``) and those that finished in an earlier attempt (``completed``:
    ``[arrived_ms, finished_ms]``); a dead batch's result counts its ``co_failed`` records.
    """

    unique: int
    """Each batch's ``size`` (the length of its ``records`` when it has none)."""
    dead: int
    """The records of the dead batches."""
    co_failed: int
    latencies: int
    """How many latencies: every completed record, and the records of succeeded and dead batches."""
    latency_sum_ms: int
    latency_p99_ms: int | None


def nearest_rank_position(count: int, share: float) -> int:
    """The 1-based rank of the nearest-rank percentile ``share`` among ``count`` values (``count`` >= 1).

    The one rank rule of every percentile vardiya reports: here in SQL, ``slots.report.nearest_rank``
    and ``invoke.metrics.percentile`` over values in memory."""
    return max(1, math.ceil(share * count))


def _epoch_ms(column: sa.ColumnElement[datetime], backend: Backend) -> sa.ColumnElement[int]:
    """A work-item time as whole milliseconds since the epoch, rounded down, in SQL.

    SQLite stores the integer of microseconds (``UTCMicros``), whose integer division rounds toward
    zero: one is taken off a negative remainder. PostgreSQL's ``extract(epoch ...)`` is an exact numeric.
    """
    if backend is Backend.POSTGRESQL:
        seconds = sa.extract("epoch", column)
        return sa.cast(sa.func.floor(seconds * 1000), sa.BigInteger)
    return _floor_thousandths(sa.type_coerce(column, sa.BigInteger))


def _latency_ms(
    finished: sa.ColumnElement[datetime], started: sa.ColumnElement[datetime], backend: Backend
) -> sa.ColumnElement[int]:
    """``_epoch_ms(finished) - _epoch_ms(started)`` in SQL, the same integer on every row.

    On PostgreSQL without ``numeric``: ``extract(epoch ...)`` is an exact numeric, and two of them per
    row were half the time of a metrics read over 100,000 items. With ``started = 1000 * s + r``
    microseconds (``0 <= r < 1000``) and ``finished = started + d``, the difference of the floored
    milliseconds is ``floor((r + d) / 1000)``: ``r`` is ``date_part('microseconds', ...)`` (the seconds
    field in microseconds, an integer held exactly in float8; a time zone's offset is whole seconds, so
    its remainder mod 1000 is the UTC one) and ``d`` the interval's float8 seconds times 10**6, rounded,
    exact while ``|d|`` is under 2**32 seconds (136 years).
    """
    if backend is not Backend.POSTGRESQL:
        return _epoch_ms(finished, backend) - _epoch_ms(started, backend)
    remainder = sa.cast(sa.func.date_part("microseconds", started), sa.BigInteger) % 1000
    micros = sa.cast(sa.func.round(sa.func.date_part("epoch", finished - started) * 1_000_000), sa.BigInteger)
    return _floor_thousandths(remainder + micros)


def _floor_thousandths(micros: sa.ColumnElement[int]) -> sa.ColumnElement[int]:
    """``micros`` // 1000 rounded down (SQL's integer division rounds toward zero)."""
    return (micros // 1000) - sa.case((micros % 1000 < 0, 1), else_=0)


def _ranked(query: sa.Select[int], value: sa.ColumnElement[int], count: int) -> sa.Select[int]:
    """The nearest-rank p99 of the ``count`` values ``query`` gives: the ``count - rank + 1``-th largest
    (the same value as the ``rank``-th smallest, ties included). Counting from the top keeps the sort
    to the top 1 % (a bounded top-N sort on both backends) instead of ordering every value."""
    above = count - nearest_rank_position(count, 0.99)
    return query.order_by(value.desc()).offset(above).limit(1)


def _sum_or_zero(value: float | int | None) -> float | int:
    return 0 if value is None else value


class HandlerFigureReads:
    """The aggregate reads the invocation metrics are made of."""

    _store: Store

    def _of_kind(self, kind: str, since: datetime | None) -> list[sa.ColumnElement[bool]]:
        w = work_items.c
        conditions = [w.kind == kind]
        if since is not None:
            conditions.append(w.created_at >= since)
        return conditions

    def item_totals(self, kind: str, *, since: datetime | None = None) -> ItemTotals:
        """The totals of the items of ``kind`` (created at or after ``since``)."""
        w = work_items.c
        of_kind = self._of_kind(kind, since)
        finished = w.state.in_(_FINISHED)
        latency = _latency_ms(w.updated_at, w.created_at, self._store.backend)
        totals = sa.select(
            sa.func.count(),
            sa.func.count().filter(w.state == ItemState.DEAD),
            sa.func.count().filter(finished),
            sa.func.sum(latency).filter(finished),
            sa.func.count(w.busy_ms),
            sa.func.sum(w.busy_ms),
        ).where(*of_kind)
        with self._store.reading() as connection:
            items, dead, done, latency_sum, told, told_busy = connection.execute(totals).one()
            p99 = None
            if done:
                ranked = sa.select(latency).where(*of_kind, finished)
                p99 = int(connection.execute(_ranked(ranked, latency, done)).scalar_one())
        return ItemTotals(
            items=items,
            dead=dead,
            finished=done,
            latency_sum_ms=int(latency_sum or 0),
            latency_p99_ms=p99,
            told_calls=told,
            told_busy_ms=_sum_or_zero(told_busy),
        )

    def call_totals(self, kind: str, *, since: datetime | None = None) -> CallTotals:
        """The totals of the logged calls of the items of ``kind`` (created at or after ``since``)."""
        q = invocation_calls.c
        # Driven by the call log (one row per failed call, or per stream batch call), each call's item
        # looked up by its id: an IN over the kind's item ids built a list of every item first.
        of_item = sa.exists().where(work_items.c.id == q.item_id, *self._of_kind(kind, since))
        query = sa.select(
            sa.func.count(),
            sa.func.sum(q.records),
            sa.func.sum(q.busy_ms),
            sa.func.count().filter(q.outcome != CallOutcome.SUCCEEDED.value),
            sa.func.count().filter(q.outcome == CallOutcome.TIMED_OUT.value),
        ).where(q.records > 0, of_item)
        with self._store.reading() as connection:
            calls, records, busy, failed, timed_out = connection.execute(query).one()
        return CallTotals(
            calls=calls, records=int(records or 0), busy_ms=_sum_or_zero(busy), failed=failed, timed_out=timed_out
        )

    def stream_totals(self, kind: str, *, since: datetime | None = None) -> StreamTotals:
        """The record figures of the batches of ``kind`` (created at or after ``since``), read in SQL from
        their JSON documents (SQLite ``json_extract``/``json_each``, PostgreSQL ``->>``/
        ``jsonb_array_elements``): no document reaches Python."""
        backend = self._store.backend
        of_kind = self._of_kind(kind, since)
        done_ms = _epoch_ms(work_items.c.updated_at, backend)
        latencies = stream_latencies(backend, of_kind, work_items.c.state.in_(_FINISHED), done_ms)
        with self._store.reading() as connection:
            unique, dead, co_failed = connection.execute(stream_sums(backend, of_kind)).one()
            count, total = connection.execute(sa.select(sa.func.count(), sa.func.sum(latencies.c.ms))).one()
            p99 = None
            if count:
                ranked = sa.select(latencies.c.ms)
                p99 = int(connection.execute(_ranked(ranked, latencies.c.ms, count)).scalar_one())
        return StreamTotals(
            unique=int(unique or 0),
            dead=int(dead or 0),
            co_failed=int(co_failed or 0),
            latencies=count,
            latency_sum_ms=int(total or 0),
            latency_p99_ms=p99,
        )
