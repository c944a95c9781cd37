"""What every benchmark script shares: arguments, scratch databases, timing and the printed result.

Each benchmark compares vardiya with a raw driver loop doing the same work, measured in the same process
in the same run (machines are noisy, so only the ratio vardiya/raw is meaningful across machines). Runs
alternate raw, vardiya, raw, vardiya, ... and the median of each side is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BACKENDS = ("sqlite", "postgresql")
TARGET_RATIO = 0.5


def parse_args(description: str, default_rows: int, default_runs: int = 3) -> argparse.Namespace:
    """The command line every benchmark takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="both", help="default: both")
    parser.add_argument("--rows", type=int, default=default_rows, help=f"rows per run (default {default_rows:,})")
    parser.add_argument("--runs", type=int, default=default_runs, help=f"runs per side (default {default_runs})")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("VARDIYA_BENCH_POSTGRES", DEFAULT_PG_URL),
        help="a PostgreSQL server to create the scratch database on "
        f"(default $VARDIYA_BENCH_POSTGRES or {DEFAULT_PG_URL})",
    )
    args = parser.parse_args()
    if args.rows <= 0 or args.runs <= 0:
        parser.error("--rows and --runs must be positive")
    args.backends = BACKENDS if args.backend == "both" else (args.backend,)
    return args


@dataclass(frozen=True, kw_only=True)
class Scratch:
    """A scratch database: the URL vardiya opens, and what the raw driver connects to."""

    backend: str
    store_url: str
    #: SQLite: the file for the raw table (a separate file, same directory); PostgreSQL: a conninfo URL.
    raw_target: str


@contextlib.contextmanager
def scratch_sqlite() -> Iterator[Scratch]:
    """Two fresh SQLite files in a temporary directory (one for vardiya, one for the raw loop)."""
    directory = Path(tempfile.mkdtemp(prefix="vardiya-bench-"))
    try:
        yield Scratch(
            backend="sqlite",
            store_url=f"sqlite:///{directory / 'vardiya.db'}",
            raw_target=str(directory / "raw.db"),
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def scratch_postgres(server_url: str) -> Iterator[Scratch]:
    """A fresh PostgreSQL database on the server, dropped at the end (vardiya and raw tables share it)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"vardiya_bench_{uuid.uuid4().hex[:10]}"
    server = server_url.replace("postgresql+psycopg://", "postgresql://")
    try:
        admin = psycopg.connect(server, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        raise SystemExit(f"PostgreSQL at {server} is unreachable ({error}); give --pg-url or --backend sqlite") from None
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = conninfo_to_dict(server)
    params["dbname"] = name
    conninfo = make_conninfo(**params)
    store_url = _postgres_url(server, name)
    try:
        yield Scratch(backend="postgresql", store_url=store_url, raw_target=conninfo)
    finally:
        with psycopg.connect(server, autocommit=True, connect_timeout=5) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _postgres_url(server: str, database: str) -> str:
    import sqlalchemy as sa

    return sa.make_url(server).set(database=database).render_as_string(hide_password=False)


@contextlib.contextmanager
def scratch(backend: str, pg_url: str) -> Iterator[Scratch]:
    """A scratch database of the backend."""
    if backend == "sqlite":
        with scratch_sqlite() as target:
            yield target
    else:
        with scratch_postgres(pg_url) as target:
            yield target


def timed(run: Callable[[], int]) -> float:
    """Rows per second of one run; ``run`` returns how many rows it handled."""
    start = time.perf_counter()
    count = run()
    elapsed = time.perf_counter() - start
    return count / elapsed


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """The medians of both sides of one benchmark on one backend."""

    backend: str
    what: str
    unit: str
    raw: list[float]
    vardiya: list[float]
    #: The ratio an issue asks for; None where it sets none (the ratio is then only for scale).
    target: float | None = TARGET_RATIO

    @property
    def raw_median(self) -> float:
        return statistics.median(self.raw)

    @property
    def vardiya_median(self) -> float:
        return statistics.median(self.vardiya)

    @property
    def ratio(self) -> float:
        return self.vardiya_median / self.raw_median

    def lines(self) -> list[str]:
        if self.target is None:
            verdict = "no target set (for scale)"
        else:
            verdict = f"target: >= {self.target} ... {'met' if self.ratio >= self.target else 'NOT met'}"
        runs = len(self.raw)
        return [
            f"[{self.backend}] {self.what}",
            f"  raw     : {self.raw_median:>12,.0f} {self.unit}  (median of {runs}: "
            + ", ".join(f"{rate:,.0f}" for rate in self.raw)
            + ")",
            f"  vardiya : {self.vardiya_median:>12,.0f} {self.unit}  (median of {runs}: "
            + ", ".join(f"{rate:,.0f}" for rate in self.vardiya)
            + ")",
            f"  ratio vardiya/raw: {self.ratio:.3f}   {verdict}   ({load_average()})",
        ]


def compare(
    *,
    backend: str,
    what: str,
    unit: str,
    runs: int,
    raw: Callable[[], float],
    vardiya: Callable[[], float],
    target: float | None = TARGET_RATIO,
) -> Comparison:
    """Alternate raw and vardiya runs (each callable prepares its own run and returns a rate)."""
    raw_rates: list[float] = []
    vardiya_rates: list[float] = []
    for _ in range(runs):
        raw_rates.append(raw())
        vardiya_rates.append(vardiya())
    result = Comparison(backend=backend, what=what, unit=unit, raw=raw_rates, vardiya=vardiya_rates, target=target)
    for line in result.lines():
        print(line, flush=True)
    return result


def header(title: str, args: argparse.Namespace) -> None:
    """What is being measured, on what."""
    import sqlite3

    import sqlalchemy

    versions = f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, SQLAlchemy {sqlalchemy.__version__}"
    try:
        import psycopg

        versions += f", psycopg {psycopg.__version__} ({psycopg.pq.__impl__})"
    except ImportError:
        pass
    print(f"{title}: {args.rows:,} rows per run, medians of {args.runs} runs; {versions}; {os.cpu_count()} CPUs")
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {load_average()}", flush=True)


def load_average() -> str:
    """The machine's load, printed with the results: other work on a 2-core machine skews the rates."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"
