"""The planner: a workload replayed through the real invocation engine on a virtual clock.

``workload`` reads what the records do (a CSV, or a handler's history in the store), ``profile`` what
calls, records, retries and dedup cost (TOML). ``replay`` runs one model through the engine's own
attempt, retry, batching and dedup code (``scripted``: the handler it runs; ``gate``: the dedup keys
in memory); ``compare``, ``sweep`` and ``dedup`` are the plans a user chooses by: the models side by
side, the batch size, and the dedup window against the redrive delay. ``report`` prints them.
"""

from __future__ import annotations

from .compare import Comparison, compare
from .dedup import DedupPlan, plan_dedup
from .profile import DedupCosts, Profile, load_profile, parse_profile
from .replay import PlanRow, Prepared, Replay, replay
from .sweep import Sweep, recommend, sweep, sweep_chart_svg, write_sweep_chart
from .workload import Outcome, Workload, WorkloadRecord, from_store, load_workload, parse_workload

__all__ = [
    "Comparison",
    "DedupCosts",
    "DedupPlan",
    "Outcome",
    "PlanRow",
    "Prepared",
    "Profile",
    "Replay",
    "Sweep",
    "Workload",
    "WorkloadRecord",
    "compare",
    "from_store",
    "load_profile",
    "load_workload",
    "parse_profile",
    "parse_workload",
    "plan_dedup",
    "recommend",
    "replay",
    "sweep",
    "sweep_chart_svg",
    "write_sweep_chart",
]
