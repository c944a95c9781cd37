"""Enqueue-to-start latency of an async call with an idle worker, p50 and p99 in ms.

vardiya, one run: a fresh store (SQLite: a new file; PostgreSQL: the tables emptied); a worker in a
spawned process, ``Worker(store, app).run()`` with its defaults (on PostgreSQL it waits on ``LISTEN``;
on SQLite it reads ``PRAGMA data_version`` every 10 ms and wakes at the first commit); it has nothing
to do until the first submit. Then this process submits one item at a time with ``Invoker.submit`` (``--items`` of them,
``--gap-ms`` apart, after 5 warm-up submits that are not counted). The handler, first thing, records
``time.time()``; the latency of an item is that start time minus the ``time.time()`` taken just before
its ``submit`` was called, so it includes the submit itself (its INSERT, its NOTIFY, its commit), the
wake-up, the claim, and the handler's dispatch. "accepted -> start" is measured from the moment
``submit`` returned instead. The two processes share the wall clock. A run fails (non-zero exit) if an
item does not start within 30 s.

raw, the floor, the same way: a listener process and this one sharing a plain table ``t (id, state)``.
SQLite (``sqlite3``, WAL): one INSERT per submit; the listener polls every 10 ms (vardiya's smallest
poll interval) with ``UPDATE t SET state='running' WHERE id IN (SELECT id FROM t WHERE state='ready'
ORDER BY id LIMIT 1) RETURNING id``. PostgreSQL (psycopg 3): INSERT + ``NOTIFY`` in one transaction;
the listener waits on ``LISTEN`` and claims with the same UPDATE (``FOR UPDATE SKIP LOCKED``).

Percentiles are nearest-rank over a run's items; the medians over runs are printed with every run's
figures. Target (printed, not enforced): p99 < 50 ms on PostgreSQL; SQLite is reported too.

Run: ``.venv/bin/python benchmarks/bench_latency.py [--backend sqlite|postgresql|both] [--items 200]
[--gap-ms 20] [--runs 3] [--pg-url URL]``.
"""

from __future__ import annotations

import math
import multiprocessing
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Scratch, load_average, scratch  # noqa: E402
from _invocation import empty_postgres, header, open_vardiya, parse_args, remove_sqlite, sqlite_run_url  # noqa: E402

from vardiya.app import App  # noqa: E402
from vardiya.invoke.invoker import Invoker  # noqa: E402
from vardiya.service.worker import Worker  # noqa: E402

HANDLER = "bench_latency"
IDLE_S = 1.5
"""How long the worker idles before the first submit (the first submit after idle is reported alone)."""
TARGET_P99_MS = 50.0
START_TIMEOUT_S = 30.0

#: n -> wall-clock time the handler started (in the worker process).
STARTED: dict[int, float] = {}


def stamp(record: Any, context: Any) -> None:
    """The benchmark handler: notes when it started, first thing."""
    STARTED[record["n"]] = time.time()


def build_app() -> App:
    app = App("bench_latency")
    app.handler(HANDLER, model="async")(stamp)
    return app


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


# -- the worker processes -------------------------------------------------------------------------------


def vardiya_listener(url: str, ready: Any, stop: Any, results: Any) -> None:
    """An idle vardiya worker; on ``stop`` it drains and sends back its handler's start times."""
    from vardiya.store.api import open_store

    store = open_store(url)
    worker = Worker(store, build_app())
    threading.Thread(target=lambda: (stop.wait(), worker.stop()), daemon=True).start()
    ready.put(None)
    worker.run()
    results.put(dict(STARTED))


