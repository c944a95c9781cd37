"""One tick over a whole table with a no-op handler, records/s including the ledger writes.

vardiya: ``run_tick`` of a ``SlotJob`` whose scheme has one slot (``SlotScheme(slots=1)``, so the tick's
own slot is every record of ``users``), with a no-op per-record handler, ``current_limit=None``,
``backfill_limit=0`` and a one-day deadline: it streams the ids from ``SqlTableSource(url, "users")`` in
chunks of 50,000 (no stored slot column for B=1, so the slot predicate is computed, ``((id % 1) + 1) % 1
= 0``, on a keyset page of the primary key), calls the handler once per record and marks every outcome
in the ledger in chunks of ``flush_every`` (500). Timed from the call to the return of ``run_tick``;
every record is then checked to be done in the ledger (not timed). Variants:

- anti-join (default): the store lives in the table's database, and one settled ledger row of the slot
  (record 0, which the table does not have) is marked before the clock starts, so every chunk's query
  carries the ledger anti-join (``NOT EXISTS`` a settled ledger row): the path of every tick of a period
  after its first.
- same-db: the same database with nothing of the period settled (the period's first tick): vardiya then
  leaves the anti-join out and runs the plain slot select.
- other-db (SQLite only): the store in a separate file, the table read from the cached file; with an
  empty ledger the chunks go straight to the handler.

raw: the driver loop that only writes the same ledger rows: for ids 1..N in chunks of 500 (vardiya's
flush size), tuples of the same columns and values vardiya writes (job, period, record as text, slot 0,
``done``, 1 attempt, first/last attempt times (one ``now()`` per chunk), duration, rows 0, bytes 0, no
error) built in the loop, inserted with ``executemany`` (plain ``INSERT``) into ``raw_ledger``, a copy of
the ledger table made from vardiya's schema (``bench_ledger.create_raw_table``), one transaction per
chunk: SQLite -- ``sqlite3`` on its own file, WAL, ``synchronous=NORMAL``, ``BEGIN IMMEDIATE``;
PostgreSQL -- psycopg 3 ``cursor.executemany`` in ``connection.transaction()``. The ratio is against
this floor: vardiya also reads the ids, calls the handler and times every record.

Memory: every measured run (raw and vardiya) runs in a fresh subprocess (this script with a hidden
``--child`` argument). It reports its RSS when the tick starts (after imports and setup), its peak RSS
during the tick (VmHWM of /proc/self/status, reset at the start through /proc/self/clear_refs) and
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end. ``ru_maxrss`` alone cannot show it: Linux
carries it across ``exec``, so a child's starts at the peak of the orchestrator that forked it. With
several ``--rows`` the last lines compare the peaks: ids stream in chunks, so the peak must not grow
with the table.

Tables: SQLite reuses ``bench_slot_select.sqlite_table`` (``users (id INTEGER PRIMARY KEY, name)``, ids
1..N, an empty vardiya store in the same file, cached in ``benchmarks/.work/``; its 24-slot index plays no
part here). Each same-database run gets a fresh copy of the cached file, each raw run a fresh file (not
timed). PostgreSQL: ``COPY`` into a scratch database created and dropped by the script
(``bench_slot_select._copy_users``). Before every run the ledger (or ``raw_ledger``) is emptied and given
N done rows of the previous period by ``COPY``, then ``ANALYZE``d: the steady state of a daily job, and
statistics that know the ledger is big. With ``--pg-no-history`` it starts empty and never analyzed
instead; the anti-join plan then collapses (see benchmarks/README.md).

Defaults keep both backends under ~10 minutes: 1,000,000 rows with 3 runs per side (anti-join and
other-db), 10,000,000 rows with a single run (anti-join), and PostgreSQL at 1,000,000 rows only
(``--pg-big`` adds 10,000,000, about 10 more minutes).

Run: ``.venv/bin/python benchmarks/bench_tick.py [--backend sqlite|postgresql|both]
[--rows 1000000 10000000] [--runs 3] [--big-runs 1] [--variants anti-join,other-db]
[--big-variants anti-join] [--pg-big] [--pg-no-history] [--pg-url URL] [--rebuild] [--profile]``.
``--big-runs`` and ``--big-variants`` apply to tables above 1,000,000 rows; ``--profile`` adds one
cProfiled SQLite tick per table of at most 1,000,000 rows (top 15 by tottime, on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_PG_URL, TARGET_RATIO, Comparison, load_average, scratch_postgres  # noqa: E402

JOB = "bench-tick"
PERIOD = "2026-12-01"
HISTORY_PERIOD = "2026-11-30"  # PostgreSQL: the day before, in the ledger (and raw_ledger) before each run
PLANNED_AT = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)  # slot 0 of the day 2026-12-01
LOAD_CHUNK = 200_000  # PostgreSQL COPY buffer, in rows
FLUSH = 500  # vardiya's flush_every default, and the raw loop's chunk
BIG = 1_000_000  # above this many rows, --big-runs applies
COUNT_RAW = f"SELECT count(*) FROM raw_ledger WHERE period = '{PERIOD}' AND status = 'done'"
SQLITE_TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"  # as in bench_ledger: how vardiya's times end up in SQLite

SAME = "same-db"
ANTI = "anti-join"
OTHER = "other-db"
VARIANTS = (SAME, ANTI, OTHER)
LABELS = {
    SAME: "same-db (first tick: plain select)",
    ANTI: "same-db anti-join (1 settled row)",
    OTHER: "other-db (store in another file)",
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[1_000_000, 10_000_000], help="table sizes (default 1000000 10000000)"
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs per side (default 3)")
    parser.add_argument(
        "--big-runs", type=int, default=1, help=f"timed runs per side for tables above {BIG:,} rows (default 1)"
    )
    parser.add_argument(
        "--variants",
        default=f"{ANTI},{OTHER}",
        help=f"comma-separated, of {', '.join(VARIANTS)} (default {ANTI},{OTHER}; {OTHER} is SQLite only)",
    )
    parser.add_argument(
        "--big-variants", default=ANTI, help=f"variants for tables above {BIG:,} rows (default {ANTI})"
    )
    parser.add_argument(
        "--pg-big",
        action="store_true",
        help=f"also run PostgreSQL on tables above {BIG:,} rows (skipped by default: ~10 min for 10M)",
    )
    parser.add_argument(
        "--pg-no-history",
        action="store_true",
        help="PostgreSQL: start every run from an empty, never-analyzed ledger instead of one holding the "
        "previous period (the anti-join then collapses; use a small --rows)",
    )
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("VARDIYA_BENCH_POSTGRES", DEFAULT_PG_URL),
        help=f"PostgreSQL server for the scratch database (default $VARDIYA_BENCH_POSTGRES, {DEFAULT_PG_URL})",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached SQLite tables")
    parser.add_argument(
        "--profile", action="store_true", help=f"also cProfile one SQLite {ANTI} tick per table of at most {BIG:,} rows"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return args
    if args.runs <= 0 or args.big_runs <= 0 or any(rows <= 0 for rows in args.rows):
        parser.error("--runs, --big-runs and every --rows must be positive")
    for name in ("variants", "big_variants"):
        chosen = tuple(v.strip() for v in getattr(args, name).split(",") if v.strip())
        unknown = [v for v in chosen if v not in VARIANTS]
        if unknown or not chosen:
            parser.error(f"--{name.replace('_', '-')}: unknown {unknown}; choose from {', '.join(VARIANTS)}")
        setattr(args, name, chosen)
    args.backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    return args


# -- the measured runs, each in a fresh process ---------------------------------------------------------


def max_rss_mb() -> float:
    """``ru_maxrss`` of this process (Linux reports KiB).

    On Linux it is kept across ``exec``: a child starts with the peak of the process it was forked from
    (here the orchestrator, ~60 MB), so it never reads lower than that. Hence ``_Memory`` below.
    """
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _status_mb(field: str) -> float:
    """A ``/proc/self/status`` figure (VmRSS, VmHWM) in MB; NaN where there is no /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class _Memory:
    """RSS at the tick's start, the peak RSS during the tick, and ``ru_maxrss`` at its end.

    The peak is the kernel's high-water mark of this process's own memory (VmHWM), reset to the current
    RSS when the tick starts (``echo 5 > /proc/self/clear_refs``), so neither the parent's peak nor the
    imports and setup before the clock starts can hide what the tick itself uses.
    """

    def start(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")
            self.reset = True
        except OSError:
            self.reset = False  # no reset: the peak also covers the setup
        self.before = _status_mb("VmRSS")

    def result(self) -> dict[str, Any]:
        return {
            "rss_before_mb": self.before,
            "rss_peak_mb": _status_mb("VmHWM"),
            "peak_reset": self.reset,
            "ru_maxrss_mb": max_rss_mb(),
        }


def child_raw(task: dict[str, Any]) -> dict[str, Any]:
    """The raw loop: the ledger rows of ids 1..N, ``executemany`` of 500 per transaction."""
    from bench_ledger import insert_sql

    rows = task["rows"]
    sqlite = task["backend"] == "sqlite"

    def moment() -> Any:
        now = datetime.now(UTC)
        return now.strftime(SQLITE_TIME_FORMAT) if sqlite else now

    def chunk(first: int) -> list[tuple[Any, ...]]:
        began, ended = moment(), moment()
        return [
            (JOB, PERIOD, str(record), 0, "done", 1, began, ended, 0.001, 0, 0, None)
            for record in range(first, min(first + FLUSH, rows + 1))
        ]

    memory = _Memory()
    if sqlite:
        connection = sqlite3.connect(task["raw_target"], isolation_level=None)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        statement = insert_sql("?")
        memory.start()
        start = time.perf_counter()
        for first in range(1, rows + 1, FLUSH):
            tuples = chunk(first)
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(statement, tuples)
            connection.execute("COMMIT")
        elapsed = time.perf_counter() - start
        measured = memory.result()
        written = connection.execute(COUNT_RAW).fetchone()[0]
        connection.close()
    else:
        import psycopg

        statement = insert_sql("%s")
        with psycopg.connect(task["raw_target"]) as connection, connection.cursor() as cursor:
            memory.start()
            start = time.perf_counter()
            for first in range(1, rows + 1, FLUSH):
                tuples = chunk(first)
                with connection.transaction():
                    cursor.executemany(statement, tuples)
            elapsed = time.perf_counter() - start
            measured = memory.result()
            written = connection.execute(COUNT_RAW).fetchone()[0]
    if written != rows:
        raise SystemExit(f"raw loop wrote {written} rows, expected {rows}")
    return {"seconds": elapsed, **measured}


def child_tick(task: dict[str, Any]) -> dict[str, Any]:
    """One ``run_tick`` over the whole table; checks every record is done in the ledger afterwards."""
    from vardiya.slots import SlotScheme
    from vardiya.slots.job import SlotJob
    from vardiya.slots.runner import run_tick
    from vardiya.slots.sql_source import SqlTableSource
    from vardiya.store import LedgerEntry, LedgerStatus, open_store

    rows = task["rows"]
    store = open_store(task["store_url"], migrate=True)
    source = SqlTableSource(task["source_url"], "users")

    def no_op(record: Any) -> None:
        return None

    job = SlotJob(
        name=JOB,
        scheme=SlotScheme(slots=1),
        source=source,
        handler=no_op,
        current_limit=None,
        backfill_limit=0,
        deadline=timedelta(days=1),
    )
    seeded = 0
    if task["seed"]:  # one settled row of the slot, of an id the table lacks: the anti-join path
        store.ledger.mark(JOB, PERIOD, [LedgerEntry(record=0, status=LedgerStatus.DONE, started_at=PLANNED_AT, slot=0)])
        seeded = 1
    profiler = None
    if task["profile"]:
        import cProfile

        profiler = cProfile.Profile()
    memory = _Memory()
    memory.start()
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    report = run_tick(store, job, PLANNED_AT, within_window=False)  # a past slot: only the deadline stops it
    if profiler is not None:
        profiler.disable()
    elapsed = time.perf_counter() - start
    measured = memory.result()
    done = store.ledger.count_done(JOB, PERIOD) - seeded
    source.close()
    store.close()
    if (report.started, report.done, report.failed, done) != (rows, rows, 0, rows):
        raise SystemExit(
            f"tick started {report.started}, done {report.done}, failed {report.failed}, "
            f"ledger has {done} done; expected {rows} of each (and 0 failed)"
        )
    if profiler is not None:
        import io
        import pstats

        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
        title = f"cProfile of one tick, {rows:,} records (profiled: {elapsed:.1f} s), top 15 by tottime:"
        print(title, file=sys.stderr)
        print(text.getvalue(), file=sys.stderr, flush=True)
    return {"seconds": elapsed, **measured}


def run_child(task: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its last stdout line is the result."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(task)], stdout=subprocess.PIPE, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"child run {task['side']} failed with exit code {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- orchestration ---------------------------------------------------------------------------------------


class Side:
    """One side's runs: rates and peak RSS."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rates: list[float] = []
        self.before: list[float] = []
        self.peaks: list[float] = []
        self.maxrss: list[float] = []
        self.reset = True

    def add(self, rows: int, result: dict[str, Any]) -> float:
        rate = rows / result["seconds"]
        self.rates.append(rate)
        self.before.append(result["rss_before_mb"])
        self.peaks.append(result["rss_peak_mb"])
        self.maxrss.append(result["ru_maxrss_mb"])
        self.reset = self.reset and result["peak_reset"]
        return rate

    @property
    def peak(self) -> float:
        return max(self.peaks)


def measure(backend: str, rows: int, runs: int, sides: dict[str, Callable[[], dict[str, Any]]]) -> dict[str, Side]:
    """Alternate raw and the vardiya variants ``runs`` times, each run in a fresh process."""
    results = {name: Side(name) for name in sides}
    for run in range(runs):
        for name, go in sides.items():
            rate = results[name].add(rows, go())
            print(
                f"  [{backend}] run {run + 1}/{runs} {name:<36}: {rate:>10,.0f} records/s, "
                f"peak RSS {results[name].peaks[-1]:.0f} MB",
                flush=True,
            )
    return results


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{rate:,.0f}" for rate in rates)


def report(backend: str, rows: int, results: dict[str, Side]) -> None:
    """The raw median, then each variant's median and its ratio to raw (as ``_common.Comparison``)."""
    raw = results["raw"]
    runs = len(raw.rates)
    how = f"median of {runs}" if runs > 1 else "a single run"
    print(f"[{backend}] tick of {rows:,} records, no-op handler, 1 slot ({how} per side)")
    print(f"  {'raw executemany':<36}: {statistics.median(raw.rates):>10,.0f} records/s  ({_rates(raw.rates)})")
    for name, side in results.items():
        if name == "raw":
            continue
        comparison = Comparison(
            backend=backend, what=LABELS[name], unit="records/s", raw=raw.rates, vardiya=side.rates
        )
        met = "met" if comparison.ratio >= TARGET_RATIO else "NOT met"
        print(f"  {LABELS[name]:<36}: {comparison.vardiya_median:>10,.0f} records/s  ({_rates(side.rates)})")
        print(f"    ratio vardiya/raw: {comparison.ratio:.3f}   target: >= {TARGET_RATIO} ... {met}")
    for name, side in results.items():
        before = statistics.median(side.before)
        peaks = ", ".join(f"{peak:.1f}" for peak in side.peaks)
        during = "during the tick" if side.reset else "of the process (VmHWM could not be reset)"
        print(
            f"  peak RSS {name:<10}: {side.peak:7.1f} MB {during} (RSS at its start {before:.1f} MB; "
            f"runs: {peaks}); ru_maxrss {max(side.maxrss):.1f} MB"
        )
    print(f"  ({load_average()})", flush=True)


def compare_sizes(backend: str, by_rows: dict[int, dict[str, Side]]) -> None:
    sizes = sorted(by_rows)
    small, large = sizes[0], sizes[-1]
    print(f"[{backend}] peak RSS, {small:,} vs {large:,} rows ({large / small:.0f}x the table):")
    for name in by_rows[small]:
        if name not in by_rows[large]:
            continue
        a, b = by_rows[small][name], by_rows[large][name]
        grew_a, grew_b = a.peak - statistics.median(a.before), b.peak - statistics.median(b.before)
        print(
            f"  {name:<10}: {a.peak:7.1f} MB -> {b.peak:7.1f} MB ({b.peak / a.peak:.2f}x); "
            f"growth during the tick {grew_a:.1f} MB -> {grew_b:.1f} MB; "
            f"{statistics.median(a.rates):,.0f} -> {statistics.median(b.rates):,.0f} records/s"
        )
    print(flush=True)


def bench_sqlite(rows: int, runs: int, variants: tuple[str, ...], args: argparse.Namespace) -> dict[str, Side]:
    from bench_ledger import create_raw_table
    from bench_slot_select import sqlite_table

    cached = sqlite_table(rows, args.rebuild)
    with tempfile.TemporaryDirectory(prefix="vardiya-bench-") as directory:
        work = Path(directory)

        def fresh(name: str) -> Path:
            path = work / name
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            return path

        def raw() -> dict[str, Any]:
            path = fresh("raw.db")
            create_raw_table(f"sqlite:///{path}")
            return run_child({"side": "raw", "backend": "sqlite", "rows": rows, "raw_target": str(path)})

        def same_db(seed: bool, profile: bool = False) -> Callable[[], dict[str, Any]]:
            def go() -> dict[str, Any]:
                path = fresh("same.db")
                shutil.copyfile(cached, path)
                url = f"sqlite:///{path}"
                task = {"side": "vardiya", "rows": rows, "store_url": url, "source_url": url}
                return run_child({**task, "seed": seed, "profile": profile})

            return go

        def other_db() -> dict[str, Any]:
            store = fresh("store.db")
            task = {"side": "vardiya", "rows": rows, "store_url": f"sqlite:///{store}"}
            return run_child({**task, "source_url": f"sqlite:///{cached}", "seed": False, "profile": False})

        choices = {SAME: same_db(False), ANTI: same_db(True), OTHER: other_db}
        sides = {"raw": raw, **{name: choices[name] for name in variants}}
        results = measure("sqlite", rows, runs, sides)
        report("sqlite", rows, results)
        if args.profile and rows <= BIG:
            seed = ANTI in variants or SAME not in variants
            print(f"[sqlite] profiling one {ANTI if seed else SAME} tick of {rows:,} records ...", flush=True)
            same_db(seed, profile=True)()
    return results


def _copy_history(conninfo: str, table: str, rows: int) -> None:
    """Empty ``table``, COPY ledger rows of the previous period for ids 1..N into it, and ANALYZE it.

    This is the steady state of a daily job (yesterday's period is in the ledger) and gives the planner
    statistics that know the ledger is big. This server runs with autovacuum off, so nothing else would.
    """
    import psycopg

    at = "2026-11-30 00:00:00+00"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f"TRUNCATE {table}")
        with connection.cursor() as cursor, cursor.copy(f"COPY {table} FROM STDIN") as copy:
            for first in range(1, rows + 1, LOAD_CHUNK):
                last = min(first + LOAD_CHUNK, rows + 1)
                copy.write(
                    "".join(
                        f"{JOB}\t{HISTORY_PERIOD}\t{i}\t0\tdone\t1\t{at}\t{at}\t0.001\t0\t0\t\\N\n"
                        for i in range(first, last)
                    )
                )
        connection.execute(f"ANALYZE {table}")


def bench_postgres(rows: int, runs: int, variants: tuple[str, ...], args: argparse.Namespace) -> dict[str, Side]:
    import psycopg
    from bench_ledger import COLUMNS, create_raw_table
    from bench_slot_select import _copy_users

    from vardiya.store import open_store
    from vardiya.store.schema import ledger

    if [column.name for column in ledger.c] != list(COLUMNS):
        raise SystemExit(f"the ledger's columns changed: {[c.name for c in ledger.c]}; update _copy_history")
    variants = tuple(v for v in variants if v != OTHER)
    with scratch_postgres(args.pg_url) as scratch:
        started = time.perf_counter()
        _copy_users(scratch.raw_target, rows)
        with psycopg.connect(scratch.raw_target, autocommit=True) as admin:
            admin.execute("VACUUM (ANALYZE) users")
        took = time.perf_counter() - started
        print(f"[postgresql] COPY of {rows:,} rows (+ primary key, VACUUM ANALYZE) in {took:.1f} s", flush=True)
        open_store(scratch.store_url, migrate=True).close()
        create_raw_table(scratch.store_url)
        if args.pg_no_history:
            print("[postgresql] every run starts from an empty, never-analyzed ledger (--pg-no-history)")
        else:
            print(f"[postgresql] before every run: {rows:,} ledger rows of {HISTORY_PERIOD} COPYed and ANALYZEd")

        def prepare(table: str) -> None:
            if args.pg_no_history:
                with psycopg.connect(scratch.raw_target, autocommit=True) as admin:
                    admin.execute(f"TRUNCATE {table}")
            else:
                _copy_history(scratch.raw_target, table, rows)

        def raw() -> dict[str, Any]:
            prepare("raw_ledger")
            task = {"side": "raw", "backend": "postgresql", "rows": rows, "raw_target": scratch.raw_target}
            return run_child(task)

        def same_db(seed: bool) -> Callable[[], dict[str, Any]]:
            def go() -> dict[str, Any]:
                prepare("ledger")
                task = {"side": "vardiya", "rows": rows, "store_url": scratch.store_url}
                return run_child({**task, "source_url": scratch.store_url, "seed": seed, "profile": False})

            return go

        choices = {SAME: same_db(False), ANTI: same_db(True)}
        sides = {"raw": raw, **{name: choices[name] for name in variants}}
        results = measure("postgresql", rows, runs, sides)
        report("postgresql", rows, results)
    return results


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # so the child is killed and scratch databases dropped


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if args.child is not None:
        task = json.loads(args.child)
        result = child_raw(task) if task["side"] == "raw" else child_tick(task)
        print(json.dumps(result), flush=True)
        return
    import sqlalchemy

    versions = f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, SQLAlchemy {sqlalchemy.__version__}"
    try:
        import psycopg

        versions += f", psycopg {psycopg.__version__} ({psycopg.pq.__impl__})"
    except ImportError:
        pass
    sizes = ", ".join(f"{rows:,}" for rows in args.rows)
    print(
        f"bench_tick: one tick over {sizes} records (1 slot, no-op handler), medians of {args.runs} runs "
        f"({args.big_runs} above {BIG:,} rows), each run in a fresh process; {versions}; {os.cpu_count()} CPUs"
    )
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {load_average()}", flush=True)
    for backend in args.backends:
        bench = bench_sqlite if backend == "sqlite" else bench_postgres
        by_rows: dict[int, dict[str, Side]] = {}
        for rows in args.rows:
            big = rows > BIG
            if backend == "postgresql" and big and not args.pg_big:
                print(f"[postgresql] {rows:,} rows skipped (it would take ~10 minutes; --pg-big runs it)\n")
                continue
            runs = args.big_runs if big else args.runs
            variants = args.big_variants if big else args.variants
            by_rows[rows] = bench(rows, runs, variants, args)
        if len(by_rows) > 1:
            compare_sizes(backend, by_rows)


if __name__ == "__main__":
    main()
