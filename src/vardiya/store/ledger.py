"""The ledger: the durable record of what is done, one row per (job, record, period).

``done`` is sticky: a later ``failed`` mark for a record that is already done does not undo it (two runs
that raced on one record cannot turn a success into a failure). A deliberate rerun calls ``reset`` first.
Attempts add up over marks, so the row tells how many tries a record took.

Two ways in: ``mark`` takes ``LedgerEntry`` values; ``mark_rows`` takes *prepared rows*, plain tuples
already in the upsert's parameter order (``ROW_COLUMNS``) with their times converted by ``row_times``.
The tick runner marks every record of a tick, and building an entry object per record and converting
it again per chunk cost it more than the database did (benchmarks/README.md, "Where a tick's time
goes"); it builds each prepared row once instead.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from ..errors import InvalidInput
from ..limits import PERIOD_MAX, check_key, check_name
from .claims import RecordClaims
from .hot import _LEDGER_COLUMNS, HotSQL, hot_sql
from .id_fingerprints import Fingerprint, fingerprint_columns, fingerprint_of
from .ledger_changes import LedgerChanges
from .records import LedgerEntry, LedgerRow, LedgerStatus, record_key
from .schema import ledger
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["ROW_COLUMNS", "Ledger", "LedgerSample", "PeriodFigures"]

#: Records per transaction for bulk marks and per IN-list for lookups.
CHUNK_SIZE = 1_000
#: Durations the ledger keeps of the periods' figures it read (``period_figures``), over all periods.
FIGURES_KEPT_MAX = 2_000_000
_DONE = LedgerStatus.DONE.value

#: The fields of a prepared row, in order: the parameters of the upsert in ``hot.py``.
ROW_COLUMNS = (
    "job", "period", "record", "slot", "status", "attempts", "first_attempt_at", "last_attempt_at",
    "duration_ms", "rows", "bytes", "error",
)
if _LEDGER_COLUMNS != ROW_COLUMNS:  # the runner builds rows in this order; a silent mismatch would corrupt them
    raise ImportError(f"hot.py's ledger upsert takes {_LEDGER_COLUMNS}; update ledger.ROW_COLUMNS and its callers")

#: Rows are upserted in primary-key order (see ``mark_rows``).
_PRIMARY_KEY = itemgetter(0, 1, 2)
_UTC = UTC
_SECOND = timedelta(seconds=1)


def _time_converter(hot: HotSQL) -> Callable[[datetime], Any]:
    """``hot.time`` for a run of timestamps, with the text of each UTC second formatted once.

    A tick takes two timestamps per record, all distinct, and formatting a datetime field by field
    (``hot.time``) cost more than the rest of the record's row. Consecutive timestamps almost always
    fall in the same second, so the converter keeps the text of the last second it formatted (up to
    the microseconds) and only appends the microseconds while timestamps stay in it. The text comes
    from ``hot.time`` itself; should its format ever stop ending in six microsecond digits, this falls
    back to calling it for every timestamp.
    """
    slow = hot.time
    if hot.backend is not Backend.SQLITE:
        # The driver takes the datetime itself; only a non-UTC (or a naive, rejected) one needs hot.time.
        return lambda moment: moment if moment.tzinfo is _UTC else slow(moment)
    probe = datetime(2001, 2, 3, 4, 5, 6, 789012, tzinfo=_UTC)
    if not str(slow(probe)).endswith(".789012"):
        return slow
    low = high = probe  # the second whose text is ``prefix``: [low, high); empty until the first call
    prefix = ""

    def convert(moment: datetime) -> Any:
        nonlocal low, high, prefix
        # Only UTC: microseconds of another zone's time are not those of its UTC text if the offset
        # has a fraction of a second (rare, but a datetime allows it); a naive one must fail in slow.
        if moment.tzinfo is _UTC:
            if low <= moment < high:
                return f"{prefix}{moment.microsecond:06d}"
            text: str = slow(moment)
            low = moment.replace(microsecond=0)
            high = low + _SECOND
            prefix = text[:-6]
            return text
        return slow(moment)

    return convert


def _row(row: sa.Row[Any]) -> LedgerRow:
    return LedgerRow(
        job=row.job,
        period=row.period,
        record=row.record,
        slot=row.slot,
        status=LedgerStatus(row.status),
        attempts=row.attempts,
        first_attempt_at=row.first_attempt_at,
        last_attempt_at=row.last_attempt_at,
        duration_ms=row.duration_ms,
        rows=row.rows,
        bytes=row.bytes,
        error=row.error,
    )


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


#: Ledger rows fetched per round trip when a period's rows are streamed (``Ledger.samples``).
_STREAM_CHUNK = 5_000


class LedgerSample(NamedTuple):
    """One ledger row as the report needs it; ``record`` (the ledger key) only names failed records."""

    slot: int | None
    duration_ms: float
    rows: int
    bytes: int
    status: LedgerStatus | str
    record: str | None = None


@dataclass(frozen=True, kw_only=True)
class PeriodFigures:
    """What the ledger report needs of one period, per slot 0..B-1 (``Ledger.period_figures``).

    ``durations`` are every placed row's ``duration_ms``, unsorted; ``failed_records`` the first
    ``named`` failed records in (slot, record) order. Rows without a slot or outside 0..B-1 are only
    counted (``unplaced``). ``statuses`` are the distinct statuses of the period's rows.
    """

    durations: tuple[array[float], ...]
    rows: tuple[int, ...]
    bytes: tuple[int, ...]
    failed: tuple[int, ...]
    unplaced: int
    failed_records: tuple[str, ...]
    statuses: frozenset[str]


class Ledger:
    """The ledger operations of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._hot = hot_sql(store.backend)
        self._generic_plans = store.backend is Backend.POSTGRESQL
        #: Which run holds which records while a tick runs (``claims.py``).
        self.claims = RecordClaims(store)
        #: The per-slot change tokens every write below sets (``ledger_changes.py``).
        self.changes = LedgerChanges(store)
        # (job, period, slots, named) -> (the period's markers read before the rows, its figures)
        self._figures: dict[tuple[str, str, int, int], tuple[dict[int, int], PeriodFigures]] = {}
        self._figures_size = 0

    def mark(self, job: str, period: str, entries: Iterable[LedgerEntry], *, chunk_size: int = CHUNK_SIZE) -> int:
        """Record outcomes for many records, one transaction per chunk; returns how many were marked.

        The upsert is the hot statement of ``hot.py``, run as driver SQL with plain tuples. The job is a
        name and the period a key of at most 64 characters (``limits``); every entry is a
        ``LedgerEntry``: a chunk with anything else is refused before it is written.
        """
        check_name(job, "a ledger job name")
        check_key(period, "a ledger period", PERIOD_MAX)
        marked = 0
        hot = self._hot
        for chunk in _chunks(entries, chunk_size):
            for entry in chunk:
                if entry.__class__ is not LedgerEntry:
                    raise InvalidInput(f"ledger.mark takes LedgerEntry values, got {entry!r}")
            marked += self._upsert(hot.ledger_rows(job, period, chunk))
        return marked

    def row_times(self) -> Callable[[datetime], Any]:
        """A converter of timestamps to what a prepared row holds for them (``hot.time``, made fast).

        Keep one for a run of many rows: it remembers the text of the last second it converted.
        A naive datetime is rejected, as everywhere in the store.
        """
        return _time_converter(self._hot)

    def mark_rows(
        self,
        rows: list[tuple[Any, ...]],
        *,
        chunk_size: int = CHUNK_SIZE,
        release: tuple[str, str, str, Sequence[str]] | None = None,
    ) -> int:
        """Record prepared rows (``ROW_COLUMNS``, times from ``row_times``), one transaction per chunk.

        The same upsert as ``mark``, without building entries. ``rows`` is sorted in place into
        primary-key order: concurrent marks of overlapping records then take their row locks in one
        order, so they wait for each other instead of deadlocking on PostgreSQL. ``release`` is
        (owner, job, period, keys): those record claims are dropped in the last chunk's transaction,
        so a claimed record is never free before its outcome is in the ledger.
        """
        rows.sort(key=_PRIMARY_KEY)
        if len(rows) <= chunk_size:
            if not rows:
                if release is not None:
                    self.claims.release(*release)
                return 0
            return self._upsert(rows, release)
        starts = range(0, len(rows), chunk_size)
        return sum(
            self._upsert(rows[at : at + chunk_size], release if at == starts[-1] else None) for at in starts
        )

    def _upsert(
        self, rows: Sequence[tuple[Any, ...]], release: tuple[str, str, str, Sequence[str]] | None = None
    ) -> int:
        """One transaction of the ledger upsert over sorted prepared rows.

        PostgreSQL sessions force custom plans (``store/engine.py``), which the slot sources' anti-join
        needs; the upsert's plan never depends on its values, and planning it afresh for every row
        took a third of its time (13k against 22k rows/s). So its transaction uses the generic plan.
        """
        with self._store.transaction() as connection:
            if self._generic_plans:
                connection.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
            connection.exec_driver_sql(self._hot.ledger_upsert, rows)
            self.changes.touch(connection, {(row[0], row[1], row[3]) for row in rows})
            if release is not None:
                self.claims.release(*release, connection=connection)
        return len(rows)

    def refresh_statistics(self) -> None:
        """Let PostgreSQL's planner see the ledger's real size (``ANALYZE ledger``); a no-op on SQLite.

        Autovacuum does this on its own schedule. A tick that has marked many rows calls it (while it
        runs, and at its end), so that its own and the next tick's anti-join are planned as an index
        probe per id, not as a rescan of rows the planner believes are not there (which made a second
        tick of a fresh ledger, and the late pages of a big tick, quadratic).
        """
        if self._store.backend is not Backend.POSTGRESQL:
            return
        with self._store.transaction() as connection:
            connection.exec_driver_sql("ANALYZE ledger")

    def reset(self, job: str, period: str, records: Iterable[int | str] | None = None) -> int:
        """Forget outcomes so the records run again (a deliberate rerun); all of the period without records."""
        c = ledger.c
        deleted = 0
        with self._store.transaction() as connection:
            self.changes.touch_period(connection, job, period)
            if records is None:
                return connection.execute(sa.delete(ledger).where(c.job == job, c.period == period)).rowcount
            for chunk in _chunks((record_key(r) for r in records), CHUNK_SIZE):
                deleted += connection.execute(
                    sa.delete(ledger).where(c.job == job, c.period == period, c.record.in_(chunk))
                ).rowcount
        return deleted

    def get(self, job: str, record: int | str, period: str) -> LedgerRow | None:
        """The ledger row of one record in one period, or None."""
        c = ledger.c
        with self._store.reading() as connection:
            row = connection.execute(
                sa.select(ledger).where(c.job == job, c.period == period, c.record == record_key(record))
            ).first()
        return _row(row) if row is not None else None

    def completed(self, job: str, record: int | str, period: str) -> bool:
        """Whether the record is done for the period."""
        row = self.get(job, record, period)
        return row is not None and row.status is LedgerStatus.DONE

    @staticmethod
    def _settled(give_up_after: int | None) -> sa.ColumnElement[bool]:
        """Done, or (with ``give_up_after``) failed that many times: nothing more to run this period."""
        c = ledger.c
        if give_up_after is None:
            return c.status == _DONE
        return sa.or_(c.status == _DONE, c.attempts >= give_up_after)

    def done_among(
        self, job: str, period: str, records: Sequence[int | str], *, give_up_after: int | None = None
    ) -> set[str]:
        """Which of ``records`` are settled (as ledger keys); looked up in chunks, for sources in other databases.

        Settled means done, or with ``give_up_after`` also failed that many times.
        """
        c = ledger.c
        done: set[str] = set()
        with self._store.reading() as connection:
            for chunk in _chunks((record_key(r) for r in records), CHUNK_SIZE):
                done.update(
                    connection.execute(
                        sa.select(c.record).where(
                            c.job == job, c.period == period, self._settled(give_up_after), c.record.in_(chunk)
                        )
                    ).scalars()
                )
        return done

    def not_done(
        self, job: str, period: str, records: Iterable[int | str], *, give_up_after: int | None = None
    ) -> Iterator[int | str]:
        """The records, in their order, that are not settled for the period; reads the ledger in chunks."""
        for chunk in _chunks(records, CHUNK_SIZE):
            done = self.done_among(job, period, chunk, give_up_after=give_up_after)
            yield from (record for record in chunk if record_key(record) not in done)

    def not_done_clause(
        self,
        job: str,
        period: str,
        record_column: sa.ColumnElement[Any],
        *,
        give_up_after: int | None = None,
    ) -> sa.ColumnElement[bool]:
        """A SQL condition "this record is not settled", for a source query in the store's own database.

        It is an anti-join (``NOT EXISTS`` on the ledger's primary key), so the ledger is never loaded
        into Python and only not-done ids leave the database.
        """
        c = ledger.c
        return ~sa.exists().where(
            c.job == job,
            c.period == period,
            c.record == sa.cast(record_column, sa.String),
            self._settled(give_up_after),
        )

    @staticmethod
    def _in_slot(slot: int) -> sa.ColumnElement[bool]:
        """Rows of the slot, and rows marked without a slot (which may belong to it)."""
        return sa.or_(ledger.c.slot == slot, ledger.c.slot.is_(None))

    def settled_in_slot(self, job: str, period: str, slot: int, *, give_up_after: int | None = None) -> set[str]:
        """The ledger keys of one slot's settled records in a period: one indexed query, slot-sized.

        Rows marked without a slot are included: they may be of this slot, and an extra key only
        filters out a record that is settled anyway.
        """
        c = ledger.c
        with self._store.reading() as connection:
            return set(
                connection.execute(
                    sa.select(c.record).where(
                        c.job == job, c.period == period, self._in_slot(slot), self._settled(give_up_after)
                    )
                ).scalars()
            )

    def settled_by_slot(self, job: str, period: str, *, give_up_after: int | None = None) -> dict[int | None, set[str]]:
        """The ledger keys of a period's settled records, by slot (None: rows marked without a slot).

        One index-only read of the period, for a reader that needs most of its slots at once (a report
        with nothing kept yet): per slot, ``settled_in_slot`` would read the rows marked without a slot
        once per slot.
        """
        c = ledger.c
        found: dict[int | None, set[str]] = {}
        with self._store.reading() as connection:
            rows = connection.execute(
                sa.select(c.slot, c.record).where(c.job == job, c.period == period, self._settled(give_up_after))
            )
            for slot, record in rows:
                keys = found.get(slot)
                if keys is None:
                    keys = found[slot] = set()
                keys.add(record)
        return found

    def settled_fingerprint(self, job: str, period: str, slot: int, *, give_up_after: int | None = None) -> Fingerprint:
        """The ``id_fingerprints`` fingerprint of one slot's settled records (rows marked with the slot).

        One aggregate over the slot's rows of ``ix_ledger_job_period_slot``. The keys of an integer
        source's job are integers' text (``record_key``). On PostgreSQL any other key counts as a row
        but not as an id (its cast would fail); SQLite reads a key by its leading digits (``'12x'`` as
        12, ``'x'`` as 0), which only a job whose source changed from string to integer ids can hold,
        and checking each key's text tripled the aggregate's cost (36 against 90 ms a 41,667-row slot).
        """
        c = ledger.c
        numeric: sa.ColumnElement[Any]
        if self._store.backend is Backend.POSTGRESQL:
            numeric = sa.case((c.record.regexp_match("^-?[0-9]{1,18}$"), sa.cast(c.record, sa.BigInteger)))
        else:
            numeric = sa.cast(c.record, sa.Integer)
        query = sa.select(*fingerprint_columns(numeric)).where(
            c.job == job, c.period == period, c.slot == slot, self._settled(give_up_after)
        )
        with self._store.reading() as connection:
            return fingerprint_of(connection.execute(query).one())

    def count_settled(
        self,
        job: str,
        period: str,
        slot: int,
        *,
        give_up_after: int | None = None,
        include_unslotted: bool = False,
    ) -> int:
        """How many of one slot's records are settled in a period (an index-only count).

        ``include_unslotted`` also counts rows marked without a slot, which may belong to it: then a
        zero really means "nothing to filter out". Without it the count is exact for the slot, which
        is what "is the whole slot settled?" needs.
        """
        c = ledger.c
        in_slot = self._in_slot(slot) if include_unslotted else c.slot == slot
        with self._store.reading() as connection:
            return int(
                connection.execute(
                    sa.select(sa.func.count()).where(
                        c.job == job, c.period == period, in_slot, self._settled(give_up_after)
                    )
                ).scalar_one()
            )

    def first_period(self, job: str) -> str | None:
        """The earliest period the ledger has for the job: where its history begins."""
        c = ledger.c
        with self._store.reading() as connection:
            return connection.execute(sa.select(sa.func.min(c.period)).where(c.job == job)).scalar_one()

    def count_done(self, job: str, period: str, *, slot: int | None = None) -> int:
        """How many records of the period (of one slot, when given) are done."""
        c = ledger.c
        query = sa.select(sa.func.count()).where(c.job == job, c.period == period, c.status == _DONE)
        if slot is not None:
            query = query.where(c.slot == slot)
        with self._store.reading() as connection:
            return int(connection.execute(query).scalar_one())

    def rows(self, job: str, period: str) -> list[LedgerRow]:
        """Every ledger row of a job's period, by record."""
        c = ledger.c
        with self._store.reading() as connection:
            result = connection.execute(
                sa.select(ledger).where(c.job == job, c.period == period).order_by(c.record)
            )
            return [_row(row) for row in result]

    def counts(self, job: str, period: str) -> dict[LedgerStatus, int]:
        """How many records of the period are done and failed."""
        c = ledger.c
        with self._store.reading() as connection:
            found: dict[str, int] = dict(
                connection.execute(
                    sa.select(c.status, sa.func.count())
                    .where(c.job == job, c.period == period)
                    .group_by(c.status)
                ).all()
            )
        return {status: found.get(status.value, 0) for status in LedgerStatus}

    def periods(self, job: str) -> list[str]:
        """The periods the ledger has rows for, in order."""
        c = ledger.c
        with self._store.reading() as connection:
            return list(
                connection.execute(sa.select(c.period).where(c.job == job).distinct().order_by(c.period)).scalars()
            )

    def period_figures(self, job: str, period: str, slots: int, *, named: int = 12) -> PeriodFigures:
        """The per-slot figures of a period for the ledger report (``_read_figures``), kept per period.

        A period's figures change only when its ledger rows do, and every such write sets the
        period's change markers (``ledger_changes.py``); so the figures read under markers that are
        still the period's markers now are the figures now. A closed period (the dashboard's history,
        a report run twice) costs one indexed read of its markers; the current period is read again
        after each tick. At most ``FIGURES_KEPT_MAX`` durations are kept over all periods.
        """
        tokens = self.changes.markers(job, period)  # before the rows: a write after it changes them
        key = (job, period, slots, named)
        kept = self._figures.get(key)
        if kept is not None and kept[0] == tokens:
            return kept[1]
        figures = self._read_figures(job, period, slots, named)
        size = sum(len(each) for each in figures.durations)
        if self._figures_size + size > FIGURES_KEPT_MAX:
            self._figures.clear()
            self._figures_size = 0
        if size <= FIGURES_KEPT_MAX:
            self._figures[key] = (tokens, figures)
            self._figures_size += size
        return figures

    def _read_figures(self, job: str, period: str, slots: int, named: int) -> PeriodFigures:
        """The per-slot figures of a period for the ledger report, in three queries.

        The counts (all rows, failed rows, by slot and status) are one grouped count, index-only on
        ``ix_ledger_job_period_slot``; the failed records named are an indexed ``LIMIT``. Durations,
        rows and bytes are read in one scan of the period in primary-key order, through the driver's
        cursor (no row objects): the report's total is ``math.fsum`` of the durations, the exactly
        rounded sum that SQL's ``SUM`` over floats is not, and its nearest-rank percentiles pick from
        them. (Summing rows and bytes in SQL as well would read the period's rows through the slot
        index, one lookup a row, or sort them for the grouping: several times the cost of the scan.)
        """
        c = ledger.c
        in_period = (c.job == job, c.period == period)
        counted = sa.select(c.slot, c.status, sa.func.count()).where(*in_period).group_by(c.slot, c.status)
        failed_named = (
            sa.select(c.record)
            .where(*in_period, c.slot >= 0, c.slot < slots, c.status == LedgerStatus.FAILED.value)
            .order_by(c.slot, c.record)
            .limit(named)
        )
        scan = sa.select(c.slot, c.duration_ms, c.rows, c.bytes).where(*in_period)
        durations = tuple(array("d") for _ in range(slots))
        rows, sizes, failed = [0] * slots, [0] * slots, [0] * slots
        unplaced = 0
        statuses: set[str] = set()
        with self._store.reading() as connection:
            for slot, status, count in connection.execute(counted):
                status = getattr(status, "value", status)
                statuses.add(status)
                if slot is None or not 0 <= slot < slots:
                    unplaced += count
                elif status == LedgerStatus.FAILED.value:
                    failed[slot] += count
            records = tuple(str(record) for record in connection.execute(failed_named).scalars())
            result = connection.execute(scan)
            try:
                for slot, duration, row_count, size in result.cursor.fetchall():
                    if slot is not None and 0 <= slot < slots:
                        durations[slot].append(duration)
                        rows[slot] += row_count
                        sizes[slot] += size
            finally:
                result.close()
        return PeriodFigures(
            durations=durations,
            rows=tuple(rows),
            bytes=tuple(sizes),
            failed=tuple(failed),
            unplaced=unplaced,
            failed_records=records,
            statuses=frozenset(statuses),
        )

    def samples(self, job: str, period: str) -> Iterator[LedgerSample]:
        """The period's ledger rows, streamed in slot order (the ledger's (job, period, slot) index).

        One read transaction stays open while the caller iterates; read them to the end.
        """
        c = ledger.c
        query = (
            sa.select(c.slot, c.duration_ms, c.rows, c.bytes, c.status, c.record)
            .where(c.job == job, c.period == period)
            .order_by(c.slot, c.record)
            .execution_options(yield_per=_STREAM_CHUNK)
        )
        with self._store.reading() as connection:
            for row in connection.execute(query):
                yield LedgerSample(row.slot, row.duration_ms, row.rows, row.bytes, row.status, row.record)
