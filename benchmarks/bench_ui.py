"""The dashboard's server time per page and API endpoint on a big store: p50 / p95 over 20 requests.

The store holds 1,000,000 ledger rows (a slot job of 24 slots: 10 daily periods of 100,000 records,
1 in 1,000 failed, with its failure and traceback), 100,000 work items of an async handler (1 in 100
dead, each with its attempt) and a 10,000-task pipeline (10 stages x 1,000 partitions, 1 in 100 failed).
It is filled through the store's own bulk methods (``ledger.mark_rows``, ``items.enqueue_many``,
``failures.keep_ledger``) and, for the work items' states and the pipeline's task rows, SQLAlchemy
Core statements over the store's tables run here (not timed). Then every page and every ``/api/``
read is requested 20 times (after one warm-up request) in-process through Starlette's TestClient, so
the time is the server's: routing, the store's reads, the documents and the templates, no network.
The target is p95 <= 300 ms per endpoint (issue 17); each line says met or NOT met.

Run: ``.venv/bin/python benchmarks/bench_ui.py [--backend sqlite|postgresql|both] [--pg-url URL]
[--ledger 1000000] [--items 100000] [--partitions 1000] [--requests 20] [--runs 1]``. It exits 1 when an
endpoint answers anything but 200 (the store was not filled as the endpoints expect), never on the target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlalchemy as sa  # noqa: E402
from _common import DEFAULT_PG_URL, load_average, scratch  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from vardiya.app import load_app  # noqa: E402
from vardiya.pipeline import RunMode, RunOptions  # noqa: E402
from vardiya.store import LedgerStatus, Store, open_store  # noqa: E402
from vardiya.store.api import upgrade_store  # noqa: E402
from vardiya.store.failures import LedgerFailure  # noqa: E402
from vardiya.store.schema import attempts, pipeline_runs, pipeline_task_runs, pipeline_tasks, work_items  # noqa: E402
from vardiya.ui import Guard, create_app  # noqa: E402

TARGET_MS = 300.0
JOB = "bench"
SLOTS = 24
STAGES = 10
TOKEN = "bench-token-0123456789abcdef"
PERIOD_ZERO = datetime(2026, 11, 22, tzinfo=UTC)

APP = '''
from vardiya import IterableSource, SlotScheme
from vardiya.app import App
from vardiya.pipeline import Pipeline, Static, same

app = App("bench")

@app.handler("validate", model="async")
def validate(record, context):
    return record

@app.slot_job("bench", scheme=SlotScheme(slots={slots}), source=IterableSource(range({records})))
def bench(record):
    pass

big = Pipeline("big")
KEYS = [f"p{{number:04d}}" for number in range({partitions})]
previous = None
for index in range({stages}):
    def stage(context):
        return []
    stage.__name__ = f"s{{index}}"
    depends = {{previous: same()}} if previous else {{}}
    big.stage(name=f"s{{index}}", partitions=Static(keys=KEYS), depends_on=depends)(stage)
    previous = f"s{{index}}"

app.add_pipeline(big, root="{root}")
'''


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite", help="default: sqlite")
    parser.add_argument("--pg-url", default=os.environ.get("VARDIYA_BENCH_POSTGRES", DEFAULT_PG_URL))
    parser.add_argument("--ledger", type=int, default=1_000_000, help="ledger rows (10 periods; default 1,000,000)")
    parser.add_argument("--items", type=int, default=100_000, help="work items (default 100,000)")
    parser.add_argument("--partitions", type=int, default=1_000, help=f"partitions of each of {STAGES} stages (default 1,000)")
    parser.add_argument("--requests", type=int, default=20, help="timed requests per endpoint (default 20)")
    parser.add_argument("--runs", type=int, default=1, help="rounds of --requests per endpoint, pooled (default 1; run_all.sh passes it)")
    args = parser.parse_args()
    if min(args.ledger, args.items, args.partitions, args.requests, args.runs) <= 0 or args.ledger % 10:
        parser.error("the sizes must be positive, and --ledger a multiple of 10")
    args.backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    return args


def _period(index: int) -> str:
    return (PERIOD_ZERO + timedelta(days=index)).date().isoformat()


def fill_ledger(store: Store, rows: int) -> None:
    """10 daily periods of rows/10 records each, through ``ledger.mark_rows``; 1 in 1,000 failed."""
    per_period = rows // 10
    times = store.ledger.row_times()
    failures: list[LedgerFailure] = []
    for index in range(10):
        period, start = _period(index), PERIOD_ZERO + timedelta(days=index)
        batch: list[tuple[Any, ...]] = []
        for record in range(per_period):
            slot = record % SLOTS
            at = times(start + timedelta(hours=slot, milliseconds=record % 1000))
            failed = record % 1000 == 7
            status = LedgerStatus.FAILED if failed else LedgerStatus.DONE
            error = f"ValueError: record {record} does not add up" if failed else None
            batch.append((JOB, period, str(record), slot, status.value, 1, at, at, 3.5, 1, 64, error))
            if failed:
                failures.append(LedgerFailure(
                    job=JOB, period=period, record=str(record), failed_at=start + timedelta(hours=slot),
                    error=error or "", traceback=f"Traceback (most recent call last):\n  ...\n{error}\n",
                ))
        store.ledger.mark_rows(batch, chunk_size=20_000)
    store.failures.keep_ledger(failures)
    store.ledger.refresh_statistics()


def fill_items(store: Store, count: int) -> None:
    """``count`` succeeded call items of the handler; 1 in 100 dead with its failed attempt."""
    store.items.enqueue_many("call:validate", ((f"reading-{n}", {"id": n}) for n in range(count)), chunk_size=10_000)
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    with store.transaction() as connection:
        w = work_items.c
        connection.execute(sa.update(work_items).values(state="succeeded", attempts=1))
        connection.execute(
            sa.update(work_items).where(w.id % 100 == 0).values(state="dead", last_error="ValueError: poison", attempts=3)
        )
        dead = [row.id for row in connection.execute(sa.select(w.id).where(w.state == "dead"))]
        connection.execute(sa.insert(attempts), [
            {"item_id": item, "attempt": 3, "started_at": now, "ended_at": now, "outcome": "failed",
             "error": "ValueError: poison", "owner": "bench", "traceback": "Traceback ...\nValueError: poison\n"}
            for item in dead
        ])


def fill_pipeline(store: Store, partitions: int, root: Path) -> None:
    """One run of the 10-stage pipeline: every task succeeded but 1 in 100 failed (its attempt too); its
    options are a real run's, so the resume preview plans from them."""
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    options = RunOptions(mode=RunMode.RUN, root=str(root)).to_json()
    with store.transaction() as connection:
        run_id = connection.execute(
            sa.insert(pipeline_runs).values(pipeline="big", state="failed", started_at=now, finished_at=now, options=options)
            .returning(pipeline_runs.c.id)
        ).scalar_one()
        tasks, runs = [], []
        for stage in range(STAGES):
            for number in range(partitions):
                task = f"s{stage}@p{number:04d}"
                failed = number % 100 == 42
                state = "failed" if failed else "succeeded"
                tasks.append({
                    "pipeline": "big", "task": task, "state": state, "attempts": 1, "run_id": run_id,
                    "started_at": now, "finished_at": now, "error": "ValueError: bad partition" if failed else None,
                    "rows": None if failed else 100, "materialized_at": None if failed else now,
                    "materialized_run_id": None if failed else run_id,
                })
                runs.append({
                    "pipeline": "big", "run_id": run_id, "task": task, "attempt": 1, "state": state,
                    "started_at": now, "finished_at": now, "rows": None if failed else 100,
                    "error": "ValueError: bad partition" if failed else None,
                    "traceback": "Traceback ...\nValueError: bad partition\n" if failed else None,
                })
        connection.execute(sa.insert(pipeline_tasks), tasks)
        connection.execute(sa.insert(pipeline_task_runs), runs)


