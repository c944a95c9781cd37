"""Building a pipeline graph and counting every task's blast radius, at 10,000 and 100,000 tasks.

The pipeline: 20 stages over P daily partitions (from 2020-01-01). Stage 0 reads nothing; every other
stage reads the previous one with ``[same(), offset(-1)]``, except stages 5, 10 and 15, which read it
with ``window(-3, 0)``. P = 500 gives 10,000 tasks, P = 5,000 gives 100,000. A second scenario adds
one unpartitioned ``report`` reading every partition of the last stage (``all_partitions()``): the
worst case for the bitsets, since every task then reaches the report at the far end of the order.

Per size, in a fresh process (so that ``ru_maxrss`` belongs to that size alone):

- time ``build_graph`` and ``impact_all`` (medians of ``--runs``);
- memory: the process's ``ru_maxrss`` before the first build (imports and declarations) and after
  one build + impact_all, then the peak of another build + impact_all under ``tracemalloc`` (both
  untimed passes of their own, since tracing slows Python down and adds memory of its own);
- the baseline, measured in the same process: the textbook bitset count, absolute bits over the
  graph's own (stage by stage) topological order. Its counts must equal ``impact_all``'s, and a sample
  of tasks is checked against a plain search, so the figures are of a correct computation.

The last lines give the growth from the smallest to the largest size and the exponent it implies
(time ~ tasks ** exponent): 1 is linear.

Run: ``.venv/bin/python benchmarks/bench_pipeline_graph.py [--partitions 500 5000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load_average

from vardiya.pipeline import (
    Daily,
    Pipeline,
    Stage,
    TaskGraph,
    all_partitions,
    build_graph,
    descendants,
    impact_all,
    offset,
    same,
    window,
)

STAGES = 20
WINDOW_STAGES = {5, 10, 15}


def noop() -> None:
    """A stage body; graph building never calls it."""


def synthetic(partitions: int, stages: int = STAGES, fan_in: bool = False) -> Pipeline:
    first = date(2020, 1, 1)
    days = Daily(start=first.isoformat(), end=(first + timedelta(days=partitions - 1)).isoformat())
    pipeline = Pipeline("bench")
    for number in range(stages):
        depends_on = {}
        if number:
            mappings = [window(-3, 0)] if number in WINDOW_STAGES else [same(), offset(-1)]
            depends_on = {f"s{number - 1}": mappings}
        pipeline.add(Stage(name=f"s{number}", fn=noop, partitions=days, depends_on=depends_on))
    if fan_in:
        pipeline.add(Stage(name="report", fn=noop, depends_on={f"s{stages - 1}": all_partitions()}))
    return pipeline


def textbook_counts(graph: TaskGraph) -> list[int]:
    """The baseline: bitsets over absolute positions of the graph's order, OR-ed in reverse order."""
    position = graph.positions
    reach = [0] * len(graph.names)
    unread = [len(upstream) for upstream in graph.predecessors]
    counts = [0] * len(graph.names)
    for task in reversed(graph.order_ids):
        bits = 0
        for after in graph.successors[task]:
            bits |= reach[after] | (1 << position[after])
            unread[after] -= 1
            if not unread[after]:
                reach[after] = 0
        counts[task] = bits.bit_count()
        if unread[task]:
            reach[task] = bits
    return counts


