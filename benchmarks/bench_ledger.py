"""Ledger bulk marking, records/s: ``store.ledger.mark`` against a raw driver ``executemany``.

vardiya: ``store.ledger.mark(job, period, entries)`` of N ``LedgerEntry`` (status done, start/finish
times, duration, rows, bytes and slot set), which vardiya writes as an upsert, one transaction per
1,000-record chunk.

raw: the same rows, as tuples built before the clock starts, inserted with the driver's ``executemany``
(plain ``INSERT``) into a table of the same shape (``ledger``'s columns, types, primary key and secondary
indexes, copied from vardiya's schema at run time; WITHOUT ROWID on SQLite), one transaction per 1,000-row chunk:
- SQLite: ``sqlite3`` directly on its own file, WAL, ``synchronous=NORMAL``, ``BEGIN IMMEDIATE``.
- PostgreSQL: psycopg 3, ``cursor.executemany`` inside one transaction per chunk.

Both tables are emptied between runs (not timed). Run: ``.venv/bin/python benchmarks/bench_ledger.py
[--backend sqlite|postgresql|both] [--rows N] [--runs R] [--pg-url URL]``.
"""

from __future__ import annotations

import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlalchemy as sa  # noqa: E402
from _common import Comparison, Scratch, compare, header, parse_args, scratch, timed  # noqa: E402

from vardiya.store import LedgerEntry, LedgerStatus, open_store  # noqa: E402
from vardiya.store.schema import ledger  # noqa: E402

CHUNK = 1_000
JOB = "bench-job"
PERIOD = "2026-12-01"
RAW_TABLE = "raw_ledger"
COLUMNS = (
    "job",
    "period",
    "record",
    "slot",
    "status",
    "attempts",
    "first_attempt_at",
    "last_attempt_at",
    "duration_ms",
    "rows",
    "bytes",
    "error",
)
#: SQLAlchemy's SQLite storage format for DateTime, which vardiya's rows end up in.
SQLITE_TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def make_entries(count: int) -> list[LedgerEntry]:
    """The records one run marks: all done, every measured field set."""
    start = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    finish = start + timedelta(milliseconds=12)
    return [
        LedgerEntry(
            record=record,
            status=LedgerStatus.DONE,
            started_at=start,
            finished_at=finish,
            duration_ms=12.5,
            rows=record % 1_000,
            bytes=(record % 1_000) * 64,
            slot=record % 24,
        )
        for record in range(count)
    ]


def raw_rows(entries: list[LedgerEntry], backend: str) -> list[tuple[Any, ...]]:
    """The same rows as plain tuples in the form the driver stores them (text times on SQLite)."""

    def moment(value: datetime | None) -> Any:
        if value is None or backend == "postgresql":
            return value
        return value.astimezone(UTC).strftime(SQLITE_TIME_FORMAT)

    return [
        (
            JOB,
            PERIOD,
            str(entry.record),
            entry.slot,
            entry.status.value,
            entry.attempts,
            moment(entry.started_at),
            moment(entry.finished_at or entry.started_at),
            entry.duration_ms,
            entry.rows,
            entry.bytes,
            entry.error,
        )
        for entry in entries
    ]


def create_raw_table(url: str) -> None:
    """A table with exactly the ledger's columns, types, primary key and indexes, under another name.

    Copied from vardiya's schema when the benchmark runs, so index maintenance costs the same on both sides.
    """
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        table = ledger.to_metadata(sa.MetaData(), name=RAW_TABLE)
        table.primary_key.name = f"pk_{RAW_TABLE}"
        for index in table.indexes:
            index.name = f"{RAW_TABLE}_{index.name}"
        table.create(engine)
    finally:
        engine.dispose()


def insert_sql(placeholder: str) -> str:
    marks = ", ".join([placeholder] * len(COLUMNS))
    return f'INSERT INTO {RAW_TABLE} ({", ".join(COLUMNS)}) VALUES ({marks})'


def bench_sqlite(target: Scratch, rows: int, runs: int) -> Comparison:
    entries = make_entries(rows)
    tuples = raw_rows(entries, "sqlite")
    create_raw_table(f"sqlite:///{target.raw_target}")
    raw = sqlite3.connect(target.raw_target, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("PRAGMA synchronous = NORMAL")
    statement = insert_sql("?")
    store = open_store(target.store_url)

    def raw_run() -> float:
        raw.execute(f"DELETE FROM {RAW_TABLE}")

        def run() -> int:
            for offset in range(0, len(tuples), CHUNK):
                raw.execute("BEGIN IMMEDIATE")
                raw.executemany(statement, tuples[offset : offset + CHUNK])
                raw.execute("COMMIT")
            return len(tuples)

        return timed(run)

    def vardiya_run() -> float:
        with store.transaction() as connection:
            connection.execute(sa.delete(ledger))
        return timed(lambda: store.ledger.mark(JOB, PERIOD, entries))

    try:
        result = compare(
            backend="sqlite",
            what=f"ledger mark of {rows:,} records (1,000 per transaction)",
            unit="records/s",
            runs=runs,
            raw=raw_run,
            vardiya=vardiya_run,
        )
        check_marked(store, rows)
        return result
    finally:
        raw.close()
        store.close()


def bench_postgres(target: Scratch, rows: int, runs: int) -> Comparison:
    import psycopg

    entries = make_entries(rows)
    tuples = raw_rows(entries, "postgresql")
    store = open_store(target.store_url, migrate=True)
    create_raw_table(target.store_url)
    raw = psycopg.connect(target.raw_target)
    statement = insert_sql("%s")

    def raw_run() -> float:
        with raw.transaction():
            raw.execute(f"TRUNCATE {RAW_TABLE}")

        def run() -> int:
            with raw.cursor() as cursor:
                for offset in range(0, len(tuples), CHUNK):
                    with raw.transaction():
                        cursor.executemany(statement, tuples[offset : offset + CHUNK])
            return len(tuples)

        return timed(run)

    def vardiya_run() -> float:
        with store.transaction() as connection:
            connection.exec_driver_sql("TRUNCATE ledger")
        return timed(lambda: store.ledger.mark(JOB, PERIOD, entries))

    try:
        result = compare(
            backend="postgresql",
            what=f"ledger mark of {rows:,} records (1,000 per transaction)",
            unit="records/s",
            runs=runs,
            raw=raw_run,
            vardiya=vardiya_run,
        )
        check_marked(store, rows)
        return result
    finally:
        raw.close()
        store.close()


def check_marked(store: Any, rows: int) -> None:
    """The last vardiya run really wrote every record as done (a benchmark of a no-op proves nothing)."""
    counts = store.ledger.counts(JOB, PERIOD)
    if counts[LedgerStatus.DONE] != rows:
        raise SystemExit(f"vardiya marked {counts[LedgerStatus.DONE]} records done, expected {rows}")


def main() -> None:
    args = parse_args("ledger bulk marking: vardiya ledger.mark vs raw executemany", default_rows=100_000)
    header("bench_ledger", args)
    for backend in args.backends:
        with scratch(backend, args.pg_url) as target:
            if backend == "sqlite":
                bench_sqlite(target, args.rows, args.runs)
            else:
                bench_postgres(target, args.rows, args.runs)


if __name__ == "__main__":
    main()