def raw_listener(backend: str, target: str, ready: Any, stop: Any, results: Any) -> None:
    """The floor: claim one ready row as soon as it is seen (LISTEN on PostgreSQL, 10 ms polls on SQLite)."""
    started: dict[int, float] = {}
    if backend == "sqlite":
        connection = sqlite3.connect(target, isolation_level=None, timeout=30)
        claim = "UPDATE t SET state = 'running' WHERE id IN (SELECT id FROM t WHERE state = 'ready' ORDER BY id LIMIT 1) RETURNING id"
        ready.put(None)
        while not stop.is_set():
            connection.execute("BEGIN IMMEDIATE")
            row = connection.execute(claim).fetchone()
            connection.execute("COMMIT")
            if row is None:
                time.sleep(0.01)
            else:
                started[row[0]] = time.time()
    else:
        import psycopg

        listener = psycopg.connect(target, autocommit=True)
        listener.execute("LISTEN bench_latency")
        worker = psycopg.connect(target)
        claim = (
            "UPDATE t SET state = 'running' WHERE id IN (SELECT id FROM t WHERE state = 'ready' ORDER BY id LIMIT 1 "
            "FOR UPDATE SKIP LOCKED) RETURNING id"
        )
        ready.put(None)
        while not stop.is_set():
            for _ in listener.notifies(timeout=0.25, stop_after=1):
                while True:
                    with worker.transaction():
                        row = worker.execute(claim).fetchone()
                    if row is None:
                        break
                    started[row[0]] = time.time()
    results.put(started)


# -- the submitting side --------------------------------------------------------------------------------


class Run:
    """The latencies of one run, in ms (warm-up items have negative numbers and are not counted)."""

    def __init__(self, submitted: dict[int, tuple[float, float]], started: dict[int, float]) -> None:
        missing = [n for n in submitted if n not in started]
        if missing:
            raise SystemExit(f"{len(missing)} of {len(submitted)} items never started (first: {missing[0]})")
        counted = {n: times for n, times in submitted.items() if n >= 0}
        self.latency = [(started[n] - called) * 1000 for n, (called, _) in counted.items()]
        self.accepted = [(started[n] - returned) * 1000 for n, (_, returned) in counted.items()]
        self.submit = [(returned - called) * 1000 for called, returned in counted.values()]
        first = min(submitted)
        self.first_after_idle = (started[first] - submitted[first][0]) * 1000


def warm_up_count(gap_s: float) -> int:
    """Warm-up submits: one second's worth (at least 5), so a worker that was backing off is polling
    fast again when the counted items start; the first of them measures the wake-up from idle."""
    return max(5, math.ceil(1.0 / max(gap_s, 0.001)))


def submit_with_gaps(submit: Callable[[int], None], items: int, gap_s: float) -> dict[int, tuple[float, float]]:
    submitted = {}
    for number in range(-warm_up_count(gap_s), items):
        called = time.time()
        submit(number)
        submitted[number] = (called, time.time())
        time.sleep(gap_s)
    return submitted


def with_listener(start: Callable[..., None], arguments: tuple[Any, ...], body: Callable[[], Any]) -> tuple[Any, dict[int, float]]:
    """Start the listener process, let it settle into idling, run ``body``, stop it, return its start times."""
    context = multiprocessing.get_context("spawn")
    ready, stop, results = context.Queue(), context.Event(), context.Queue()
    process = context.Process(target=start, args=(*arguments, ready, stop, results), daemon=True)
    process.start()
    try:
        ready.get(timeout=60)
        time.sleep(IDLE_S)  # the worker settles into idling
        value = body()
        time.sleep(0.2)
        stop.set()
        started = results.get(timeout=60)
    finally:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
    return value, started


def vardiya_run(target: Scratch, items: int, gap_s: float) -> Run:
    postgres = target.backend == "postgresql"
    url = target.store_url if postgres else sqlite_run_url(target)
    store = open_vardiya(url)
    try:
        if postgres:
            empty_postgres(store)
        invoker = Invoker(store, build_app())

        def body() -> dict[int, tuple[float, float]]:
            submitted = submit_with_gaps(lambda n: invoker.submit(HANDLER, {"n": n}), items, gap_s)
            total = items + warm_up_count(gap_s)
            wait_for(lambda: store.items.counts(kind=f"call:{HANDLER}")["succeeded"] >= total)
            return submitted

        submitted, started = with_listener(vardiya_listener, (url,), body)
        return Run(submitted, started)
    finally:
        store.close()
        if not postgres:
            remove_sqlite(url)


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            return  # Run() reports the items that never started
        time.sleep(0.05)


