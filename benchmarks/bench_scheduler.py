"""The scheduler: ticks planned and enqueued per second for 1,000 slot jobs, and how late ticks start.

**1. Planning throughput, ticks/s** (virtual time, one process). An ``App`` of ``--jobs`` (1,000) slot
jobs, each ``SlotScheme(slots=24)`` (a day of 1-hour windows, UTC), ``IterableSource(range(10))``, a
no-op handler. A ``Scheduler(store, app)`` on a store opened with a ``VirtualClock`` set to 00:30 UTC of
2026-12-01. Its first ``step()`` decides every schedule in one transaction (the cursor rows do not exist
yet) and enqueues one tick item each (the 00:00 tick, which the catch-up default fires): timed on its
own, the "first step" figure. Then ``--steps`` (3) times: the virtual clock advances one slot window
(1 h) and one ``step()`` is timed (``time.perf_counter``); each enqueues ``--jobs`` ticks (checked), so
the "steady" figure is ``jobs * steps`` / the time of those steps. Every run starts from an empty store
(SQLite: a fresh copy of a migrated file; PostgreSQL: ``work_items`` and ``schedules`` truncated) with a
new ``Scheduler``; the app is built once.

Baseline, alternating with vardiya in the same run (``_common.compare``): the raw driver loop doing the
writes a step needs, into the real ``work_items`` and ``schedules`` tables of a scratch store
(migrated by vardiya, not timed). Per step, one transaction: the ``jobs`` tick rows (kind, key,
payload JSON, state ``pending``, attempts 0, max_attempts 3, run_after, created_at, updated_at: the
values vardiya writes, the key and times converted once per step (SQLite: by the columns' own
SQLAlchemy types, text or integer microseconds), the payload encoded per row) built in the loop and
inserted with ``executemany``, key row first and the item only for a new key (PostgreSQL: one
``WITH ... INSERT INTO work_item_keys ... ON CONFLICT DO NOTHING`` statement; SQLite: the item alone,
``ON CONFLICT (kind, key) DO NOTHING``, its unique index being the key), as vardiya's enqueue writes them, then
``executemany`` of ``UPDATE schedules SET planned_through, fired = fired + 1, updated_by, updated_at
WHERE name = ?`` for every schedule (the first step: an ``INSERT`` of the cursor rows instead).
SQLite: ``sqlite3`` on its own copy of the store, WAL, ``synchronous=NORMAL``, ``BEGIN IMMEDIATE``;
PostgreSQL: psycopg 3 in ``connection.transaction()``. The raw loop plans nothing (every tick time is
known to it) and reads nothing back, so the ratio vardiya/raw is against a write-only floor.

**2. Tick start lateness, seconds** (real time, ``SystemClock``). A store (fresh SQLite file or fresh
PostgreSQL database per configuration), an app module written to a temporary directory: ``--late-jobs``
(20) slot jobs of ``SlotScheme(slots=10, period=timedelta(seconds=10))`` (a tick per job every second,
all jobs on the same second: a burst of 20 ticks per second), ``IterableSource(range(50))`` each, a
handler doing ``sum(range(2000))`` per record, and ``start=`` a whole second 4 s (plus 1 s per load
process) ahead, so the first tick is planned after every process is up and none is caught up. Then, as
a user runs them: ``--load N`` busy-loop processes (``while True: pass``), ``--workers`` (3) ``python
-m vardiya worker`` processes (defaults) and one ``python -m vardiya scheduler`` process, for
``--late-s`` (25) seconds of planned ticks. The app module notes when each vardiya process loaded it;
ticks planned before the last of them did, plus 1 s, are left out (printed; normally none). The
scheduler is stopped once every tick planned in the window has an item (or 10 s after the window: the
rest count as never fired), the workers get up to 10 s more to finish what was fired, and are
stopped. Every tick item planned in the window is read from ``work_items``: the lateness of a
succeeded tick is its result's ``lateness_s`` (its start minus its planned time, as the worker
recorded it). Also printed: "enqueued - planned" (the item's ``created_at`` minus its planned time:
negative when the scheduler enqueues ahead of the planned time, positive when it fired late), the
tick's own run time (result ``finished_at`` - ``started_at``), and the ticks not done by the end. No
baseline: the figure is absolute (how long after its planned time a tick started); no target is set.
``--load 0 2`` by default.

Defaults run both parts on both backends in about 3 minutes. ``--profile`` adds a cProfiled SQLite
planning run (top entries by cumulative and own time, on stderr).

Run: ``.venv/bin/python benchmarks/bench_scheduler.py [--backend sqlite|postgresql|both] [--runs 3]
[--jobs 1000] [--steps 3] [--late-s 25] [--late-jobs 20] [--workers 3] [--load 0 2] [--parts planning,lateness]
[--pg-url URL] [--profile]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_PG_URL, Comparison, Scratch, compare, load_average, scratch  # noqa: E402

FIRST_AT = datetime(2026, 12, 1, 0, 30, tzinfo=UTC)  # the first step; it fires the 00:00 tick
WINDOW = timedelta(hours=1)  # SlotScheme(slots=24): one slot window
OWNER = "bench-raw"
DRAIN_S = 10.0  # after the scheduler stops: how long the workers get to finish what it fired
WARMUP_S = 4  # from the processes' start to the first planned tick (plus 1 s per --load process)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--runs", type=int, default=3, help="planning: timed runs per side (default 3)")
    parser.add_argument("--jobs", type=int, default=1000, help="planning: slot jobs (default 1000)")
    parser.add_argument("--steps", type=int, default=3, help="planning: timed steady steps per run (default 3)")
    parser.add_argument("--late-s", type=float, default=25.0, help="lateness: seconds of planned ticks (default 25)")
    parser.add_argument("--late-jobs", type=int, default=20, help="lateness: slot jobs (default 20)")
    parser.add_argument("--records", type=int, default=50, help="lateness: records per job (default 50)")
    parser.add_argument("--workers", type=int, default=3, help="lateness: worker processes (default 3)")
    parser.add_argument(
        "--load", type=int, nargs="+", default=[0, 2], help="lateness: busy-loop processes, one setting each (default 0 2)"
    )
    parser.add_argument("--parts", default="planning,lateness", help="comma-separated: planning, lateness (default both)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("VARDIYA_BENCH_POSTGRES", DEFAULT_PG_URL),
        help=f"a PostgreSQL server to create scratch databases on (default $VARDIYA_BENCH_POSTGRES or {DEFAULT_PG_URL})",
    )
    parser.add_argument("--profile", action="store_true", help="also cProfile one SQLite planning run (stderr)")
    args = parser.parse_args()
    if min(args.runs, args.jobs, args.steps, args.late_jobs, args.records, args.workers) <= 0 or args.late_s <= 0:
        parser.error("--runs, --jobs, --steps, --late-s, --late-jobs, --records and --workers must be positive")
    if min(args.load) < 0:
        parser.error("--load takes numbers of processes, 0 or more")
    args.parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    if not args.parts or args.parts - {"planning", "lateness"}:
        parser.error("--parts takes planning, lateness or both")
    args.backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    return args


# -- 1. planning throughput ----------------------------------------------------------------------------


def job_name(number: int) -> str:
    return f"plan{number:04d}"


def planning_app(jobs: int) -> Any:
    from vardiya.app import App
    from vardiya.slots.scheme import SlotScheme
    from vardiya.slots.sources import IterableSource

    app = App("bench-scheduler-planning")

    def no_op(record: Any) -> None:
        return None

    scheme = SlotScheme(slots=24)
    for number in range(jobs):
        app.slot_job(job_name(number), scheme=scheme, source=IterableSource(range(10)))(no_op)
    return app


def count_ticks(store: Any) -> int:
    import sqlalchemy as sa

    from vardiya.store.schema import work_items

    with store.reading() as connection:
        query = sa.select(sa.func.count()).select_from(work_items).where(work_items.c.kind.startswith("tick:"))
        return int(connection.execute(query).scalar_one())


@dataclass
class PlanRates:
    first: float  # ticks/s of the first step
    steady: float  # ticks/s of the steady steps


def vardiya_planning(app: Any, url: str, jobs: int, steps: int, profiler: Any = None) -> PlanRates:
    """One run: a new store (clock at FIRST_AT) and Scheduler; the first step, then ``steps`` timed steps."""
    from vardiya.clock import VirtualClock
    from vardiya.service.scheduler import Scheduler
    from vardiya.store import open_store

    clock = VirtualClock(FIRST_AT)
    store = open_store(url, clock=clock, migrate=True)
    try:
        scheduler = Scheduler(store, app)
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        fired = len(scheduler.step().fired)
        first_s = time.perf_counter() - start
        if fired != jobs:
            raise SystemExit(f"the first step fired {fired} ticks, expected {jobs}")
        steady_s = 0.0
        for _ in range(steps):
            clock.advance(WINDOW)
            start = time.perf_counter()
            fired = len(scheduler.step().fired)
            steady_s += time.perf_counter() - start
            if fired != jobs:
                raise SystemExit(f"a step at {clock.now().isoformat()} fired {fired} ticks, expected {jobs}")
        if profiler is not None:
            profiler.disable()
        stored = count_ticks(store)
        if stored != jobs * (steps + 1):
            raise SystemExit(f"vardiya stored {stored} tick items, expected {jobs * (steps + 1)}")
    finally:
        store.close()
    return PlanRates(first=jobs / first_s, steady=jobs * steps / steady_s)


def raw_planning(backend: str, target: str, jobs: int, steps: int) -> PlanRates:
    """The write-only floor: per step, the tick rows by executemany (key row, then item) and the cursors."""
    from vardiya.schedule.plan import planned_key, tick_kind

    kinds = [tick_kind(job_name(number)) for number in range(jobs)]
    names = list(kinds)  # a tick schedule is named like its item kind
    jobs_names = [job_name(number) for number in range(jobs)]
    postgres = backend == "postgresql"
    mark = "%s" if postgres else "?"
    # PostgreSQL: the key row first (its primary key is what makes the enqueue idempotent), the item
    # only for a new key: the same writes as vardiya's enqueue (store/hot_enqueue.py), one row per statement.
    columns = "kind, key, payload, state, attempts, max_attempts, run_after, created_at, updated_at"
    if postgres:
        insert_items = [(
            ("WITH k AS (INSERT INTO work_item_keys (kind, key, item_id) VALUES (%s, %s, nextval('work_items_id_seq'))"
             f" ON CONFLICT DO NOTHING RETURNING kind, key, item_id) INSERT INTO work_items (id, {columns})"
             " SELECT k.item_id, k.kind, k.key, %s, %s, %s, %s, %s, %s, %s FROM k"),
            lambda row: row,
        )]
    else:
        # SQLite: the item's own unique (kind, key) index is the key (migration 0015)
        insert_items = [(
            f"INSERT INTO work_items ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO NOTHING",
            lambda row: row,
        )]
    insert_cursor = (
        "INSERT INTO schedules (name, planned_through, fired, skipped, updated_by, updated_at) "
        f"VALUES ({mark}, {mark}, 1, 0, {mark}, {mark})"
    )
    update_cursor = (
        f"UPDATE schedules SET planned_through = {mark}, fired = fired + 1, updated_by = {mark}, "
        f"updated_at = {mark} WHERE name = {mark}"
    )
    if postgres:
        import psycopg
        from psycopg.types.json import Jsonb

        connection: Any = psycopg.connect(target)
        cursor = connection.cursor()

        def item_time(moment: datetime) -> Any:
            return moment

        cursor_time = item_time

        def payload_value(document: dict[str, Any]) -> Any:
            return Jsonb(document)

        @contextmanager
        def transaction() -> Iterator[None]:
            with connection.transaction():
                yield

    else:
        connection = sqlite3.connect(target, isolation_level=None)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        cursor = connection.cursor()

        from sqlalchemy.dialects import sqlite as sqlite_dialect

        from vardiya.store.schema import schedules, work_items

        # The values vardiya stores, whatever its column types make of a time on SQLite (text, or
        # integer microseconds): each column type's own bind processor, run once per step.
        dialect = sqlite_dialect.dialect()
        to_item = work_items.c.run_after.type.dialect_impl(dialect).bind_processor(dialect)
        to_cursor = schedules.c.planned_through.type.dialect_impl(dialect).bind_processor(dialect)

        def item_time(moment: datetime) -> Any:
            return to_item(moment) if to_item else moment

        def cursor_time(moment: datetime) -> Any:
            return to_cursor(moment) if to_cursor else moment

        def payload_value(document: dict[str, Any]) -> Any:
            return json.dumps(document, separators=(",", ":"), ensure_ascii=False)

        @contextmanager
        def transaction() -> Iterator[None]:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")

    def one_step(now: datetime, first: bool) -> float:
        start = time.perf_counter()
        planned = now.replace(minute=0, second=0, microsecond=0)
        key, planned_text = planned_key(planned), planned.isoformat()
        at, written = item_time(planned), item_time(now)
        items = [
            (kind, key, payload_value({"job": job, "planned_at": planned_text}), "pending", 0, 3, at, written, written)
            for kind, job in zip(kinds, jobs_names, strict=True)
        ]
        through, changed = cursor_time(planned), cursor_time(now)
        with transaction():
            for statement, parameters in insert_items:
                cursor.executemany(statement, [parameters(row) for row in items])
            if first:
                cursor.executemany(insert_cursor, [(name, through, OWNER, changed) for name in names])
            else:
                cursor.executemany(update_cursor, [(through, OWNER, changed, name) for name in names])
        return time.perf_counter() - start

    try:
        now = FIRST_AT
        first_s = one_step(now, True)
        steady_s = 0.0
        for _ in range(steps):
            now += WINDOW
            steady_s += one_step(now, False)
        cursor.execute("SELECT count(*) FROM work_items WHERE kind LIKE 'tick:%'")
        stored = cursor.fetchone()[0]
    finally:
        connection.close()
    if stored != jobs * (steps + 1):
        raise SystemExit(f"the raw loop stored {stored} tick items, expected {jobs * (steps + 1)}")
    return PlanRates(first=jobs / first_s, steady=jobs * steps / steady_s)


def bench_planning(backend: str, args: argparse.Namespace, app: Any) -> list[Comparison]:
    from vardiya.store import open_store

    jobs, steps = args.jobs, args.steps
    with scratch(backend, args.pg_url) as target:
        first: dict[str, list[float]] = {"raw": [], "vardiya": []}
        work = Path(tempfile.mkdtemp(prefix="vardiya-bench-"))
        try:
            template = work / "template.db"
            if backend == "sqlite":
                open_store(f"sqlite:///{template}", migrate=True).close()
            else:
                open_store(target.store_url, migrate=True).close()

            def fresh(name: str) -> str:
                """SQLite: a fresh copy of the migrated template; PostgreSQL: the tables emptied."""
                if backend == "postgresql":
                    import psycopg

                    with psycopg.connect(target.raw_target, autocommit=True) as admin:
                        admin.execute("TRUNCATE work_items, work_item_keys, schedules RESTART IDENTITY CASCADE")
                    return target.store_url if name == "vardiya" else target.raw_target
                path = work / f"{name}.db"
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
                shutil.copyfile(template, path)
                return f"sqlite:///{path}" if name == "vardiya" else str(path)

            def raw() -> float:
                rates = raw_planning(backend, fresh("raw"), jobs, steps)
                first["raw"].append(rates.first)
                return rates.steady

            def vardiya() -> float:
                rates = vardiya_planning(app, fresh("vardiya"), jobs, steps)
                first["vardiya"].append(rates.first)
                return rates.steady

            steady = compare(
                backend=backend,
                what=f"planning: {jobs:,} slot jobs x {steps} steps, ticks planned and enqueued per second (steady)",
                unit="ticks/s",
                runs=args.runs,
                raw=raw,
                vardiya=vardiya,
                target=None,  # the issue asks for the figure; it sets no ratio
            )
            opening = Comparison(
                backend=backend,
                what=f"planning: the first step (creates {jobs:,} cursors), ticks/s",
                unit="ticks/s",
                raw=first["raw"],
                vardiya=first["vardiya"],
                target=None,
            )
            for line in opening.lines():
                print(line, flush=True)
            if args.profile and backend == "sqlite":
                profile_planning(app, fresh("vardiya"), jobs, steps)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return [steady, opening]


def profile_planning(app: Any, url: str, jobs: int, steps: int) -> None:
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    rates = vardiya_planning(app, url, jobs, steps, profiler=profiler)
    for order, count in (("cumulative", 25), ("tottime", 15)):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(count)
        print(
            f"cProfile of one planning run ({steps + 1} steps x {jobs:,} jobs; steady {rates.steady:,.0f} ticks/s "
            f"profiled), top {count} by {order}:",
            file=sys.stderr,
        )
        print(text.getvalue(), file=sys.stderr, flush=True)


# -- 2. tick start lateness ---------------------------------------------------------------------------

LATENESS_APP = '''
"""The app of bench_scheduler.py's lateness part (written to a temporary directory by the script)."""

