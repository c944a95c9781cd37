"""Per-task dispatch overhead of the pipeline engine on SQLite, against a plain Python loop.

A no-op pipeline of 10 stages x 1,000 daily partitions (10,000 tasks, each stage reading the one before
with ``same()``): ``run_pipeline`` with a fresh SQLite store file, task states, attempt history and
checkpoints included, against a loop that calls the same stage functions in the same topological order.
The figure is the difference per task, in milliseconds (target: at most 1 ms). For scale, Prefect's own
benchmark measures about 14 ms per task call, and Airflow takes seconds between dependent tasks.

The no-op stage returns None, which is no output: the engine writes no file for it (pipeline/io.py). So
that the cost of outputs stays in view, a second variant (no target) runs the same pipeline with every
stage returning one row, each task publishing its output file durably (temp, fsync, rename, fsync of
the directory), over 200 days by default (the figure is per task; fsyncs make it slow on a busy disk);
``--output-runs 0`` leaves it out.

    .venv/bin/python benchmarks/bench_pipeline_dispatch.py [--stages 10] [--partitions 1000] [--runs 3]
        [--output-runs 1] [--output-partitions 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from vardiya import open_store
from vardiya.pipeline import Daily, Pipeline, build_graph, run_pipeline, same


def noop(context):  # type: ignore[no-untyped-def]
    """A stage that does nothing and produces no output."""
    return


ROW = [{"n": 1}]


def one_row(context):  # type: ignore[no-untyped-def]
    """A stage that does nothing but return one row, which the engine publishes as the task's output."""
    return ROW


def make_pipeline(stages: int, partitions: int, function: Callable[[Any], Any] = noop) -> Pipeline:
    first = date(2026, 1, 1)
    days = Daily(start=first.isoformat(), end=(first + timedelta(days=partitions - 1)).isoformat())
    pipeline = Pipeline("dispatch")
    previous = None
    for number in range(stages):
        depends = {previous: same()} if previous else {}
        pipeline.stage(name=f"s{number}", partitions=days, depends_on=depends)(function)
        previous = f"s{number}"
    return pipeline


def measure(pipeline: Pipeline, function: Callable[[Any], Any], runs: int) -> tuple[list[float], list[float]]:
    """Seconds per run of the plain loop and of ``run_pipeline``, alternating, each on a fresh store."""
    graph = build_graph(pipeline)
    tasks = len(graph.order)
    plain, engine = [], []
    for _ in range(runs):
        started = time.perf_counter()
        for _task in graph.order:  # the same functions, in the same topological order
            function(None)
        plain.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory() as directory:
            store = open_store(f"sqlite:///{Path(directory) / 'vardiya.db'}")
            started = time.perf_counter()
            result = run_pipeline(store, pipeline, root=Path(directory) / "out")
            engine.append(time.perf_counter() - started)
            store.close()
            if len(result.succeeded) != tasks:
                raise SystemExit(f"the run did not do its work: {result.to_json()}")
    return plain, engine


def report(label: str, tasks: int, plain: list[float], engine: list[float], *, target: bool) -> None:
    plain_s, engine_s = statistics.median(plain), statistics.median(engine)
    per_task_ms = (engine_s - plain_s) / tasks * 1000
    runs = ", ".join(f"{(run - base) / tasks * 1000:.3f}" for base, run in zip(plain, engine, strict=True))
    print(f"  {label}")
    print(f"    plain loop   : {plain_s * 1000:10.1f} ms  ({plain_s / tasks * 1e6:.2f} us per task)")
    print(f"    run_pipeline : {engine_s * 1000:10.1f} ms  ({engine_s / tasks * 1000:.3f} ms per task)")
    print(f"    overhead per run (ms per task): {runs}")
    line = f"    dispatch overhead: {per_task_ms:.3f} ms per task"
    if target:
        line += f"   target: <= 1 ms ... {'met' if per_task_ms <= 1.0 else 'NOT met'}"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output-runs", type=int, default=1, help="runs of the one-row variant (0: skip it)")
    parser.add_argument("--output-partitions", type=int, default=200, help="days of the one-row variant")
    args = parser.parse_args()
    pipeline = make_pipeline(args.stages, args.partitions)
    tasks = len(build_graph(pipeline).order)
    print(
        f"bench_pipeline_dispatch: {tasks:,} tasks ({args.stages} stages x {args.partitions} days), SQLite, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    plain, engine = measure(pipeline, noop, args.runs)
    report(f"no-op tasks (None, no output file), medians of {args.runs}", tasks, plain, engine, target=True)
    if args.output_runs > 0:
        with_rows = make_pipeline(args.stages, args.output_partitions, one_row)
        plain, engine = measure(with_rows, one_row, args.output_runs)
        report(
            f"one-row tasks (a durable output file each), {args.stages * args.output_partitions:,} tasks, "
            f"medians of {args.output_runs}, no target",
            args.stages * args.output_partitions, plain, engine, target=False,
        )
    print(f"  load average at the end: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