def raw_run(target: Scratch, items: int, gap_s: float) -> Run:
    offset = warm_up_count(gap_s) + 1  # table ids are positive
    if target.backend == "sqlite":
        path = str(Path(target.raw_target).parent / f"raw-{time.monotonic_ns()}.db")
        connection = sqlite3.connect(path, isolation_level=None, timeout=30)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, state TEXT NOT NULL)")
        connection.execute("CREATE INDEX t_ready ON t (id) WHERE state = 'ready'")

        def submit(number: int) -> None:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO t (id, state) VALUES (?, 'ready')", (number + offset,))
            connection.execute("COMMIT")

        arguments: tuple[Any, ...] = ("sqlite", path)
    else:
        import psycopg

        path = None
        connection = psycopg.connect(target.raw_target)
        with connection.transaction():
            connection.execute("DROP TABLE IF EXISTS t")
            connection.execute("CREATE TABLE t (id bigint PRIMARY KEY, state text NOT NULL)")
            connection.execute("CREATE INDEX t_ready ON t (id) WHERE state = 'ready'")

        def submit(number: int) -> None:
            with connection.transaction():
                connection.execute("INSERT INTO t (id, state) VALUES (%s, 'ready')", (number + offset,))
                connection.execute("NOTIFY bench_latency")

        arguments = ("postgresql", target.raw_target)
    try:
        submitted, started = with_listener(
            raw_listener, arguments, lambda: (submit_with_gaps(submit, items, gap_s), time.sleep(0.3))[0]
        )
    finally:
        connection.close()
        if path is not None:
            remove_sqlite(f"sqlite:///{path}")
    by_number = {number - offset: moment for number, moment in started.items()}
    return Run(submitted, by_number)


# -- main -----------------------------------------------------------------------------------------------


def summary(name: str, runs: list[Run], attribute: str) -> tuple[float, float, str]:
    p50s = [percentile(getattr(run, attribute), 0.50) for run in runs]
    p99s = [percentile(getattr(run, attribute), 0.99) for run in runs]
    each = "; ".join(f"{p50:.1f}/{p99:.1f}" for p50, p99 in zip(p50s, p99s, strict=True))
    p50, p99 = statistics.median(p50s), statistics.median(p99s)
    return p50, p99, f"  {name:<34} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   (runs p50/p99: {each})"


def bench(target: Scratch, args: Any) -> None:
    gap_s = args.gap_ms / 1000
    raw_runs: list[Run] = []
    vardiya_runs: list[Run] = []
    for _ in range(args.runs):
        raw_runs.append(raw_run(target, args.items, gap_s))
        vardiya_runs.append(vardiya_run(target, args.items, gap_s))
    print(f"[{target.backend}] enqueue-to-start, idle worker, {args.items} submits {args.gap_ms:g} ms apart per run")
    print(summary("raw", raw_runs, "latency")[2])
    _, p99, line = summary("vardiya submit -> start", vardiya_runs, "latency")
    print(line)
    print(summary("vardiya accepted -> start", vardiya_runs, "accepted")[2])
    print(summary("vardiya submit call itself", vardiya_runs, "submit")[2])
    for name, runs in (("raw", raw_runs), ("vardiya", vardiya_runs)):
        firsts = [run.first_after_idle for run in runs]
        print(f"  {name} first submit after {IDLE_S:g} s idle: median {statistics.median(firsts):.1f} ms "
              f"(runs: {', '.join(f'{first:.1f}' for first in firsts)})")
    if target.backend == "postgresql":
        met = "met" if p99 < TARGET_P99_MS else "NOT met"
        print(f"  target: p99 < {TARGET_P99_MS:g} ms ... {met} ({p99:.1f} ms)   ({load_average()})")
    else:
        print(f"  (SQLite: reported, the target is PostgreSQL's; p99 {p99:.1f} ms)   ({load_average()})")
    print(flush=True)


def main() -> None:
    def extra(parser: Any) -> None:
        parser.add_argument("--gap-ms", type=float, default=20.0, help="pause between submits (default 20 ms)")

    args = parse_args("enqueue-to-start latency with an idle worker: vardiya vs a raw listener", default_items=200, extra=extra)
    header("bench_latency", args, "enqueue-to-start latency, idle worker in another process")
    for backend in args.backends:
        with scratch(backend, args.pg_url) as target:
            bench(target, args)


if __name__ == "__main__":
    main()
