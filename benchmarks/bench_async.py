"""Async no-op throughput, jobs/s: vardiya's Worker draining submitted calls, against peer task queues.

What one run of one configuration does (every system alike):
1. enqueue N no-op jobs in bulk (timed separately: the "enqueue" figures), payload ``{"n": i}``;
   PostgreSQL: then ANALYZE (not timed; autovacuum is off on the benchmark server);
2. timed: drain them with the system's own worker until its queue is empty; the "drain" rate is
   N / that time. Every job is checked to have run exactly once (else the script exits non-zero).

- **vardiya:** ``Invoker(store, app).submit_many("bench_noop", records)``; then
  ``Worker(store, app, ...).run(until_idle=True)`` in this process (threads included), or one such
  worker per spawned process for the "2 processes" setting. The handler is ``def noop(record,
  context)``; the worker claims, runs, and records every call (its attempt, its busy time and the
  item's state; a failed call would also get a call-log row), which is what an async invocation is in
  vardiya. ``default`` is ``Worker(store, app)``
  as it comes (1 thread, prefetch 100, 30 s lease, heartbeat on); the other settings change one thing
  each (``poll_max=0.05`` where a worker may go idle while another still holds items, so it notices
  the end within 50 ms instead of 1 s). ``CLI`` is ``vardiya worker --until-idle`` run as a user runs
  it (one process, defaults), timed from its handler's first call to the process's exit, so the
  interpreter start, the imports and the app loading are left out.
- **PostgreSQL peers** (run with ``benchmarks/.venv-peers/bin/python``):
  PgQueuer (asyncpg driver, uvloop when installed, durable tables as installed by ``install()``,
  ``QueueManager.run(mode=drain)``) over a grid of batch sizes, connections per process and processes;
  its best median is the reference. Procrastinate (psycopg connector, ``run_worker_async(wait=False)``)
  for reference, on ``--procrastinate-items`` jobs (about a hundred jobs/s here).
- **SQLite peer:** Huey with ``SqliteHuey`` (its consumer, thread or process workers); its default
  storage (``synchronous`` left at SQLite's FULL: an fsync per enqueue and per dequeue, measured on
  ``--huey-default-items`` items because it is slow) and ``fsync=False`` (``synchronous=OFF``, which
  is closer to vardiya's WAL + ``synchronous=NORMAL``). The best Huey median is the reference.
- **raw, for scale:** bench_claims' raw claim-100-then-done loop on a plain table (no worker, no
  handler, no history).

Every configuration runs ``--runs`` times, interleaved round by round (system by system), and its
median is printed with every run, with each configuration's end-to-end rate (N / (enqueue time + drain
time), run by run). Targets (printed, never enforced): PostgreSQL, best vardiya drain and bulk enqueue
>= 1.5x best PgQueuer's; SQLite, >= 4x best Huey's; end to end, best vardiya >= 2x the best peer's on
each backend. Then, in the same run, ``bench_enqueue.py``'s rows (issue 19): single submit (rate, p50,
p99) against PgQueuer's and Huey's single enqueue (>= 1x), and ``submit_many`` / ``append_many`` of
``--items`` jobs against the peer's best enqueue (>= 1.5x PgQueuer, >= 4x Huey), each with its target.

Run: ``benchmarks/.venv-peers/bin/python benchmarks/bench_async.py [--backend sqlite|postgresql|both]
[--items 20000] [--runs 3] [--pg-url URL] [--huey-default-items 2000] [--procrastinate-items 1000]
[--single-items 2000]``
(with ``.venv/bin/python`` the peers are skipped and their targets say "not measured").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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
    Series,
    analyze_postgres,
    best,
    empty_postgres,
    header,
    open_vardiya,
    parse_args,
    peer_available,
    quiet_logs,
    remove_sqlite,
    run_processes,
    sqlite_run_url,
    target_line,
)

from vardiya.app import App  # noqa: E402
from vardiya.invoke.invoker import Invoker  # noqa: E402
from vardiya.service.worker import Worker, WorkerSettings  # noqa: E402
from vardiya.store import ItemState  # noqa: E402

HANDLER = "bench_noop"
PG_TARGET = 1.5
SQLITE_TARGET = 4.0
END_TO_END_TARGET = 2.0  # submit + drain against the best peer's, both backends

#: Handler calls in this process (list.append is atomic under the GIL, so threads may share it).
CALLED: list[int] = []
#: Where the CLI worker's handler writes the time of its first call (the CLI's drain starts there).
FIRST_CALL_FILE = os.environ.get("BENCH_FIRST_CALL_FILE")


def noop(record: Any, context: Any) -> None:
    """The benchmark handler: counts its calls and does nothing else."""
    if FIRST_CALL_FILE and not CALLED:
        Path(FIRST_CALL_FILE).write_text(repr(time.time()))
    CALLED.append(1)


def build_app() -> App:
    app = App("bench_async")
    app.handler(HANDLER, model="async")(noop)
    return app


def records(items: int) -> list[dict[str, int]]:
    return [{"n": number} for number in range(items)]


@dataclass
class Runner:
    """One configuration of one system: its drain and enqueue rates over the runs."""

    drain: Series
    enqueue: Series
    run: Callable[[], tuple[float, float]]
    """One run; returns (enqueue items/s, drain items/s)."""

    def once(self) -> None:
        # Every system's run starts from a collected heap (not timed): otherwise a run pays for the
        # previous one's garbage, in a full collection of this process's heap that can take longer than
        # a 5,000-job bulk call.
        gc.collect()
        enqueue_rate, drain_rate = self.run()
        self.enqueue.rates.append(enqueue_rate)
        self.drain.rates.append(drain_rate)


def runner(system: str, config: str, run: Callable[[], tuple[float, float]]) -> Runner:
    return Runner(drain=Series(system, config), enqueue=Series(system, config), run=run)


def check(system: str, done: int, items: int) -> None:
    if done != items:
        raise SystemExit(f"{system}: {done} of {items} jobs ran; the run did not do its work")


# -- vardiya --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VardiyaSetting:
    name: str
    processes: int = 1
    worker: dict[str, Any] = field(default_factory=dict)


VARDIYA_SETTINGS = (
    VardiyaSetting("default"),
    VardiyaSetting("prefetch=20", worker={"prefetch": 20}),
    VardiyaSetting("prefetch=500", worker={"prefetch": 500}),
    VardiyaSetting("2 threads", worker={"concurrency": 2, "poll_max": 0.05}),
    VardiyaSetting("2 processes", processes=2, worker={"poll_max": 0.05}),
)


def vardiya_child(url: str, settings: dict[str, Any], *, ready: Any, start: Any) -> dict[str, Any]:
    """One worker process: open the store, build the worker, wait for the start, drain."""
    from vardiya.store.api import open_store

    store = open_store(url)
    worker = Worker(store, build_app(), WorkerSettings(**settings))
    ready(None)
    start()
    report = worker.run(until_idle=True)
    return {"calls": len(CALLED), "report": report.to_json()}


def vardiya_runner(target: Scratch, setting: VardiyaSetting, items: int) -> Runner:
    postgres = target.backend == "postgresql"
    app = build_app()

    def run() -> tuple[float, float]:
        url = target.store_url if postgres else sqlite_run_url(target)
        store = open_vardiya(url)
        try:
            if postgres:
                empty_postgres(store)
            payloads = records(items)
            began = time.perf_counter()
            Invoker(store, app).submit_many(HANDLER, payloads)
            submit_s = time.perf_counter() - began
            if postgres:
                analyze_postgres(target.raw_target)
            CALLED.clear()
            if setting.processes == 1:
                worker = Worker(store, app, WorkerSettings(**setting.worker))
                began = time.perf_counter()
                worker.run(until_idle=True)
                drain_s = time.perf_counter() - began
                calls = len(CALLED)
            else:
                result = run_processes(vardiya_child, [(url, setting.worker)] * setting.processes)
                drain_s = result.elapsed
                calls = sum(child["calls"] for child in result.results)
            succeeded = store.items.counts(kind=app.handlers[HANDLER].call_kind)[ItemState.SUCCEEDED]
            check(f"vardiya {setting.name}", min(calls, succeeded), items)
            return items / submit_s, items / drain_s
        finally:
            store.close()
            if not postgres:
                remove_sqlite(url)

    return runner("vardiya", setting.name, run)


APP = build_app()  # what ``vardiya worker --app benchmarks/bench_async.py:APP`` loads


def cli_command(url: str) -> list[str]:
    return [
        sys.executable, "-m", "vardiya", "worker", "--db", url, "--app", f"{Path(__file__).resolve()}:APP",
        "--until-idle", "--json",
    ]


def cli_runner(target: Scratch, items: int) -> Runner:
    """``vardiya worker --until-idle`` as a user runs it, one process, timed from its handler's first call
    to its exit: the interpreter start, the imports and the app loading are left out."""
    postgres = target.backend == "postgresql"
    app = build_app()

    def run() -> tuple[float, float]:
        url = target.store_url if postgres else sqlite_run_url(target)
        store = open_vardiya(url)
        try:
            if postgres:
                empty_postgres(store)
            began = time.perf_counter()
            Invoker(store, app).submit_many(HANDLER, records(items))
            submit_s = time.perf_counter() - began
            if postgres:
                analyze_postgres(target.raw_target)
            stamp = Path(tempfile.mkdtemp(prefix="vardiya-bench-")) / "first-call"
            environment = {**os.environ, "BENCH_FIRST_CALL_FILE": str(stamp)}
            done = subprocess.run(cli_command(url), capture_output=True, text=True, check=False, env=environment)
            ended = time.time()
            if done.returncode != 0:
                raise SystemExit(f"vardiya worker failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
            succeeded = store.items.counts(kind=app.handlers[HANDLER].call_kind)[ItemState.SUCCEEDED]
            check("vardiya worker CLI", succeeded, items)
            first_call = float(stamp.read_text())
            shutil.rmtree(stamp.parent, ignore_errors=True)
            return items / submit_s, items / (ended - first_call)
        finally:
            store.close()
            if not postgres:
                remove_sqlite(url)

    return runner("vardiya", "CLI `vardiya worker --until-idle`", run)


# -- raw (bench_claims' loop) ------------------------------------------------------------------------


def raw_runner(target: Scratch, items: int) -> tuple[Runner, Callable[[], None]]:
    from bench_claims import raw_postgres_side, raw_sqlite_side

    if target.backend == "postgresql":
        run, close = raw_postgres_side(target.raw_target, items)
    else:
        run, close = raw_sqlite_side(target.raw_target, items)
    return runner("raw", "claim-100-then-done loop", lambda: (float("nan"), run())), close


# -- PgQueuer -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PgQueuerSetting:
    batch_size: int
    connections: int = 1
    processes: int = 1

    @property
    def name(self) -> str:
        text = f"batch_size={self.batch_size} x{self.connections} conn"
        if self.processes > 1:
            text += f" x{self.processes} proc"
        return text + (" (its default)" if (self.batch_size, self.connections, self.processes) == (10, 1, 1) else "")


PGQUEUER_SETTINGS = (
    PgQueuerSetting(10),
    PgQueuerSetting(100),
    PgQueuerSetting(100, connections=2),
    PgQueuerSetting(100, connections=4),
    PgQueuerSetting(50, connections=2, processes=2),
    PgQueuerSetting(100, processes=2),
)


def asyncpg_dsn(target: Scratch) -> str:
    return target.store_url.replace("postgresql+psycopg://", "postgresql://")


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (PgQueuer's own benchmark uses it), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


async def pgqueuer_queues(dsn: str, connections: int) -> tuple[list[Any], list[int], list[Any]]:
    import asyncpg
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver

    done = [0]
    queues, opened = [], []
    for _ in range(connections):
        opened.append(await asyncpg.connect(dsn))
        queue = PgQueuer(AsyncpgDriver(opened[-1]))

        @queue.entrypoint(HANDLER)
        async def noop_job(job: Any) -> None:
            done[0] += 1

        queues.append(queue)
    return queues, done, opened


async def pgqueuer_drain(queues: list[Any], batch_size: int) -> None:
    from pgqueuer import types

    await asyncio.gather(*(queue.run(batch_size=batch_size, mode=types.QueueExecutionMode.drain) for queue in queues))


async def close_all(connections: list[Any]) -> None:
    for connection in connections:
        await connection.close()


def pgqueuer_child(dsn: str, setting: PgQueuerSetting, *, ready: Any, start: Any) -> int:
    loop = new_loop()
    with quiet_logs():
        queues, done, opened = loop.run_until_complete(pgqueuer_queues(dsn, setting.connections))
        ready(None)
        start()
        loop.run_until_complete(pgqueuer_drain(queues, setting.batch_size))
        loop.run_until_complete(close_all(opened))
    loop.close()
    return done[0]


async def pgqueuer_enqueue(dsn: str, items: int) -> float:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    connection = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(connection))
        await queries.clear_queue()
        await queries.clear_queue_log()
        await queries.clear_statistics_log()
        payloads = [f'{{"n": {number}}}'.encode() for number in range(items)]
        began = time.perf_counter()
        await queries.enqueue([HANDLER] * items, payloads, [0] * items)
        return time.perf_counter() - began
    finally:
        await connection.close()


def pgqueuer_install(target: Scratch) -> None:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    async def install() -> None:
        connection = await asyncpg.connect(asyncpg_dsn(target))
        await Queries(AsyncpgDriver(connection)).install()
        await connection.close()

    asyncio.run(install())


def pgqueuer_runner(target: Scratch, setting: PgQueuerSetting, items: int) -> Runner:
    dsn = asyncpg_dsn(target)

    def run() -> tuple[float, float]:
        enqueue_s = asyncio.run(pgqueuer_enqueue(dsn, items))
        analyze_postgres(target.raw_target)
        if setting.processes == 1:
            loop = new_loop()
            with quiet_logs():
                queues, done, opened = loop.run_until_complete(pgqueuer_queues(dsn, setting.connections))
                began = time.perf_counter()
                loop.run_until_complete(pgqueuer_drain(queues, setting.batch_size))
                drain_s = time.perf_counter() - began
                loop.run_until_complete(close_all(opened))
            loop.close()
            calls = done[0]
        else:
            result = run_processes(pgqueuer_child, [(dsn, setting)] * setting.processes)
            drain_s, calls = result.elapsed, sum(result.results)
        check(f"PgQueuer {setting.name}", calls, items)
        return items / enqueue_s, items / drain_s

    return runner("PgQueuer", setting.name, run)


# -- Procrastinate --------------------------------------------------------------------------------------

PROCRASTINATE_CONCURRENCY = (1, 10)


def procrastinate_runner(target: Scratch, concurrency: int, items: int) -> Runner:
    import procrastinate

    def run() -> tuple[float, float]:
        done = [0]
        with quiet_logs():  # it warns about an App made in the main module: that is what a benchmark does
            app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=target.raw_target))

        @app.task(name=HANDLER, queue="bench")
        async def noop_job(n: int) -> None:
            done[0] += 1

        async def main() -> tuple[float, float]:
            async with app.open_async():
                await app.connector.execute_query_async(query="TRUNCATE procrastinate_jobs RESTART IDENTITY CASCADE")
                began = time.perf_counter()
                await noop_job.batch_defer_async(*records(items))
                enqueue_s = time.perf_counter() - began
                analyze_postgres(target.raw_target)
                began = time.perf_counter()
                await app.run_worker_async(queues=["bench"], wait=False, concurrency=concurrency, install_signal_handlers=False)
                return enqueue_s, time.perf_counter() - began

        with quiet_logs():
            enqueue_s, drain_s = asyncio.run(main())
        check(f"Procrastinate concurrency={concurrency}", done[0], items)
        return items / enqueue_s, items / drain_s

    return runner("Procrastinate", f"concurrency={concurrency}, {items:,} jobs", run)


def procrastinate_install(target: Scratch) -> None:
    import procrastinate

    with quiet_logs():
        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=target.raw_target))

    async def install() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(install())


# -- Huey -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HueySetting:
    fsync: bool | None
    workers: int
    worker_type: str = "thread"

    @property
    def name(self) -> str:
        storage = "default storage" if self.fsync is None else f"fsync={self.fsync}"
        kind = self.worker_type + ("es" if self.worker_type == "process" else "s") if self.workers > 1 else self.worker_type
        return f"{storage}, {self.workers} {kind}"

    def items(self, items: int, default_items: int) -> int:
        """Huey's default storage fsyncs every commit: it runs on fewer jobs."""
        return min(items, default_items) if self.fsync is None else items


