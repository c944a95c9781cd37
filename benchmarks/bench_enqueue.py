"""The enqueue side, jobs/s and per-call latency: vardiya's submit against PgQueuer's and Huey's enqueue.

A web request that hands work to a queue makes one call in one transaction; a batch job hands over
thousands at once. Both are measured here, every system on the same scratch database server, in the
same run, interleaved round by round:

- **single** (``--items`` calls, one job each, each its own transaction, timed call by call):
  vardiya ``Invoker.submit(name, record)`` (async model: a durable accept, its wake-up included) and
  ``submit(..., key=...)`` (the idempotency key's cost); PgQueuer ``Queries.enqueue(name, payload, 0)``
  on asyncpg (uvloop when installed) on PostgreSQL; Huey's ``task(n)`` with ``SqliteHuey`` (default
  storage, an fsync per commit, and ``fsync=False``) on SQLite. A raw driver loop (one ``INSERT`` and
  ``COMMIT`` per row) is printed for scale. Rate is calls / total time; p50 and p99 of the calls.
- **bulk** (``--bulk-items`` jobs in one call): vardiya ``submit_many`` and the stream's
  ``append_many``; PgQueuer's list ``enqueue``. Huey has no bulk enqueue: its single loop is its best.

Targets (printed, never enforced): single submit >= 1x the best peer's single enqueue; bulk
``submit_many`` and ``append_many`` >= 1.5x PgQueuer's best enqueue on PostgreSQL and >= 4x Huey's on
SQLite.

Run: ``benchmarks/.venv-peers/bin/python benchmarks/bench_enqueue.py [--backend sqlite|postgresql|both]
[--items 2000] [--bulk-items 20000] [--runs 3] [--pg-url URL]`` (with ``.venv/bin/python`` the peers
are skipped and their targets say "not measured").
"""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Scratch, scratch  # noqa: E402
from _invocation import (  # noqa: E402
    PEERS_VENV,
    empty_postgres,
    header,
    open_vardiya,
    parse_args,
    peer_available,
    remove_sqlite,
    sqlite_run_url,
    target_line,
)
from bench_async import HANDLER, asyncpg_dsn, build_app, new_loop, pgqueuer_install, records  # noqa: E402

from vardiya.invoke.invoker import Invoker  # noqa: E402

STREAM = "bench_stream_noop"
BULK_PG_TARGET = 1.5
BULK_SQLITE_TARGET = 4.0
SINGLE_TARGET = 1.0


def stream_app() -> Any:
    app = build_app()
    app.handler(STREAM, model="stream", batch_size=100)(lambda batch, context: None)
    return app


