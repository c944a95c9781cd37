"""Selecting one of 24 slots' ids from a big table: vardiya's ``SqlTableSource`` against raw SELECTs.

The table is ``users (id PRIMARY KEY, name)`` with ids 1..N, given the slot column and (slot, id) index
of ``add_slot_index`` (scheme: 24 slots, assign mod). One slot holds N / 24 ids. Timed, in one process,
alternating, medians of ``--runs`` (after one untimed warm-up of each, so every side reads a warm cache):

- vardiya other-db: ``SqlTableSource(url, "users").records(...)`` for slot 15, drained, with the store in
  another database (SQLite: a temporary file; PostgreSQL: a second scratch database) and an empty
  ledger: the indexed slot predicate pushed down, ids paged by keyset in chunks of 5,000, each chunk
  filtered through ``store.ledger.done_among`` (IN-lists of 1,000).
- vardiya same-db: the store lives in the table's database, so the query carries the ledger anti-join.
- raw indexed SELECT: the driver (sqlite3, psycopg) running ``SELECT id FROM users WHERE
  vardiya_slot_24_mod = 15`` once and fetching every row. The target is vardiya within 1.5x of it.
- the same work done raw, for the ratio of vardiya's own overhead: the raw SELECT with the ledger
  anti-join (for same-db), and the raw SELECT followed by the driver's own IN-list look-ups of 1,000
  keys in the other database (for other-db).
- raw full scan: ``SELECT id FROM users WHERE id % 24 = 15``, what a table without the slot index costs.

With several ``--rows`` the last lines compare the sizes: an indexed selection costs in proportion to
the slot (ns per selected id stays flat as the table grows), which is what the index is for.

Building: SQLite loads with ``executemany`` of generated tuples in one transaction (``journal_mode=OFF``,
``synchronous=OFF``) and keeps the built file in ``benchmarks/.work/`` for later runs (``--rebuild`` to
redo it). PostgreSQL loads with ``COPY`` into a scratch database that is dropped at the end.

Run: ``.venv/bin/python benchmarks/bench_slot_select.py [--backend sqlite|postgresql|both]
[--rows 1000000 10000000] [--runs 3] [--pg-url URL] [--rebuild]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_PG_URL, scratch_postgres

from vardiya.slots import SlotScheme
from vardiya.slots.index import add_slot_index
from vardiya.slots.sql_source import SqlTableSource
from vardiya.store import Store, open_store

WORK = Path(__file__).resolve().parent / ".work"
SCHEME = SlotScheme(slots=24)
SLOT = 15
COLUMN = "vardiya_slot_24_mod"
JOB = "bench-slot-select"
PERIOD = "2026-12-01"
TARGET = 1.5
LOAD_CHUNK = 200_000
LEDGER_CHUNK = 1_000
INDEXED_SQL = f"SELECT id FROM users WHERE {COLUMN} = {SLOT}"
SCAN_SQL = f"SELECT id FROM users WHERE id % {SCHEME.slots} = {SLOT}"
#: The raw form of the same-database query: the indexed SELECT with the ledger anti-join ({p}: placeholder).
ANTI_JOIN_SQL = (
    INDEXED_SQL + " AND NOT EXISTS (SELECT 1 FROM ledger WHERE ledger.job = {p} AND ledger.period = {p}"
    " AND ledger.record = CAST(users.id AS TEXT) AND ledger.status = 'done')"
)
#: The raw form of the other-database filter: which of a chunk of ids the ledger has as done.
DONE_AMONG_SQL = (
    "SELECT record FROM ledger WHERE job = {p} AND period = {p} AND status = 'done' AND record IN ({keys})"
)

RAW = "raw indexed SELECT"
RAW_ANTI_JOIN = "raw indexed SELECT + ledger anti-join"
RAW_IN_LISTS = "raw indexed SELECT + ledger IN-lists"
VARDIYA_OTHER = "vardiya other-db (chunked ledger filter)"
VARDIYA_SAME = "vardiya same-db (ledger anti-join)"
SCAN = "raw full scan id % 24 = 15"
#: Each vardiya side against the raw loop doing the same work.
SAME_WORK = {VARDIYA_OTHER: RAW_IN_LISTS, VARDIYA_SAME: RAW_ANTI_JOIN}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[10_000_000], help="table sizes (default 10000000)"
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs per side (default 3)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("VARDIYA_BENCH_POSTGRES", DEFAULT_PG_URL),
        help=f"PostgreSQL server for the scratch databases (default $VARDIYA_BENCH_POSTGRES, {DEFAULT_PG_URL})",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached SQLite tables")
    args = parser.parse_args()
    if args.runs <= 0 or any(rows < SCHEME.slots for rows in args.rows):
        parser.error(f"--runs must be positive and every --rows at least {SCHEME.slots}")
    args.backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    return args


# -- results --------------------------------------------------------------------------------------------


@dataclass
class Measured:
    """One side's timings (seconds) and how many ids it selected."""

    what: str
    seconds: list[float] = field(default_factory=list)
    ids: int = 0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    def line(self) -> str:
        runs = ", ".join(f"{s * 1000:.1f}" for s in self.seconds)
        per_id = self.median_ms * 1e6 / self.ids if self.ids else float("nan")
        return f"  {self.what:<44}: {self.median_ms:>9.1f} ms  {per_id:>6.0f} ns/id  (runs: {runs})"