HUEY_SETTINGS = (
    HueySetting(None, 1),
    HueySetting(None, 2),
    HueySetting(False, 1),
    HueySetting(False, 2),
    HueySetting(False, 2, "process"),
)


def huey_runner(target: Scratch, setting: HueySetting, items: int) -> Runner:
    import multiprocessing

    from huey import SqliteHuey

    def run() -> tuple[float, float]:
        path = str(Path(target.raw_target).parent / f"huey-{time.monotonic_ns()}.db")
        huey = SqliteHuey(name="bench", filename=path, fsync=setting.fsync)
        shared = multiprocessing.Value("i", 0)  # counted across forked worker processes too
        finished = threading.Event()

        def noop_task(n: int) -> None:
            with shared.get_lock():
                shared.value += 1
                if shared.value == items:
                    finished.set()

        task = huey.task(name=HANDLER)(noop_task)
        began = time.perf_counter()
        for number in range(items):
            task(number)
        enqueue_s = time.perf_counter() - began
        consumer = huey.create_consumer(
            workers=setting.workers, worker_type=setting.worker_type, periodic=False,
            initial_delay=0.01, max_delay=0.1, check_worker_health=False,
        )
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        with quiet_logs():
            began = time.perf_counter()
            consumer.start()
            if setting.worker_type == "thread":
                finished.wait(timeout=600)
            else:
                deadline = began + 600
                while shared.value < items and time.perf_counter() < deadline:
                    time.sleep(0.002)
            drain_s = time.perf_counter() - began
            consumer.stop(graceful=True)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        huey.storage.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(path + suffix).unlink()
        check(f"Huey {setting.name}", shared.value, items)
        return items / enqueue_s, items / drain_s

    name = setting.name if setting.fsync is not None else f"{setting.name}, {items:,} jobs"
    return runner("Huey", name, run)