def measure(partitions: int, runs: int, fan_in: bool) -> dict[str, float]:
    """Every figure for one size (runs in its own process)."""
    pipeline = synthetic(partitions, fan_in=fan_in)
    rss_before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    graph = build_graph(pipeline)
    result = impact_all(graph)
    maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # before tracing adds its own
    del graph, result
    tracemalloc.start()
    graph = build_graph(pipeline)
    result = impact_all(graph)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del graph, result

    build_times, impact_times, baseline_times = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        graph = build_graph(pipeline)
        built = time.perf_counter()
        result = impact_all(graph)
        done = time.perf_counter()
        baseline = textbook_counts(graph)
        baseline_done = time.perf_counter()
        build_times.append(built - start)
        impact_times.append(done - built)
        baseline_times.append(baseline_done - done)
    if [result.tasks[name] for name in graph.names] != baseline:
        raise SystemExit(f"P={partitions}: impact_all and the textbook count disagree")
    for name in random.Random(partitions).sample(graph.names, 20):
        if result.tasks[name] != len(descendants(graph, name)):
            raise SystemExit(f"P={partitions}: impact_all is wrong for {name}")
    return {
        "partitions": partitions,
        "tasks": len(graph),
        "edges": graph.edge_count,
        "total": result.total,
        "build_s": statistics.median(build_times),
        "impact_s": statistics.median(impact_times),
        "baseline_s": statistics.median(baseline_times),
        "build_runs": build_times,
        "impact_runs": impact_times,
        "tracemalloc_peak_mib": peak / 2**20,
        "maxrss_mib": maxrss_kib / 2**10,
        "maxrss_before_mib": rss_before_kib / 2**10,
    }  # type: ignore[return-value]


def exponent(small: float, large: float, size_ratio: float) -> float:
    return math.log(large / small) / math.log(size_ratio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one size, in a child process
    parser.add_argument("--fan-in", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.runs, args.fan_in)))
        return
    python = sys.version.split()[0]
    print(f"{STAGES} stages x P daily partitions; medians of {args.runs} runs; Python {python}")
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {load_average()}", flush=True)
    for fan_in in (False, True):
        print("\nwith a fan-in report over the last stage (worst case)" if fan_in else "\nchain", flush=True)
        scenario(args.partitions, args.runs, fan_in)


def scenario(sizes: list[int], runs: int, fan_in: bool) -> None:
    """Every size of one scenario, each in a fresh process, then the growth between sizes."""
    figures = []
    for partitions in sizes:
        child = [sys.executable, __file__, "--one", str(partitions), "--runs", str(runs)]
        child += ["--fan-in"] if fan_in else []
        figure = json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout)
        figures.append(figure)
        print(
            f"P={partitions:>6,}: {figure['tasks']:>8,} tasks {figure['edges']:>8,} edges | "
            f"build {figure['build_s']:.3f} s, impact_all {figure['impact_s']:.3f} s "
            f"(total blast radius {figure['total']:,}) | textbook bitsets {figure['baseline_s']:.3f} s "
            f"(textbook/impact_all {figure['baseline_s'] / figure['impact_s']:.2f}) | tracemalloc peak "
            f"{figure['tracemalloc_peak_mib']:.1f} MiB, ru_maxrss {figure['maxrss_before_mib']:.1f} -> "
            f"{figure['maxrss_mib']:.1f} MiB",
            flush=True,
        )
        print(
            "          runs: build " + ", ".join(f"{value:.3f}" for value in figure["build_runs"])
            + "; impact_all " + ", ".join(f"{value:.3f}" for value in figure["impact_runs"])
        )
    if len(figures) < 2:
        return
    small, large = figures[0], figures[-1]
    size = large["tasks"] / small["tasks"]
    print(f"growth {small['tasks']:,} -> {large['tasks']:,} tasks (x{size:.0f}) ({load_average()}):")
    for key, what in (("build_s", "build_graph"), ("impact_s", "impact_all"), ("baseline_s", "textbook")):
        ratio = large[key] / small[key]
        print(f"  {what:<12} time x{ratio:6.1f}  -> ~ tasks^{exponent(small[key], large[key], size):.2f}")
    both = (large["build_s"] + large["impact_s"]) / (small["build_s"] + small["impact_s"])
    print(f"  build+impact time x{both:6.1f}  -> ~ tasks^{math.log(both) / math.log(size):.2f}")
    print(f"  tracemalloc peak x{large['tracemalloc_peak_mib'] / small['tracemalloc_peak_mib']:.1f}")
    grown = [figure["maxrss_mib"] - figure["maxrss_before_mib"] for figure in (small, large)]
    print(f"  ru_maxrss growth over the imports: {grown[0]:.1f} -> {grown[1]:.1f} MiB")


if __name__ == "__main__":
    main()
