"""Partitioned pipelines: stages over partition sets, expanded into a graph of ``stage@partition`` tasks.

The pure part: ``partitions`` (which keys a stage runs for), ``mapping`` (which upstream partitions a
downstream partition reads), ``stages`` (declarations), ``graph`` (expansion, validation, topological
order) and ``impact`` (blast radius, rerun sets, restarts); none of these touches a store or a file.
At the edges: ``io`` (atomic outputs, the lineage of reads), ``state`` (the pipeline tables of the
store, ``status``) and ``run`` (planning, running, checkpoints; ``resume``, ``rerun``, ``backfill``).
"""

from __future__ import annotations

from ..states import RunState, TaskState
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
from .io import Output, Read, TaskContext, UndeclaredReadWarning, task_output_path
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
from .options import RunOptions
from .partitions import Daily, Monthly, PartitionKind, PartitionSet, Static, Unpartitioned
from .run import RunMode, RunPreview, RunResult, backfill, rerun, resume, resume_preview, run_pipeline
from .stages import Pipeline, Stage
from .state import PipelineState, PipelineStatus, RunRecord, TaskAttempt, TaskRead, TaskRecord, status

__all__ = [
    "AllImpact",
    "CustomMapping",
    "Daily",
    "Impact",
    "MappingKind",
    "Monthly",
    "Output",
    "PartitionKind",
    "PartitionMapping",
    "PartitionSet",
    "Pipeline",
    "PipelineState",
    "PipelineStatus",
    "Read",
    "Restart",
    "RunMode",
    "RunOptions",
    "RunPreview",
    "RunRecord",
    "RunResult",
    "RunState",
    "Stage",
    "Static",
    "TaskAttempt",
    "TaskContext",
    "TaskGraph",
    "TaskRead",
    "TaskRecord",
    "TaskState",
    "UndeclaredReadWarning",
    "Unpartitioned",
    "all_partitions",
    "backfill",
    "blast_radius",
    "build_graph",
    "custom",
    "descendant_counts",
    "descendants",
    "impact_all",
    "offset",
    "rerun",
    "rerun_set",
    "restart_after_failure",
    "resume",
    "resume_preview",
    "run_pipeline",
    "same",
    "status",
    "task_impact",
    "task_name",
    "task_output_path",
    "window",
]