def measure(sides: dict[str, Callable[[], int]], runs: int) -> dict[str, Measured]:
    """Warm every side once, then alternate them ``runs`` times; each callable returns its id count."""
    results = {name: Measured(name) for name in sides}
    for name, run in sides.items():
        results[name].ids = run()
    for _ in range(runs):
        for name, run in sides.items():
            start = time.perf_counter()
            count = run()
            results[name].seconds.append(time.perf_counter() - start)
            if count != results[name].ids:
                raise SystemExit(f"{name} selected {count} ids, then {results[name].ids}")
    return results


def report(backend: str, rows: int, results: dict[str, Measured], plans: dict[str, list[str]]) -> None:
    counts = {m.ids for m in results.values()}
    if len(counts) != 1:
        found = [(m.what, m.ids) for m in results.values()]
        raise SystemExit(f"[{backend}] the sides disagree on the slot: {found}")
    print(f"[{backend}] {rows:,} rows, slot {SLOT} of {SCHEME.slots}: {counts.pop():,} ids")
    for what, plan in plans.items():
        print(f"  plan of {what}: " + " | ".join(line.strip() for line in plan))
    for measured in results.values():
        print(measured.line())
    raw = results[RAW].median_ms
    for name, same_work in SAME_WORK.items():
        ratio = results[name].median_ms / raw
        verdict = "met" if ratio <= TARGET else "NOT met"
        same_work_ratio = results[name].median_ms / results[same_work].median_ms
        print(
            f"  ratio {name} / {RAW}: {ratio:.2f}   target: <= {TARGET} ... {verdict}; "
            f"against the same work done raw ({same_work}): {same_work_ratio:.2f}"
        )
    print(f"  ratio full scan / {RAW}: {results[SCAN].median_ms / raw:.2f}", flush=True)


def raw_filtered(ids: list[int], done_among: Callable[[list[str]], set[str]]) -> int:
    """What the other-database path does, with the driver: look the ids up in chunks, keep the not-done."""
    kept = 0
    for first in range(0, len(ids), LEDGER_CHUNK):
        chunk = ids[first : first + LEDGER_CHUNK]
        done = done_among([str(record) for record in chunk])
        kept += sum(1 for record in chunk if str(record) not in done)
    return kept


def drain(source: SqlTableSource, store: Store) -> int:
    stream = source.records(
        store=store, job=JOB, scheme=SCHEME, period=PERIOD, slot=SLOT, give_up_after=None, limit=None
    )
    return sum(1 for _ in stream)


# -- SQLite ---------------------------------------------------------------------------------------------


