"""What the invocation benchmarks share (bench_async, bench_stream, bench_latency).

Their command line (``--items`` instead of ``--rows``), opening a vardiya store on a scratch database
the way an application would, emptying it between runs, starting worker processes that wait at a
starting line (so process start-up is never timed), and printing medians.

The peers of ``bench_async`` (PgQueuer, Procrastinate, Huey) live in ``benchmarks/.venv-peers``, never
in the project's own environment; ``peer_available`` tells a script whether they can be imported.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import multiprocessing
import os
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import BACKENDS, DEFAULT_PG_URL, Scratch, load_average

PEERS_VENV = "benchmarks/.venv-peers"

#: Every vardiya table a benchmark run fills (emptied between runs on PostgreSQL).
VARDIYA_TABLES = (
    "invocation_calls", "work_item_attempts", "dedup_keys", "stream_lanes", "stream_records", "work_items",
    "work_item_keys",
)


def parse_args(
    description: str,
    *,
    default_items: int,
    default_runs: int = 3,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """``--backend``, ``--items``, ``--runs``, ``--pg-url`` (and a script's own options)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="both", help="default: both")
    parser.add_argument("--items", type=int, default=default_items, help=f"items per run (default {default_items:,})")
    parser.add_argument("--runs", type=int, default=default_runs, help=f"runs per configuration (default {default_runs})")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("VARDIYA_BENCH_POSTGRES", DEFAULT_PG_URL),
        help="a PostgreSQL server to create the scratch database on "
        f"(default $VARDIYA_BENCH_POSTGRES or {DEFAULT_PG_URL})",
    )
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    if args.items <= 0 or args.runs <= 0:
        parser.error("--items and --runs must be positive")
    args.backends = BACKENDS if args.backend == "both" else (args.backend,)
    return args


def header(title: str, args: argparse.Namespace, what: str) -> None:
    """What is measured, on what software, and how loaded the machine is."""
    import sqlite3

    import sqlalchemy

    versions = f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, SQLAlchemy {sqlalchemy.__version__}"
    pure_python = False
    with contextlib.suppress(ImportError):
        import psycopg

        versions += f", psycopg {psycopg.__version__} ({psycopg.pq.__impl__})"
        pure_python = psycopg.pq.__impl__ == "python"
    print(f"{title}: {what}; {args.items:,} items per run, medians of {args.runs} runs")
    print(f"{versions}; {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {load_average()}", flush=True)
    if pure_python and "postgresql" in args.backends:
        # vardiya installs psycopg[binary] (its `postgres` extra); without it every PostgreSQL figure of
        # vardiya's is of psycopg's pure-Python layer, while PgQueuer runs on asyncpg.
        print(
            "  WARNING: psycopg runs its pure-Python implementation here, so vardiya's PostgreSQL "
            f"figures are understated; install vardiya with its extra: {PEERS_VENV}/bin/pip install "
            "-e '.[postgres]'",
            flush=True,
        )


def peer_available(module: str) -> bool:
    """Whether a peer queue can be imported here (they are installed in benchmarks/.venv-peers only)."""
    return importlib.util.find_spec(module) is not None


# -- vardiya stores -------------------------------------------------------------------------------------


def sqlite_run_url(target: Scratch) -> str:
    """A new SQLite store file in the scratch directory: every SQLite run starts from an empty file."""
    directory = Path(target.raw_target).parent
    return f"sqlite:///{directory / f'vardiya-{uuid.uuid4().hex[:8]}.db'}"


def open_vardiya(url: str) -> Any:
    """Open a store as an application does: SQLite migrates itself; PostgreSQL is upgraded first."""
    from vardiya.store.api import open_store, upgrade_store

    if url.startswith("sqlite"):
        return open_store(url, migrate=True)
    upgrade_store(url)
    return open_store(url)


def empty_postgres(store: Any) -> None:
    """Empty every table a run fills (not timed)."""
    with store.transaction() as connection:
        connection.exec_driver_sql(f"TRUNCATE {', '.join(VARDIYA_TABLES)} RESTART IDENTITY CASCADE")


def analyze_postgres(conninfo: str, tables: Sequence[str] = ()) -> None:
    """ANALYZE after the enqueue (not timed), for every system alike: autovacuum is off on the
    benchmark server, and a planner that believes a 20,000-row queue is empty sorts it on every claim."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as connection:
        if tables:
            for table in tables:
                connection.execute(f"ANALYZE {table}")
        else:
            connection.execute("ANALYZE")


def remove_sqlite(url: str) -> None:
    """Delete a run's SQLite store with its WAL files."""
    path = url.removeprefix("sqlite:///")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


# -- worker processes at a starting line ---------------------------------------------------------------


@dataclass
class ProcessResult:
    """What each child reported, and the time from the start signal to the last child's end."""

    elapsed: float
    results: list[Any]


def _child(
    target: Callable[..., Any], arguments: tuple[Any, ...], ready: Any, start: Any, results: Any
) -> None:
    try:
        prepared = target(*arguments, ready=ready.put, start=start.wait)
        results.put(("ok", time.perf_counter(), prepared))
    except BaseException:  # noqa: BLE001 - the parent reports it and fails the run
        results.put(("error", time.perf_counter(), traceback.format_exc()))


def run_processes(target: Callable[..., Any], arguments: Sequence[tuple[Any, ...]], *, timeout: float = 600) -> ProcessResult:
    """Run ``target(*args, ready=..., start=...)`` in one spawned process per ``arguments`` entry.

    Each child prepares (connects, builds its worker), calls ``ready(None)``, then ``start()`` blocks
    until every child is ready; the clock runs from the start signal to the last child's return.
    ``perf_counter`` is CLOCK_MONOTONIC on Linux, one clock for every process.
    """
    context = multiprocessing.get_context("spawn")
    ready, results, start = context.Queue(), context.Queue(), context.Event()
    children = [
        context.Process(target=_child, args=(target, args, ready, start, results), daemon=True) for args in arguments
    ]
    for child in children:
        child.start()
    try:
        for _ in children:
            ready.get(timeout=timeout)
        began = time.perf_counter()
        start.set()
        reported = [results.get(timeout=timeout) for _ in children]
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    errors = [text for status, _, text in reported if status == "error"]
    if errors:
        raise SystemExit("a benchmark process failed:\n" + errors[0])
    return ProcessResult(elapsed=max(end for _, end, _ in reported) - began, results=[value for _, _, value in reported])


# -- results --------------------------------------------------------------------------------------------


@dataclass
class Series:
    """The rates of one configuration over the runs."""

    system: str
    config: str
    unit: str = "items/s"
    rates: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    def line(self, width: int = 44) -> str:
        runs = ", ".join(f"{rate:,.0f}" for rate in self.rates)
        label = f"{self.system} {self.config}"
        return f"  {label:<{width}} {self.median:>10,.0f} {self.unit}  (runs: {runs})"


def best(series: Sequence[Series]) -> Series:
    """The configuration with the highest median."""
    return max(series, key=lambda s: s.median)


def target_line(what: str, ratio: float, goal: float) -> str:
    met = "met" if ratio >= goal else "NOT met"
    return f"  target: {what} >= {goal:g}x ... {met} (ratio {ratio:.2f})   ({load_average()})"


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """Peers log every job at INFO on some settings; a benchmark prints only its figures."""
    import logging

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)