def endpoints(dead_letter: int, partitions: int) -> Iterator[str]:
    period, task = _period(5), f"s5@p{partitions // 2:04d}"
    yield from (
        "/", "/fragments/overview", "/handlers", "/errors", "/controls", f"/dead-letters/{dead_letter}",
        f"/slots?job={JOB}&period={period}", f"/slots/{JOB}/ticks/{period}/7", f"/slots/{JOB}/balance",
        "/pipelines", "/pipelines/big", f"/pipelines/big/tasks/{task}", f"/pipelines/big/rerun?task={task}",
        "/pipelines/big/resume",
        "/api/status", "/api/errors", "/api/dlq", f"/api/dlq/{dead_letter}", "/api/handlers",
        "/api/handlers/validate/metrics", "/api/controls",
        f"/api/slots/{JOB}/report?period={period}", f"/api/slots/{JOB}/balance",
        f"/api/slots/{JOB}/ticks/{period}/7", f"/api/slots/{JOB}/backfill-preview?period={period}",
        "/api/pipelines/big/status", f"/api/pipelines/big/impact?task={task}", f"/api/pipelines/big/tasks/{task}",
        "/api/pipelines/big/resume-preview",
    )


def run(backend: str, args: argparse.Namespace) -> list[tuple[str, float, float]]:
    with scratch(backend, args.pg_url) as place:
        directory = Path(place.raw_target).parent if backend == "sqlite" else Path.cwd()
        app_file = directory / "bench_ui_app.py" if backend == "sqlite" else Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_ui_app_{os.getpid()}.py"
        app_file.write_text(APP.format(
            slots=SLOTS, records=args.ledger // 10, partitions=args.partitions, stages=STAGES, root=app_file.parent / "out"))
        try:
            app = load_app(f"{app_file}:app")
            if backend == "postgresql":
                upgrade_store(place.store_url)
            with open_store(place.store_url, create=True) as store:
                started = time.perf_counter()
                fill_ledger(store, args.ledger)
                filled = time.perf_counter()
                fill_items(store, args.items)
                items = time.perf_counter()
                fill_pipeline(store, args.partitions, app_file.parent / "out")
                done = time.perf_counter()
                print(f"[{backend}] filled: {args.ledger:,} ledger rows in {filled - started:.1f} s, {args.items:,} work items "
                      f"in {items - filled:.1f} s, {STAGES * args.partitions:,} pipeline tasks in {done - items:.1f} s")
                guard = Guard.for_server(host="127.0.0.1", environment_token=TOKEN)
                client = TestClient(create_app(store, app, guard), base_url="http://127.0.0.1:8765")
                dead = client.get("/api/dlq").json()["dead_letters"][0]["id"]
                results = []
                for path in endpoints(dead, args.partitions):
                    answer = client.get(path)
                    if answer.status_code != 200:
                        raise SystemExit(f"[{backend}] {path} answered {answer.status_code}: {answer.text[:300]}")
                    times = []
                    for _ in range(args.requests * args.runs):
                        begun = time.perf_counter()
                        client.get(path)
                        times.append((time.perf_counter() - begun) * 1000)
                    times.sort()
                    p50, p95 = statistics.median(times), times[max(0, -(-len(times) * 95 // 100) - 1)]
                    results.append((path, p50, p95))
                    verdict = "met" if p95 <= TARGET_MS else "NOT met"
                    print(f"[{backend}] {path:<60} p50 {p50:8.1f} ms  p95 {p95:8.1f} ms  {verdict}", flush=True)
                return results
        finally:
            app_file.unlink(missing_ok=True)


def main() -> None:
    args = parse_args()
    print(f"bench_ui: {args.ledger:,} ledger rows, {args.items:,} work items, {STAGES * args.partitions:,} tasks; "
          f"{args.requests} requests per endpoint; load average {load_average()}")
    for backend in args.backends:
        results = run(backend, args)
        slow = [path for path, _p50, p95 in results if p95 > TARGET_MS]
        print(f"[{backend}] target: p95 <= {TARGET_MS:.0f} ms on every endpoint: "
              + ("met" if not slow else f"NOT met ({len(slow)} of {len(results)}: {', '.join(slow)})"))


if __name__ == "__main__":
    main()