import os
import time
from datetime import datetime, timedelta, timezone

from vardiya import App
from vardiya.slots.scheme import SlotScheme
from vardiya.slots.sources import IterableSource

# Every process that loads this app says when it did (the benchmark counts ticks planned after all have).
with open(os.path.join(os.environ["BENCH_READY_DIR"], f"ready-{os.getpid()}"), "w") as ready:
    ready.write(repr(time.time()))

JOBS = int(os.environ["BENCH_JOBS"])
RECORDS = int(os.environ["BENCH_RECORDS"])
START = datetime.fromtimestamp(float(os.environ["BENCH_START"]), timezone.utc)
SCHEME = SlotScheme(slots=10, period=timedelta(seconds=10))

app = App("bench-scheduler-lateness")


def work(record):
    sum(range(2000))


for number in range(JOBS):
    app.slot_job(f"late{number:02d}", scheme=SCHEME, source=IterableSource(range(RECORDS)), start=START)(work)
'''

BUSY_LOOP = "while True: pass"


@dataclass
class Lateness:
    backend: str
    load: int
    expected: int
    done: list[float]  # lateness_s of every succeeded tick planned in the window
    fired_lag: list[float]  # created_at - planned time, every tick item planned in the window
    run_s: list[float]  # finished_at - started_at of the succeeded ticks
    not_done: dict[str, int]  # state -> ticks planned in the window that did not succeed
    load_average: str
    up_s: float  # from the spawn to the last vardiya process loading the app
    late_start_s: float  # ticks planned in the first late_start_s seconds were left out (processes not up)

    def lines(self) -> list[str]:
        states = ", ".join(f"{count} {state}" for state, count in sorted(self.not_done.items())) or "none"
        missing = self.expected - len(self.done) - sum(self.not_done.values())
        left_out = f"; the first {self.late_start_s:.0f} s left out" if self.late_start_s else ""
        lines = [
            (f"[{self.backend}] lateness, --load {self.load}: {len(self.done)} ticks succeeded of {self.expected} planned "
             f"(not done by the end: {states}; never fired: {missing}; processes up in {self.up_s:.1f} s{left_out})"),
        ]
        if self.done:
            lines.append(f"  tick start lateness : {_quantiles(self.done)}")
        if self.fired_lag:
            lines.append(f"  enqueued - planned  : {_quantiles(self.fired_lag)}")
        if self.run_s:
            lines.append(f"  tick run time       : {_quantiles(self.run_s)}")
        lines.append(f"  ({self.load_average})")
        return lines


def percentile(values: list[float], fraction: float) -> float:
    """Nearest rank: the smallest value with at least ``fraction`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _quantiles(values: list[float]) -> str:
    return (
        f"p50 {percentile(values, 0.5) * 1000:8.1f} ms   p99 {percentile(values, 0.99) * 1000:8.1f} ms   "
        f"max {max(values) * 1000:8.1f} ms   (n={len(values)})"
    )


def _stop(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM one process this script started, then SIGKILL it if it does not exit in ``timeout``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def tick_rows(store: Any) -> list[tuple[str, datetime, datetime, Any]]:
    import sqlalchemy as sa

    from vardiya.store.schema import work_items

    c = work_items.c
    with store.reading() as connection:
        query = sa.select(c.state, c.run_after, c.created_at, c.result).where(c.kind.startswith("tick:"))
        return [(str(getattr(row[0], "value", row[0])), row[1], row[2], row[3]) for row in connection.execute(query)]


def lateness_run(target: Scratch, args: argparse.Namespace, load: int) -> Lateness:
    from vardiya.store import open_store

    open_store(target.store_url, migrate=True).close()
    work = Path(tempfile.mkdtemp(prefix="vardiya-bench-"))
    processes: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        (work / "lateness_app.py").write_text(textwrap.dedent(LATENESS_APP).lstrip())
        start = math.ceil(time.time()) + WARMUP_S + load
        end = start + args.late_s
        ready_dir = work / "ready"
        ready_dir.mkdir()
        environment = {
            **os.environ, "BENCH_JOBS": str(args.late_jobs), "BENCH_RECORDS": str(args.records),
            "BENCH_READY_DIR": str(ready_dir),
            "BENCH_START": str(start), "VARDIYA_DB": target.store_url, "VARDIYA_APP": f"{work / 'lateness_app.py'}:app",
        }
        environment.pop("VARDIYA_BENCH_POSTGRES", None)

        def spawn(name: str, command: list[str]) -> subprocess.Popen[bytes]:
            log = work / f"{name}.log"
            logs.append(log)
            with log.open("wb") as handle:
                process = subprocess.Popen(
                    command, stdout=handle, stderr=subprocess.STDOUT, env=environment, stdin=subprocess.DEVNULL
                )
            processes.append(process)
            return process

        spawned_at = time.time()
        loaders = [spawn(f"load-{number}", [sys.executable, "-c", BUSY_LOOP]) for number in range(load)]
        workers = [spawn(f"worker-{number}", [sys.executable, "-m", "vardiya", "worker"]) for number in range(args.workers)]
        scheduler = spawn("scheduler", [sys.executable, "-m", "vardiya", "scheduler"])
        # Planned ticks run from ``start`` to ``end``; stop the scheduler just after the last one is due.
        time.sleep(max(0.0, end + 0.5 - time.time()))
        for process in [*workers, scheduler]:
            if process.poll() is not None:
                raise SystemExit(f"a vardiya process exited early ({process.args}):\n{_tail(logs[processes.index(process)])}")
        # Count the ticks planned after every vardiya process has loaded the app (and a second more to
        # open its store): normally all of them; a process that came up late would otherwise show its
        # start-up as lateness (or, the scheduler, pass the first ticks by as missed).
        readies = [float(path.read_text()) for path in ready_dir.glob("ready-*")]
        if len(readies) < args.workers + 1:
            raise SystemExit(
                f"only {len(readies)} of {args.workers + 1} vardiya processes loaded the app in the "
                f"{end - spawned_at:.1f} s from their start to the last planned tick (a loaded machine starts "
                "them slowly): give a longer --late-s"
            )
        first = max(start, math.ceil(max(readies) + 1.0))
        if first >= end:
            raise SystemExit(f"the vardiya processes came up {max(readies) - start:.1f} s after the first tick")
        window_start = datetime.fromtimestamp(first, UTC)
        window_end = datetime.fromtimestamp(end, UTC)
        expected = args.late_jobs * int(end - first)  # a tick per job per second
        store = open_store(target.store_url)
        try:
            # A loaded scheduler may fire the last second's ticks late: give it up to DRAIN_S to fire them.
            deadline = time.monotonic() + DRAIN_S
            while time.monotonic() < deadline:
                if sum(1 for row in tick_rows(store) if window_start <= row[1] < window_end) >= expected:
                    break
                time.sleep(0.2)
            _stop(scheduler, 10)
            deadline = time.monotonic() + DRAIN_S
            while True:
                rows = [row for row in tick_rows(store) if window_start <= row[1] < window_end]
                if all(row[0] in ("succeeded", "dead") for row in rows) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            for process in workers:
                _stop(process, 15)
            for process in loaders:
                _stop(process, 5)
            measured = load_average()
            rows = [row for row in tick_rows(store) if window_start <= row[1] < window_end]
        finally:
            store.close()
    finally:
        for process in processes:
            _stop(process, 5)
        shutil.rmtree(work, ignore_errors=True)
    done, run_s, not_done = [], [], {}
    for state, _planned, _created, result in rows:
        if state == "succeeded" and result is not None:
            done.append(float(result["lateness_s"]))
            finished, started = result.get("finished_at"), result.get("started_at")
            if finished and started:
                run_s.append((datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds())
        else:
            not_done[state] = not_done.get(state, 0) + 1
    fired_lag = [(created - planned).total_seconds() for _state, planned, created, _result in rows]
    return Lateness(
        backend=target.backend, load=load, expected=expected, done=done, fired_lag=fired_lag, run_s=run_s,
        not_done=not_done, load_average=measured, up_s=max(readies) - spawned_at,
        late_start_s=first - start,
    )


def bench_lateness(backend: str, args: argparse.Namespace) -> list[Lateness]:
    results = []
    for load in args.load:
        print(
            f"[{backend}] lateness, --load {load}: {args.workers} workers, 1 scheduler, {args.late_jobs} jobs, "
            f"{args.late_s:g} s of ticks ...",
            flush=True,
        )
        with scratch(backend, args.pg_url) as target:
            result = lateness_run(target, args, load)
        for line in result.lines():
            print(line, flush=True)
        results.append(result)
    return results


# -- main ------------------------------------------------------------------------------------------------


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # so child processes are stopped and scratch databases dropped


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    import sqlalchemy

    versions = f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, SQLAlchemy {sqlalchemy.__version__}"
    try:
        import psycopg

        versions += f", psycopg {psycopg.__version__} ({psycopg.pq.__impl__})"
    except ImportError:
        pass
    print(
        f"bench_scheduler: planning {args.jobs:,} slot jobs x {args.steps} steps (medians of {args.runs} runs); "
        f"lateness of {args.late_jobs} jobs, {args.workers} workers, {args.late_s:g} s, --load "
        f"{' '.join(map(str, args.load))}; {versions}; {os.cpu_count()} CPUs"
    )
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {load_average()}", flush=True)
    began = time.perf_counter()
    app = planning_app(args.jobs) if "planning" in args.parts else None
    planning: list[Comparison] = []
    lateness: list[Lateness] = []
    for backend in args.backends:
        if app is not None:
            planning += bench_planning(backend, args, app)
        if "lateness" in args.parts:
            lateness += bench_lateness(backend, args)
    print(f"\nsummary ({time.perf_counter() - began:.0f} s; {load_average()}):")
    for comparison in planning:
        print(
            f"  [{comparison.backend}] {comparison.what}: vardiya {comparison.vardiya_median:,.0f}, "
            f"raw {comparison.raw_median:,.0f}, ratio {comparison.ratio:.3f}"
        )
    for result in lateness:
        if result.done:
            print(
                f"  [{result.backend}] lateness --load {result.load}: p50 {percentile(result.done, 0.5) * 1000:.1f} ms, "
                f"p99 {percentile(result.done, 0.99) * 1000:.1f} ms, max {max(result.done) * 1000:.1f} ms, "
                f"{len(result.done)} of {result.expected} ticks"
            )
        else:
            print(f"  [{result.backend}] lateness --load {result.load}: no tick succeeded")
    print(flush=True)


if __name__ == "__main__":
    main()
