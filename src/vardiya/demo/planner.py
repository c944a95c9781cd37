"""Demo section: the planner replays the whole example night before anything runs for real.

The night's 20,000 readings and the spec's example profile (``vardiya.examples``) go through the
invocation engine's own code on a virtual clock: the three models side by side (the caller's wait
falls while completion grows), the stream's failure policies, and the batch-size sweep (a valley of
cost, the cheapest size that is not the fastest, the size too big for the time limit marked), with
the sweep's chart written to the demo's directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from ..clock import VirtualClock
from ..examples.meter_validation import NIGHT_CSV
from ..plan.compare import compare
from ..plan.profile import load_profile
from ..plan.replay import Prepared
from ..plan.report import print_comparison, print_sweep
from ..plan.sweep import sweep, write_sweep_chart
from ..plan.workload import load_workload
from ..store import Store

__all__ = ["PROFILE_TOML", "planner_section"]

#: The example profile of the spec, shipped with the package (examples/meter_validation/profile.toml).
PROFILE_TOML = NIGHT_CSV.parent / "profile.toml"


def planner_section(
    *, directory: Path, store: Store, clock: VirtualClock, console: Console
) -> tuple[str, dict[str, Any]]:
    """Compare the models and sweep the batch sizes on the example night; write the sweep's chart."""
    workload = load_workload(NIGHT_CSV)
    profile = load_profile(PROFILE_TOML)
    counts = workload.counts()
    console.print(
        f"\n[bold]5. The planner[/]: the whole night, {len(workload):,} readings ({counts['transient']} transient, "
        f"{counts['poison']} poison), replayed through the same engine on a virtual clock, before anything runs"
    )
    prepared = Prepared.of(workload, profile)
    comparison = compare(workload, profile, prepared=prepared)
    print_comparison(console, comparison, workload)
    swept = sweep(workload, profile, prepared=prepared)
    print_sweep(console, swept, workload)
    chart = write_sweep_chart(directory / "batch-sweep.svg", swept)
    console.print(f"the chart of cost against batch size: {chart.name}, in {directory}")
    figures = {
        "records": len(workload),
        "models": {row.model.value: row.to_json() for row in comparison.models},
        "policies": {row.policy.value: row.to_json() for row in comparison.policies if row.policy is not None},
        "sweep": swept.to_json(),
        "chart": str(chart),
    }
    return "planner", figures