# -- main -----------------------------------------------------------------------------------------------


def vardiya_cli_worker() -> bool:
    """Whether ``vardiya worker`` exists yet (if it does not, the in-process Worker is what runs)."""
    found = subprocess.run(
        [sys.executable, "-m", "vardiya", "worker", "--help"], capture_output=True, text=True, check=False
    )
    return found.returncode == 0


def interleave(groups: list[list[Runner]], runs: int) -> None:
    """Round by round, one run of every configuration, taking the systems in turn."""
    longest = max(len(group) for group in groups)
    for round_number in range(runs):
        for index in range(longest):
            for group in groups:
                if index < len(group):
                    group[index].once()
        print(f"  ... round {round_number + 1} of {runs} done", flush=True)


def end_to_end(each: Runner) -> Series:
    """Submit + drain of one configuration, run by run: N / (enqueue time + drain time)."""
    series = Series(each.drain.system, f"{each.drain.config}, submit + drain")
    series.rates = [1 / (1 / enqueue + 1 / drain) for enqueue, drain in zip(each.enqueue.rates, each.drain.rates, strict=True)]
    return series


def has_enqueue(each: Runner) -> bool:
    return bool(each.enqueue.rates) and all(rate == rate for rate in each.enqueue.rates)  # raw: NaN