def sqlite_table(rows: int, rebuild: bool) -> Path:
    """The cached SQLite file with ``users`` of ``rows`` rows, slot index and an (empty) vardiya store."""
    WORK.mkdir(exist_ok=True)
    path = WORK / f"users-{rows}.db"
    if path.exists() and not rebuild:
        print(f"[sqlite] using the cached table {path}", flush=True)
        return path
    building = path.with_name(f"{path.name}.{os.getpid()}.building")  # two builders never share a file
    path.unlink(missing_ok=True)
    started = time.perf_counter()
    connection = sqlite3.connect(building, isolation_level=None)
    connection.execute("PRAGMA journal_mode = OFF")
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    connection.execute("BEGIN")
    generated = ((i, f"user-{i}") for i in range(1, rows + 1))
    connection.executemany("INSERT INTO users (id, name) VALUES (?, ?)", generated)
    connection.execute("COMMIT")
    connection.close()
    loaded = time.perf_counter()
    rate = rows / (loaded - started)
    print(f"[sqlite] loaded {rows:,} rows in {loaded - started:.1f} s ({rate:,.0f} rows/s)")
    url = f"sqlite:///{building}"
    index = add_slot_index(url, "users", scheme=SCHEME)
    print(f"[sqlite] add_slot_index in {time.perf_counter() - loaded:.1f} s: uses_index={index.uses_index}")
    open_store(url).close()  # the same-database variant's store, migrated once
    building.rename(path)
    return path


def bench_sqlite(rows: int, args: argparse.Namespace) -> dict[str, Measured]:
    path = sqlite_table(rows, args.rebuild)
    url = f"sqlite:///{path}"
    raw = sqlite3.connect(path)
    plans = {
        what: [row[-1] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}")]
        for what, sql in (("raw indexed", INDEXED_SQL), ("full scan", SCAN_SQL))
    }
    anti_join = ANTI_JOIN_SQL.format(p="?")
    with tempfile.TemporaryDirectory(prefix="vardiya-bench-") as directory, contextlib.ExitStack() as stack:
        stack.callback(raw.close)
        store_path = Path(directory) / "store.db"
        other_store = stack.enter_context(open_store(f"sqlite:///{store_path}"))
        other_raw = sqlite3.connect(store_path)
        stack.callback(other_raw.close)
        same_store = stack.enter_context(open_store(url))
        same_store.ledger.reset(JOB, PERIOD)
        source = stack.enter_context(SqlTableSource(url, "users"))

        def done_among(keys: list[str]) -> set[str]:
            sql = DONE_AMONG_SQL.format(p="?", keys=", ".join("?" * len(keys)))
            return {row[0] for row in other_raw.execute(sql, (JOB, PERIOD, *keys))}

        sides: dict[str, Callable[[], int]] = {
            RAW: lambda: len(raw.execute(INDEXED_SQL).fetchall()),
            RAW_ANTI_JOIN: lambda: len(raw.execute(anti_join, (JOB, PERIOD)).fetchall()),
            RAW_IN_LISTS: lambda: raw_filtered([row[0] for row in raw.execute(INDEXED_SQL)], done_among),
            VARDIYA_OTHER: lambda: drain(source, other_store),
            VARDIYA_SAME: lambda: drain(source, same_store),
            SCAN: lambda: len(raw.execute(SCAN_SQL).fetchall()),
        }
        results = measure(sides, args.runs)
    report("sqlite", rows, results, plans)
    return results


# -- PostgreSQL -----------------------------------------------------------------------------------------


def _copy_users(conninfo: str, rows: int) -> None:
    import psycopg

    with psycopg.connect(conninfo) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE users (id bigint NOT NULL, name text NOT NULL)")
        with cursor.copy("COPY users (id, name) FROM STDIN") as copy:
            for first in range(1, rows + 1, LOAD_CHUNK):
                last = min(first + LOAD_CHUNK, rows + 1)
                copy.write("".join(f"{i}\tuser-{i}\n" for i in range(first, last)))
        cursor.execute("ALTER TABLE users ADD PRIMARY KEY (id)")


