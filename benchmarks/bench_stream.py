"""Stream mode, records/s consumed: vardiya's Worker on a store-backed stream (batch 100, no-op handler).

vardiya, one run: a fresh store (SQLite: a new file; PostgreSQL: the tables emptied, then ANALYZE after
the append), N records ``{"n": i}`` appended with ``Invoker.append_many`` (timed on its own: the
"append" figure), then, timed, ``Worker(store, app).run(until_idle=True)`` with the worker's defaults,
in this process. The handler is ``App.handler("bench_stream", model="stream", batch_size=100)`` on
``def noop(record, context)``. Draining is everything the consumer does: cutting the waiting records
into batch work items of 100 (``Streams.cut``), claiming them, calling the handler once per record
through ``run_attempt`` under the ``retry_batch`` policy, and recording each batch's end (its state and
its call-log row). Every record is checked to have been handled exactly once and every batch to have
succeeded, else the script exits non-zero.

raw, the floor: a plain table ``s (id, payload)`` with the same N rows (inserted, not timed), consumed
in batches of 100 in the driver: ``DELETE FROM s WHERE id IN (SELECT id FROM s ORDER BY id LIMIT 100)
RETURNING id, payload`` (PostgreSQL: ``FOR UPDATE SKIP LOCKED`` in the subquery), the same no-op
called on each decoded payload, ``COMMIT``; SQLite with ``sqlite3`` (WAL, ``synchronous=NORMAL``,
``BEGIN IMMEDIATE``), PostgreSQL with psycopg 3.

Runs alternate raw, vardiya. Target (printed, not enforced): SQLite >= 100,000 records/s consumed;
PostgreSQL is measured for reference.

Run: ``.venv/bin/python benchmarks/bench_stream.py [--backend sqlite|postgresql|both] [--items 100000]
[--runs 3] [--pg-url URL] [--profile]``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlalchemy as sa  # noqa: E402
from _common import Scratch, load_average, scratch  # noqa: E402
from _invocation import (  # noqa: E402
    Series,
    analyze_postgres,
    empty_postgres,
    header,
    open_vardiya,
    parse_args,
    remove_sqlite,
    sqlite_run_url,
)

from vardiya.app import App  # noqa: E402
from vardiya.invoke.invoker import Invoker  # noqa: E402
from vardiya.service.worker import Worker  # noqa: E402
from vardiya.store import ItemState  # noqa: E402
from vardiya.store.schema import stream_records  # noqa: E402

HANDLER = "bench_stream"
BATCH = 100
TARGET_RECORDS_S = 100_000

CALLED: list[int] = []


def noop(record: Any, context: Any) -> None:
    """The benchmark handler: counts its calls and does nothing else."""
    CALLED.append(1)


def build_app() -> App:
    app = App("bench_stream")
    app.handler(HANDLER, model="stream", batch_size=BATCH)(noop)
    return app


def records(items: int) -> list[dict[str, int]]:
    return [{"n": number} for number in range(items)]


# -- vardiya --------------------------------------------------------------------------------------------


def vardiya_side(target: Scratch, items: int, appended: Series, profile: bool) -> Callable[[], float]:
    postgres = target.backend == "postgresql"
    app = build_app()
    kind = app.handlers[HANDLER].batch_kind

    def run() -> float:
        url = target.store_url if postgres else sqlite_run_url(target)
        store = open_vardiya(url)
        try:
            if postgres:
                empty_postgres(store)
            payloads = records(items)
            began = time.perf_counter()
            Invoker(store, app).append_many(HANDLER, payloads)
            appended.rates.append(items / (time.perf_counter() - began))
            if postgres:
                analyze_postgres(target.raw_target)
            CALLED.clear()
            worker = Worker(store, app)
            began = time.perf_counter()
            if profile:
                import cProfile
                import pstats

                profiler = cProfile.Profile()
                profiler.runcall(worker.run, until_idle=True)
                elapsed = time.perf_counter() - began
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            else:
                worker.run(until_idle=True)
                elapsed = time.perf_counter() - began
            check_vardiya(store, kind, items)
            return items / elapsed
        finally:
            store.close()
            if not postgres:
                remove_sqlite(url)

    return run


def check_vardiya(store: Any, kind: str, items: int) -> None:
    """Every record handled once, every batch succeeded, nothing left waiting."""
    counts = store.items.counts(kind=kind)
    with store.reading() as connection:
        waiting = connection.execute(sa.select(sa.func.count()).select_from(stream_records)).scalar_one()
    expected_batches = -(-items // BATCH)
    if len(CALLED) != items or counts[ItemState.SUCCEEDED] != expected_batches or waiting:
        raise SystemExit(
            f"vardiya handled {len(CALLED)} of {items} records; batches {dict(counts)}; {waiting} still waiting"
        )


# -- raw ------------------------------------------------------------------------------------------------


def raw_sqlite_side(path: str, items: int) -> tuple[Callable[[], float], Callable[[], None]]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("CREATE TABLE s (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
    consume = f"DELETE FROM s WHERE id IN (SELECT id FROM s ORDER BY id LIMIT {BATCH}) RETURNING id, payload"
    texts = [(json.dumps(record, separators=(",", ":")),) for record in records(items)]

    def run() -> float:
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany("INSERT INTO s (payload) VALUES (?)", texts)
        connection.execute("COMMIT")
        CALLED.clear()
        began = time.perf_counter()
        while True:
            connection.execute("BEGIN IMMEDIATE")
            rows = connection.execute(consume).fetchall()
            for _id, payload in rows:
                noop(json.loads(payload), None)
            connection.execute("COMMIT")
            if not rows:
                break
        elapsed = time.perf_counter() - began
        if len(CALLED) != items:
            raise SystemExit(f"raw loop handled {len(CALLED)} of {items} records")
        return items / elapsed

    return run, connection.close


def raw_postgres_side(conninfo: str, items: int) -> tuple[Callable[[], float], Callable[[], None]]:
    import psycopg

    connection = psycopg.connect(conninfo)
    with connection.transaction():
        connection.execute("CREATE TABLE s (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, payload jsonb NOT NULL)")
    consume = (
        f"DELETE FROM s WHERE id IN (SELECT id FROM s ORDER BY id LIMIT {BATCH} FOR UPDATE SKIP LOCKED) "
        "RETURNING id, payload::text"
    )
    texts = [json.dumps(record, separators=(",", ":")) for record in records(items)]

    def run() -> float:
        with connection.transaction(), connection.cursor() as cursor, cursor.copy("COPY s (payload) FROM STDIN") as copy:
            for text in texts:
                copy.write_row((text,))
        analyze_postgres(conninfo, ["s"])
        CALLED.clear()
        began = time.perf_counter()
        with connection.cursor() as cursor:
            while True:
                with connection.transaction():
                    rows = cursor.execute(consume).fetchall()
                    for _id, payload in rows:
                        noop(json.loads(payload), None)
                if not rows:
                    break
        elapsed = time.perf_counter() - began
        if len(CALLED) != items:
            raise SystemExit(f"raw loop handled {len(CALLED)} of {items} records")
        return items / elapsed

    return run, connection.close


# -- main -----------------------------------------------------------------------------------------------


def bench(target: Scratch, args: Any) -> None:
    items = args.items
    raw_run, raw_close = (raw_postgres_side if target.backend == "postgresql" else raw_sqlite_side)(
        target.raw_target, items
    )
    raw, vardiya, appended = Series("raw", "batch-delete loop", "records/s"), Series("vardiya", "Worker defaults", "records/s"), Series("vardiya", "append_many", "records/s")
    vardiya_run = vardiya_side(target, items, appended, args.profile)
    try:
        for _ in range(args.runs):
            raw.rates.append(raw_run())
            vardiya.rates.append(vardiya_run())
    finally:
        raw_close()
    print(f"[{target.backend}] stream, batch {BATCH}, no-op handler, {items:,} records per run: consumed")
    print(raw.line())
    print(vardiya.line())
    print(f"[{target.backend}] append (timed on its own, not part of the consumption)")
    print(appended.line())
    end_to_end = [1 / (1 / a + 1 / d) for a, d in zip(appended.rates, vardiya.rates, strict=True)]
    print(f"  vardiya append + consume, end to end: {sorted(end_to_end)[len(end_to_end) // 2]:,.0f} records/s")
    print(f"  ratio vardiya/raw: {vardiya.median / raw.median:.3f}")
    if target.backend == "sqlite":
        met = "met" if vardiya.median >= TARGET_RECORDS_S else "NOT met"
        print(f"  target: >= {TARGET_RECORDS_S:,} records/s consumed ... {met} ({vardiya.median:,.0f})   ({load_average()})")
    else:
        print(f"  (PostgreSQL: for reference, no target)   ({load_average()})")
    print(flush=True)


def main() -> None:
    def extra(parser: Any) -> None:
        parser.add_argument("--profile", action="store_true", help="cProfile every vardiya drain (slower)")

    args = parse_args("stream consumption: vardiya Worker vs a raw batch-delete loop", default_items=100_000, extra=extra)
    header("bench_stream", args, f"stream mode, batch {BATCH}, no-op handler, records/s consumed")
    for backend in args.backends:
        with scratch(backend, args.pg_url) as target:
            bench(target, args)


if __name__ == "__main__":
    main()