def report(backend: str, items: int, groups: dict[str, list[Runner]], peer: str, goal: float) -> None:
    print(f"[{backend}] async no-op, {items:,} jobs per run: drain rate (the enqueue is not included)")
    for runners in groups.values():
        for each in runners:
            print(each.drain.line())
    print(f"[{backend}] enqueue rate (bulk submit / enqueue / defer, timed on its own)")
    for runners in groups.values():
        for each in runners:
            if has_enqueue(each):
                print(each.enqueue.line())
    print(f"[{backend}] end to end (enqueue time + drain time, run by run)")
    for system, runners in groups.items():
        if system != "raw":
            for each in runners:
                if has_enqueue(each):
                    print(end_to_end(each).line())
    vardiya = groups["vardiya"]
    top = max(vardiya, key=lambda each: each.drain.median)
    default = vardiya[0].drain
    raw = groups["raw"][0].drain
    print(f"  vardiya best ({top.drain.config}) / raw claim loop: {top.drain.median / raw.median:.2f}; "
          f"default / raw: {default.median / raw.median:.2f}")
    if peer in groups:
        reference = best([each.drain for each in groups[peer]])
        print(f"  best {peer}: {reference.config} ({reference.median:,.0f} jobs/s)")
        print(f"  vardiya default / best {peer}: {default.median / reference.median:.2f}")
        print(target_line(f"drain: vardiya best ({top.drain.config}) / best {peer}", top.drain.median / reference.median, goal))
        ours = best([each.enqueue for each in vardiya if has_enqueue(each)])
        theirs = best([each.enqueue for each in groups[peer] if has_enqueue(each)])
        print(target_line(f"bulk enqueue: vardiya ({ours.config}) / best {peer} ({theirs.config})",
                          ours.median / theirs.median, goal))
        ours = best([end_to_end(each) for each in vardiya if has_enqueue(each)])
        theirs = best([end_to_end(each) for each in groups[peer] if has_enqueue(each)])
        print(target_line(f"end to end: vardiya best ({ours.config}) / best {peer} ({theirs.config})",
                          ours.median / theirs.median, END_TO_END_TARGET))
    else:
        print(f"  target: vardiya / best {peer} ... not measured ({peer} is not installed here; run with {PEERS_VENV}/bin/python)")
    print(flush=True)