@contextlib.contextmanager
def postgres_table(rows: int, server: str) -> Iterator[tuple[str, str]]:
    """A scratch database with ``users``, slot index and a vardiya store: (SQLAlchemy URL, conninfo)."""
    with scratch_postgres(server) as scratch:
        started = time.perf_counter()
        _copy_users(scratch.raw_target, rows)
        loaded = time.perf_counter()
        print(f"[postgresql] COPY of {rows:,} rows (+ primary key) in {loaded - started:.1f} s")
        index = add_slot_index(scratch.store_url, "users", scheme=SCHEME)
        took = time.perf_counter() - loaded
        print(f"[postgresql] add_slot_index in {took:.1f} s: uses_index={index.uses_index}")
        open_store(scratch.store_url, migrate=True).close()
        yield scratch.store_url, scratch.raw_target


def bench_postgres(rows: int, args: argparse.Namespace) -> dict[str, Measured]:
    import psycopg

    anti_join = ANTI_JOIN_SQL.format(p="%s")
    with postgres_table(rows, args.pg_url) as (url, conninfo), scratch_postgres(args.pg_url) as elsewhere:
        open_store(elsewhere.store_url, migrate=True).close()
        with contextlib.ExitStack() as stack:
            raw = stack.enter_context(psycopg.connect(conninfo, autocommit=True))
            other_raw = stack.enter_context(psycopg.connect(elsewhere.raw_target, autocommit=True))
            plans = {
                what: [row[0] for row in raw.execute(f"EXPLAIN {sql}")]
                for what, sql in (("raw indexed", INDEXED_SQL), ("full scan", SCAN_SQL))
            }
            other_store = stack.enter_context(open_store(elsewhere.store_url))
            same_store = stack.enter_context(open_store(url))
            source = stack.enter_context(SqlTableSource(url, "users"))

            def done_among(keys: list[str]) -> set[str]:
                sql = DONE_AMONG_SQL.format(p="%s", keys=", ".join(["%s"] * len(keys)))
                return {row[0] for row in other_raw.execute(sql, (JOB, PERIOD, *keys))}

            sides: dict[str, Callable[[], int]] = {
                RAW: lambda: len(raw.execute(INDEXED_SQL).fetchall()),
                RAW_ANTI_JOIN: lambda: len(raw.execute(anti_join, (JOB, PERIOD)).fetchall()),
                RAW_IN_LISTS: lambda: raw_filtered([row[0] for row in raw.execute(INDEXED_SQL)], done_among),
                VARDIYA_OTHER: lambda: drain(source, other_store),
                VARDIYA_SAME: lambda: drain(source, same_store),
                SCAN: lambda: len(raw.execute(SCAN_SQL).fetchall()),
            }
            results = measure(sides, args.runs)
    report("postgresql", rows, results, plans)
    return results


# -- main -----------------------------------------------------------------------------------------------


def compare_sizes(backend: str, by_rows: dict[int, dict[str, Measured]]) -> None:
    sizes = sorted(by_rows)
    smallest, largest = sizes[0], sizes[-1]
    print(f"[{backend}] {smallest:,} vs {largest:,} rows ({largest / smallest:.0f}x the rows and the slot):")
    for name in by_rows[smallest]:
        small, large = by_rows[smallest][name], by_rows[largest][name]
        print(
            f"  {name:<44}: {small.median_ms:>8.1f} ms -> {large.median_ms:>8.1f} ms "
            f"({large.median_ms / small.median_ms:>5.1f}x); "
            f"{small.median_ms * 1e6 / small.ids:.0f} -> {large.median_ms * 1e6 / large.ids:.0f} ns/id"
        )


def main() -> None:
    args = parse_args()
    import sqlalchemy

    print(
        f"slot selection: {', '.join(f'{r:,}' for r in args.rows)} rows, slot {SLOT} of {SCHEME.slots} (mod), "
        f"medians of {args.runs}; Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, "
        f"SQLAlchemy {sqlalchemy.__version__}; {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M:%S')}",
        flush=True,
    )
    for backend in args.backends:
        bench = bench_sqlite if backend == "sqlite" else bench_postgres
        by_rows = {rows: bench(rows, args) for rows in args.rows}
        if len(by_rows) > 1:
            compare_sizes(backend, by_rows)


if __name__ == "__main__":
    main()
