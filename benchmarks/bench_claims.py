"""Claim + complete of no-op work items, items/s: vardiya's work-item loop against the raw loop of store.md.

vardiya: N items enqueued with ``store.items.enqueue_many`` (not timed), then, timed, the loop
``store.items.claim(100, owner=..., lease=60)`` -> ``store.items.complete_many(ids, owner=...)`` until a
claim comes back empty. That is everything vardiya does for an item: the lease, the attempt count, the
ownership check on completion, the attempt's times (a success is told by the item row), ``WorkItem``
objects (whose payloads are decoded when first read: this loop reads only the ids).

raw: a plain table ``(id, state, payload)`` with a partial index on the ready rows, N rows inserted (not
timed), then, timed, the claim-100-then-done loop until a claim comes back empty:
- SQLite (``sqlite3``, WAL, ``synchronous=NORMAL``): ``BEGIN IMMEDIATE; UPDATE t SET state='running'
  WHERE id IN (SELECT id FROM t WHERE state='ready' ORDER BY id LIMIT 100) RETURNING id; COMMIT;`` then
  ``UPDATE t SET state='done' WHERE id=?`` with ``executemany`` in one transaction.
- PostgreSQL (psycopg 3): the same, with ``FOR UPDATE SKIP LOCKED`` in the subquery.

Both sides start every run from an empty table (PostgreSQL: truncated, then ANALYZE after the inserts,
so both planners see fresh statistics). Run: ``.venv/bin/python benchmarks/bench_claims.py
[--backend sqlite|postgresql|both] [--rows N] [--runs R] [--pg-url URL]``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Comparison, Scratch, compare, header, parse_args, scratch, timed  # noqa: E402

from vardiya.store import ItemState, open_store  # noqa: E402

BATCH = 100
LEASE_S = 60
OWNER = "bench-worker"
KIND = "bench.noop"


def payload(number: int) -> dict[str, Any]:
    """A small payload, the same on both sides."""
    return {"n": number}


# -- vardiya -----------------------------------------------------------------------------------------


def vardiya_side(store: Any, rows: int, postgres: bool) -> Any:
    """A callable doing one vardiya run (fresh queue, then the timed loop) and returning items/s."""

    def prepare() -> None:
        with store.transaction() as connection:
            if postgres:
                # CASCADE: every table that refers to work items (attempts, dedup keys, streams, calls).
                connection.exec_driver_sql("TRUNCATE work_items, work_item_keys RESTART IDENTITY CASCADE")
            else:
                connection.exec_driver_sql("DELETE FROM work_item_attempts")
                connection.exec_driver_sql("DELETE FROM work_items")
                connection.exec_driver_sql("DELETE FROM work_item_keys")
        store.items.enqueue_many(KIND, ((f"item-{number}", payload(number)) for number in range(rows)))
        if postgres:
            with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.exec_driver_sql("ANALYZE work_items")
                connection.exec_driver_sql("ANALYZE work_item_attempts")

    def loop() -> int:
        done = 0
        while True:
            items = store.items.claim(BATCH, owner=OWNER, lease=LEASE_S)
            if not items:
                return done
            lost = store.items.complete_many([item.id for item in items], owner=OWNER)
            if lost:
                raise SystemExit(f"vardiya lost {len(lost)} leases during the benchmark")
            done += len(items)

    def run() -> float:
        prepare()
        rate = timed(loop)
        check_vardiya(store, rows)
        return rate

    return run


def check_vardiya(store: Any, rows: int) -> None:
    """Every item really went through: succeeded, once (a benchmark of a no-op loop proves nothing)."""
    counts = store.items.counts(kind=KIND)
    if counts[ItemState.SUCCEEDED] != rows:
        raise SystemExit(f"vardiya finished {counts[ItemState.SUCCEEDED]} of {rows} items: {counts}")


# -- raw ---------------------------------------------------------------------------------------------

RAW_PAYLOADS_CACHE: dict[int, list[tuple[str]]] = {}


def raw_payloads(rows: int) -> list[tuple[str]]:
    if rows not in RAW_PAYLOADS_CACHE:
        RAW_PAYLOADS_CACHE[rows] = [(json.dumps(payload(number), separators=(",", ":")),) for number in range(rows)]
    return RAW_PAYLOADS_CACHE[rows]


def raw_sqlite_side(path: str, rows: int) -> tuple[Any, Any]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, state TEXT NOT NULL, payload TEXT NOT NULL)")
    connection.execute("CREATE INDEX t_ready ON t (id) WHERE state = 'ready'")
    claim = (
        "UPDATE t SET state = 'running' WHERE id IN "
        f"(SELECT id FROM t WHERE state = 'ready' ORDER BY id LIMIT {BATCH}) RETURNING id"
    )
    finish = "UPDATE t SET state = 'done' WHERE id = ?"

    def prepare() -> None:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("DELETE FROM t")
        connection.executemany("INSERT INTO t (state, payload) VALUES ('ready', ?)", raw_payloads(rows))
        connection.execute("COMMIT")

    def loop() -> int:
        done = 0
        while True:
            connection.execute("BEGIN IMMEDIATE")
            ids = connection.execute(claim).fetchall()
            connection.execute("COMMIT")
            if not ids:
                return done
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(finish, ids)
            connection.execute("COMMIT")
            done += len(ids)

    def run() -> float:
        prepare()
        rate = timed(loop)
        (finished,) = connection.execute("SELECT count(*) FROM t WHERE state = 'done'").fetchone()
        if finished != rows:
            raise SystemExit(f"raw loop finished {finished} of {rows} rows")
        return rate

    return run, connection.close


def raw_postgres_side(conninfo: str, rows: int) -> tuple[Any, Any]:
    import psycopg

    connection = psycopg.connect(conninfo)
    with connection.transaction():
        connection.execute("CREATE TABLE t (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, state text NOT NULL, payload jsonb NOT NULL)")
        connection.execute("CREATE INDEX t_ready ON t (id) WHERE state = 'ready'")
    claim = (
        "UPDATE t SET state = 'running' WHERE id IN "
        f"(SELECT id FROM t WHERE state = 'ready' ORDER BY id LIMIT {BATCH} FOR UPDATE SKIP LOCKED) RETURNING id"
    )
    finish = "UPDATE t SET state = 'done' WHERE id = %s"

    def prepare() -> None:
        with connection.transaction():
            connection.execute("TRUNCATE t RESTART IDENTITY")
            with connection.cursor() as cursor, cursor.copy("COPY t (state, payload) FROM STDIN") as copy:
                for (text,) in raw_payloads(rows):
                    copy.write_row(("ready", text))
        connection.autocommit = True
        try:
            connection.execute("ANALYZE t")
        finally:
            connection.autocommit = False

    def loop() -> int:
        done = 0
        with connection.cursor() as cursor:
            while True:
                with connection.transaction():
                    ids = cursor.execute(claim).fetchall()
                if not ids:
                    return done
                with connection.transaction():
                    cursor.executemany(finish, ids)
                done += len(ids)

    def run() -> float:
        prepare()
        rate = timed(loop)
        with connection.transaction():
            (finished,) = connection.execute("SELECT count(*) FROM t WHERE state = 'done'").fetchone()
        if finished != rows:
            raise SystemExit(f"raw loop finished {finished} of {rows} rows")
        return rate

    return run, connection.close


# -- main --------------------------------------------------------------------------------------------


def bench(target: Scratch, rows: int, runs: int) -> Comparison:
    postgres = target.backend == "postgresql"
    store = open_store(target.store_url, migrate=True)
    if postgres:
        raw_run, raw_close = raw_postgres_side(target.raw_target, rows)
    else:
        raw_run, raw_close = raw_sqlite_side(target.raw_target, rows)
    try:
        return compare(
            backend=target.backend,
            what=f"claim {BATCH} + complete, {rows:,} no-op items, 1 process",
            unit="items/s",
            runs=runs,
            raw=raw_run,
            vardiya=vardiya_side(store, rows, postgres),
        )
    finally:
        raw_close()
        store.close()


def main() -> None:
    args = parse_args("claim + complete loop: vardiya work items vs the raw claim loop", default_rows=20_000)
    header("bench_claims", args)
    for backend in args.backends:
        with scratch(backend, args.pg_url) as target:
            bench(target, args.rows, args.runs)


if __name__ == "__main__":
    main()