@dataclass
class Case:
    """One way of enqueueing, over the runs: its rates and (single calls) every call's latency."""

    system: str
    config: str
    run: Callable[[], tuple[float, list[float]]]
    """One run; returns (jobs/s, per-call latencies in seconds: empty for a bulk call)."""
    rates: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    def once(self) -> None:
        gc.collect()  # each run from a collected heap, not paying for the previous case's garbage (bench_async)
        rate, latencies = self.run()
        self.rates.append(rate)
        self.latencies.extend(latencies)

    def line(self) -> str:
        runs = ", ".join(f"{rate:,.0f}" for rate in self.rates)
        text = f"  {self.system + ' ' + self.config:<46} {self.median:>10,.0f} jobs/s  (runs: {runs})"
        if self.latencies:
            ordered = sorted(self.latencies)
            p50 = ordered[len(ordered) // 2] * 1000
            p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
            text += f"  p50 {p50:.3f} ms  p99 {p99:.3f} ms"
        return text


def timed_calls(call: Callable[[int], None], items: int) -> tuple[float, list[float]]:
    latencies = []
    began = time.perf_counter()
    for number in range(items):
        start = time.perf_counter()
        call(number)
        latencies.append(time.perf_counter() - start)
    return items / (time.perf_counter() - began), latencies


# -- vardiya --------------------------------------------------------------------------------------------


def vardiya_store(target: Scratch) -> tuple[Any, Callable[[], None]]:
    postgres = target.backend == "postgresql"
    url = target.store_url if postgres else sqlite_run_url(target)
    store = open_vardiya(url)
    if postgres:
        empty_postgres(store)

    def close() -> None:
        store.close()
        if not postgres:
            remove_sqlite(url)

    return store, close


def vardiya_single(target: Scratch, items: int, *, keyed: bool) -> Case:
    app = build_app()

    def run() -> tuple[float, list[float]]:
        store, close = vardiya_store(target)
        try:
            invoker = Invoker(store, app)
            if keyed:
                return timed_calls(lambda n: invoker.submit(HANDLER, {"n": n}, key=f"order-{n}"), items)
            return timed_calls(lambda n: invoker.submit(HANDLER, {"n": n}), items)
        finally:
            close()

    return Case("vardiya", "submit, with key" if keyed else "submit", run)


def vardiya_bulk(target: Scratch, items: int, *, stream: bool) -> Case:
    app = stream_app()

    def run() -> tuple[float, list[float]]:
        store, close = vardiya_store(target)
        try:
            payloads = records(items)
            invoker = Invoker(store, app)
            began = time.perf_counter()
            if stream:
                invoker.append_many(STREAM, payloads)
            else:
                invoker.submit_many(HANDLER, payloads)
            return items / (time.perf_counter() - began), []
        finally:
            close()

    return Case("vardiya", "append_many (stream)" if stream else "submit_many", run)


# -- raw driver loops, for scale -------------------------------------------------------------------------


def raw_single(target: Scratch, items: int) -> Case:
    def run() -> tuple[float, list[float]]:
        if target.backend == "postgresql":
            import psycopg

            with psycopg.connect(target.raw_target) as connection:
                connection.execute("DROP TABLE IF EXISTS raw_jobs")
                connection.execute("CREATE TABLE raw_jobs (id bigserial PRIMARY KEY, name text, payload jsonb)")
                connection.commit()

                def call(number: int) -> None:
                    connection.execute("INSERT INTO raw_jobs (name, payload) VALUES (%s, %s)", (HANDLER, f'{{"n": {number}}}'))
                    connection.commit()

                return timed_calls(call, items)
        with contextlib.closing(sqlite3.connect(target.raw_target, isolation_level=None)) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("DROP TABLE IF EXISTS raw_jobs")
            connection.execute("CREATE TABLE raw_jobs (id INTEGER PRIMARY KEY, name TEXT, payload TEXT)")

            def call(number: int) -> None:
                connection.execute("BEGIN")
                connection.execute("INSERT INTO raw_jobs (name, payload) VALUES (?, ?)", (HANDLER, f'{{"n": {number}}}'))
                connection.execute("COMMIT")

            return timed_calls(call, items)

    return Case("raw", "INSERT + COMMIT per row", run)


# -- PgQueuer ---------------------------------------------------------------------------------------------


def pgqueuer_case(target: Scratch, items: int, *, bulk: bool) -> Case:
    dsn = asyncpg_dsn(target)

    async def enqueue() -> tuple[float, list[float]]:
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        connection = await asyncpg.connect(dsn)
        try:
            queries = Queries(AsyncpgDriver(connection))
            await queries.clear_queue()
            payloads = [f'{{"n": {number}}}'.encode() for number in range(items)]
            if bulk:
                began = time.perf_counter()
                await queries.enqueue([HANDLER] * items, payloads, [0] * items)
                return items / (time.perf_counter() - began), []
            latencies = []
            began = time.perf_counter()
            for payload in payloads:
                start = time.perf_counter()
                await queries.enqueue(HANDLER, payload, 0)
                latencies.append(time.perf_counter() - start)
            return items / (time.perf_counter() - began), latencies
        finally:
            await connection.close()

    def run() -> tuple[float, list[float]]:
        loop = new_loop()
        try:
            return loop.run_until_complete(enqueue())
        finally:
            loop.close()

    return Case("PgQueuer", "enqueue(list)" if bulk else "enqueue, one job", run)


# -- Huey -------------------------------------------------------------------------------------------------


def huey_case(target: Scratch, items: int, *, fsync: bool | None) -> Case:
    from huey import SqliteHuey

    def run() -> tuple[float, list[float]]:
        path = str(Path(target.raw_target).parent / f"huey-{time.monotonic_ns()}.db")
        huey = SqliteHuey(name="bench", filename=path, fsync=fsync)
        task = huey.task(name=HANDLER)(lambda n: None)
        try:
            return timed_calls(task, items)
        finally:
            huey.storage.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(path + suffix).unlink()

    storage = "default storage" if fsync is None else f"fsync={fsync}"
    return Case("Huey", f"task(n), {storage}", run)


# -- main -------------------------------------------------------------------------------------------------


def bench(target: Scratch, args: Any) -> None:
    single = [
        vardiya_single(target, args.items, keyed=False),
        vardiya_single(target, args.items, keyed=True),
        raw_single(target, args.items),
    ]
    bulk = [vardiya_bulk(target, args.bulk_items, stream=False), vardiya_bulk(target, args.bulk_items, stream=True)]
    if target.backend == "postgresql":
        peer, goal, available = "PgQueuer", BULK_PG_TARGET, peer_available("pgqueuer") and peer_available("asyncpg")
        if available:
            if not getattr(args, "pgqueuer_installed", False):  # bench_async installed it already
                pgqueuer_install(target)
            single.append(pgqueuer_case(target, args.items, bulk=False))
            bulk.append(pgqueuer_case(target, args.bulk_items, bulk=True))
    else:
        peer, goal, available = "Huey", BULK_SQLITE_TARGET, peer_available("huey")
        if available:
            single.append(huey_case(target, args.items, fsync=False))
            single.append(huey_case(target, min(args.items, 500), fsync=None))
    for round_number in range(args.runs):
        for case in single + bulk:
            case.once()
        print(f"  ... round {round_number + 1} of {args.runs} done", flush=True)
    print(f"[{target.backend}] single enqueue: one job per call, one transaction each ({args.items:,} calls per run)")
    for case in single:
        print(case.line())
    print(f"[{target.backend}] bulk enqueue: {args.bulk_items:,} jobs in one call")
    for case in bulk:
        print(case.line())
    if not available:
        print(f"  target: vardiya / best {peer} ... not measured ({peer} is not installed here; run with {PEERS_VENV}/bin/python)")
        print(flush=True)
        return
    theirs_single = max((case for case in single if case.system == peer), key=lambda case: case.median)
    print(target_line(f"single: vardiya submit / {peer} {theirs_single.config}", single[0].median / theirs_single.median, SINGLE_TARGET))
    peer_bulk = [case for case in bulk + single if case.system == peer]
    theirs_bulk = max(peer_bulk, key=lambda case: case.median)
    for ours in bulk[:2]:
        print(target_line(f"bulk: vardiya {ours.config} / {peer} {theirs_bulk.config}", ours.median / theirs_bulk.median, goal))
    # Both pay for the idempotency key's table: without a key the item gets a random one.
    print(f"  a caller's key instead of a random one: {single[1].median / single[0].median - 1:+.0%} single-submit throughput", flush=True)
    print(flush=True)


def main() -> None:
    def extra(parser: Any) -> None:
        parser.add_argument("--bulk-items", type=int, default=20_000, help="jobs per bulk call (default 20,000)")

    args = parse_args("enqueue: vardiya submit / submit_many / append_many vs PgQueuer and Huey", default_items=2_000, extra=extra)
    header("bench_enqueue", args, "enqueue rate and per-call latency")
    for backend in args.backends:
        with scratch(backend, args.pg_url) as target:
            bench(target, args)


if __name__ == "__main__":
    main()
