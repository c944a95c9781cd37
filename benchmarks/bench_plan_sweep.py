"""The planner's batch-size sweep: the spec's 11 sizes over the 20,000-reading night, seconds and memory.

vardiya: ``sweep(workload, profile)`` with the example's workload (``validation-night.csv``: 19,551 ok,
436 transient, 13 poison) and profile (``profile.toml``: 250 ms a call, 400 ms a record, 3 attempts
60 s apart, ``retry_batch``, a 900 s limit), over the sizes 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000
and 2500: one replay per size, each the full discrete-event loop (arrivals, ``batch_ready`` cuts, a
``run_attempt`` per attempt on the virtual clock, ``end_of_attempt`` decisions, completion times,
cost). The workload and profile are read before the clock starts (reading them is timed on its own).

baseline, measured in the same process: the engine's bare attempt loop for the same sizes, the
``_simulate`` of tests/contract/test_invocation.py: the same scripted handler, consecutive slices of
the workload as batches, ``run_attempt`` until a batch is done or out of attempts, no clock per
attempt, no times, no queue. Its calls, processed records, dead letters and co-failed records must
equal the sweep's for every size, else the script exits 1. The ratio sweep / baseline is what the
planner's scheduling and bookkeeping cost on top of the engine itself.

Memory: ``ru_maxrss`` of the process (resource.getrusage) after the imports and after the sweeps, and
the peak of one more sweep under ``tracemalloc``.

Runs alternate baseline, sweep, baseline, sweep, ...; medians are printed with every run.
Target (printed, not enforced): the sweep in at most 10 s.

Run: ``.venv/bin/python benchmarks/bench_plan_sweep.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.dont_write_bytecode = True  # keep benchmarks/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load_average  # noqa: E402

from vardiya.clock import VirtualClock  # noqa: E402
from vardiya.invoke.execute import BatchRecord, run_attempt  # noqa: E402
from vardiya.plan.profile import Profile, load_profile  # noqa: E402
from vardiya.plan.replay import ORIGIN  # noqa: E402
from vardiya.plan.scripted import ScriptedHandler, handler_for  # noqa: E402
from vardiya.plan.sweep import Sweep, sweep  # noqa: E402
from vardiya.plan.workload import Workload, load_workload  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "meter_validation"
SIZES = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
TARGET_S = 10.0


def baseline(workload: Workload, profile: Profile) -> dict[int, tuple[int, int, int, int]]:
    """The bare engine loop per size: (calls, processed, dead letters, co-failed)."""
    fn = ScriptedHandler(workload, profile)
    clock = VirtualClock(ORIGIN)
    figures = {}
    for size in SIZES:
        handler = handler_for(fn, profile, model="stream", batch_size=size)
        records = [BatchRecord(offset=n + 1, key=None, record={"id": e.record}, arrived_ms=0) for n, e in enumerate(workload.records)]
        calls = processed = dead = co_failed = 0
        for start in range(0, len(records), size):
            batch = records[start : start + size]
            for attempt in range(1, profile.retry.max_attempts + 1):
                outcome = run_attempt(handler, batch, clock=clock)
                calls += len(outcome.calls)
                processed += outcome.processed
                if outcome.done:
                    break
                batch = outcome.kept
                if attempt == profile.retry.max_attempts:
                    dead += len(outcome.kept)
                    co_failed += outcome.co_failed
        figures[size] = (calls, processed, dead, co_failed)
    return figures


def counts(result: Sweep) -> dict[int, tuple[int, int, int, int]]:
    return {
        row.batch_size: (row.metrics.calls, row.metrics.processed, row.metrics.dead_letter, row.metrics.co_failed)
        for row in result.rows
        if row.batch_size is not None
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per side (default 3)")
    args = parser.parse_args()
    rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    began = time.perf_counter()
    workload = load_workload(EXAMPLE / "validation-night.csv")
    profile = load_profile(EXAMPLE / "profile.toml")
    read_s = time.perf_counter() - began
    print(f"bench_plan_sweep: {len(workload):,} records {workload.counts()}, sizes {', '.join(map(str, SIZES))}")
    print(f"load average before: {load_average()}; reading the workload and the profile: {read_s:.3f} s")
    base_times: list[float] = []
    sweep_times: list[float] = []
    result = None
    for run in range(1, args.runs + 1):
        began = time.perf_counter()
        expected = baseline(workload, profile)
        base_times.append(time.perf_counter() - began)
        began = time.perf_counter()
        result = sweep(workload, profile, sizes=SIZES)
        sweep_times.append(time.perf_counter() - began)
        print(f"run {run}: baseline {base_times[-1]:.2f} s, sweep {sweep_times[-1]:.2f} s")
        if counts(result) != expected:
            print(f"MISMATCH: the sweep's counts {counts(result)} differ from the engine loop's {expected}")
            return 1
    assert result is not None
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    sweep(workload, profile, sizes=SIZES)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    base, swept = statistics.median(base_times), statistics.median(sweep_times)
    print(f"cheapest {result.cheapest}, fastest {result.fastest}; counts equal the engine loop's for every size")
    print(f"median: baseline {base:.2f} s, sweep {swept:.2f} s, ratio sweep/baseline {swept / base:.2f}")
    print(
        f"memory: ru_maxrss {rss_imports / 1024:.0f} MB after the imports, {rss_after / 1024:.0f} MB after the sweeps; "
        f"one sweep's traced peak {traced_peak / 2**20:.1f} MB"
    )
    print(f"load average after: {load_average()}")
    print(f"target: sweep <= {TARGET_S:g} s ... {'met' if swept <= TARGET_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
