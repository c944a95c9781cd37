"""Per-task dispatch overhead of the pipeline engine on SQLite, against a plain Python loop.

A no-op pipeline of 10 stages x 1,000 daily partitions (10,000 tasks, each stage reading the one before
with ``same()``): ``run_pipeline`` with a fresh SQLite store, checkpoints and atomic outputs included,
against a loop that calls the same stage functions in the same topological order. The figure is the
difference per task, in milliseconds (target: at most 1 ms). For scale, Prefect's own benchmark measures
about 14 ms per task call, and Airflow takes seconds between dependent tasks.

    .venv/bin/python benchmarks/bench_pipeline_dispatch.py [--stages 10] [--partitions 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from vardiya import open_store
from vardiya.pipeline import Daily, Pipeline, build_graph, run_pipeline, same


def noop(context):  # type: ignore[no-untyped-def]
    """A stage that does nothing and produces no rows."""
    return None


def make_pipeline(stages: int, partitions: int) -> Pipeline:
    first = date(2026, 1, 1)
    days = Daily(start=first.isoformat(), end=(first + timedelta(days=partitions - 1)).isoformat())
    pipeline = Pipeline("dispatch")
    previous = None
    for number in range(stages):
        depends = {previous: same()} if previous else {}
        pipeline.stage(name=f"s{number}", partitions=days, depends_on=depends)(noop)
        previous = f"s{number}"
    return pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    pipeline = make_pipeline(args.stages, args.partitions)
    graph = build_graph(pipeline)
    tasks = len(graph.order)
    print(f"bench_pipeline_dispatch: {tasks:,} no-op tasks ({args.stages} stages x {args.partitions} days), SQLite, medians of {args.runs}")
    plain, engine = [], []
    for _ in range(args.runs):
        started = time.perf_counter()
        for _task in graph.order:  # the same functions, in the same topological order
            noop(None)
        plain.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory() as directory:
            store = open_store(f"sqlite:///{Path(directory) / 'vardiya.db'}")
            started = time.perf_counter()
            result = run_pipeline(store, pipeline, root=Path(directory) / "out")
            engine.append(time.perf_counter() - started)
            store.close()
            assert len(result.succeeded) == tasks, result.to_json()
    plain_s, engine_s = statistics.median(plain), statistics.median(engine)
    per_task_ms = (engine_s - plain_s) / tasks * 1000
    print(f"  plain loop   : {plain_s * 1000:10.1f} ms  ({plain_s / tasks * 1e6:.2f} us per task)")
    print(f"  run_pipeline : {engine_s * 1000:10.1f} ms  ({engine_s / tasks * 1000:.3f} ms per task)")
    verdict = "met" if per_task_ms <= 1.0 else "NOT met"
    print(f"  dispatch overhead: {per_task_ms:.3f} ms per task   target: <= 1 ms ... {verdict}")


if __name__ == "__main__":
    main()