def bench(target: Scratch, args: Any) -> None:
    items = args.items
    groups: dict[str, list[Runner]] = {}
    closers: list[Callable[[], None]] = []
    raw, close = raw_runner(target, items)
    groups["raw"] = [raw]
    closers.append(close)
    groups["vardiya"] = [vardiya_runner(target, setting, items) for setting in VARDIYA_SETTINGS]
    if args.cli:
        groups["vardiya"].append(cli_runner(target, items))
    if target.backend == "postgresql":
        peer, goal = "PgQueuer", PG_TARGET
        if peer_available("pgqueuer") and peer_available("asyncpg"):
            pgqueuer_install(target)
            groups["PgQueuer"] = [pgqueuer_runner(target, setting, items) for setting in PGQUEUER_SETTINGS]
        if peer_available("procrastinate"):
            procrastinate_install(target)
            jobs = min(items, args.procrastinate_items)
            groups["Procrastinate"] = [procrastinate_runner(target, c, jobs) for c in PROCRASTINATE_CONCURRENCY]
    else:
        peer, goal = "Huey", SQLITE_TARGET
        if peer_available("huey"):
            groups["Huey"] = [
                huey_runner(target, setting, setting.items(items, args.huey_default_items)) for setting in HUEY_SETTINGS
            ]
    try:
        interleave(list(groups.values()), args.runs)
    finally:
        for close in closers:
            close()
    report(target.backend, items, groups, peer, goal)
    if args.single_items > 0:
        # The other rows, in the same run: single submit (rate, p50/p99) against each peer's single
        # enqueue, and the bulk calls (submit_many, the stream's append_many) against its best enqueue.
        import bench_enqueue  # it imports this module by name; loaded here, so no cycle at import time

        bench_enqueue.bench(target, argparse.Namespace(
            items=args.single_items, bulk_items=items, runs=args.runs, pgqueuer_installed="PgQueuer" in groups
        ))


def main() -> None:
    def extra(parser: Any) -> None:
        parser.add_argument(
            "--huey-default-items", type=int, default=2_000,
            help="jobs per run for Huey's default (fsync per commit) storage, which is slow (default 2,000)",
        )
        parser.add_argument(
            "--procrastinate-items", type=int, default=1_000,
            help="jobs per run for Procrastinate, which is slow here (default 1,000)",
        )
        parser.add_argument(
            "--single-items", type=int, default=2_000,
            help="single submits per run for bench_enqueue's rows (single, bulk, append_many; 0 leaves them out)",
        )

    args = parse_args("async no-op throughput: vardiya Worker vs PgQueuer, Procrastinate, Huey", default_items=20_000, extra=extra)
    header("bench_async", args, "async no-op jobs, drain rate")
    args.cli = vardiya_cli_worker()
    if args.cli:
        print("vardiya: Worker in this process / in spawned processes, and `vardiya worker` (one process, defaults)")
    else:
        print("vardiya: Worker in this process / in spawned processes (`vardiya worker` is not available here)")
    for backend in args.backends:
        with scratch(backend, args.pg_url) as target:
            bench(target, args)


if __name__ == "__main__":
    main()
