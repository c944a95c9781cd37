"""Partitioned pipelines: stages over partition sets, expanded into a graph of ``stage@partition`` tasks.

The pure part lives here: ``partitions`` (which keys a stage runs for), ``mapping`` (which upstream
partitions a downstream partition reads), ``stages`` (declarations), ``graph`` (expansion, validation,
topological order) and ``impact`` (blast radius, rerun sets, restarts). Nothing here touches a store.
"""

from __future__ import annotations

from .graph import TaskGraph, build_graph, task_name
from .impact import (
    AllImpact,
    Impact,
    Restart,
    blast_radius,
    descendant_counts,
    descendants,
    impact_all,
    rerun_set,
    restart_after_failure,
    task_impact,
)
from .mapping import (
    CustomMapping,
    MappingKind,
    PartitionMapping,
    all_partitions,
    custom,
    offset,
    same,
    window,
)
from .partitions import Daily, Monthly, PartitionKind, PartitionSet, Static, Unpartitioned
from .stages import Pipeline, Stage

__all__ = [
    "AllImpact",
    "CustomMapping",
    "Daily",
    "Impact",
    "MappingKind",
    "Monthly",
    "PartitionKind",
    "PartitionMapping",
    "PartitionSet",
    "Pipeline",
    "Restart",
    "Stage",
    "Static",
    "TaskGraph",
    "Unpartitioned",
    "all_partitions",
    "blast_radius",
    "build_graph",
    "custom",
    "descendant_counts",
    "descendants",
    "impact_all",
    "offset",
    "rerun_set",
    "restart_after_failure",
    "same",
    "task_impact",
    "task_name",
    "window",
]
