"""Task outputs and lineage: where a task's rows live, how they are published, what a task read.

Outputs
    A task's output is a JSON list of row objects at ``root/{pipeline}/{stage}/{partition}.json``
    (``_`` in place of the partition for an unpartitioned stage): one deterministic path per task, so a
    rerun replaces the file, and ``atomic_write`` (temp, fsync, rename) means a reader or a crash only
    ever sees the old file or the new one. Rows are encoded with sorted keys and no whitespace, so the
    same rows give the same bytes and the same fingerprint (the sha256 of those bytes) on every run.

    A stage that returns ``None`` produced no output (a stage run for its effect): no file is written,
    an earlier output at its path is removed, and the checkpoint records no path, zero rows and the
    fingerprint of the empty list, which is what a reader of it gets. A stage that returns ``[]`` still
    publishes its empty list. A durable file is the costly part of a small task (creating one and its
    two fsyncs take longer than all of the task's store writes), and a task with nothing to say should
    not pay for one.

Reads
    A stage function gets a ``TaskContext`` and reads upstream rows with ``context.read(stage,
    partition)``. Every read is recorded. A read of a task that is not an upstream of this task in the
    declared graph is the missing edge other schedulers let pass: in strict mode it raises
    ``UndeclaredRead`` (the task fails), otherwise the read goes ahead and is reported, with the edge to
    add, as an ``UndeclaredReadWarning`` once the run ends.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, InvalidInput, UndeclaredRead
from ..files import atomic_write
from .graph import TaskGraph, task_name
from .mapping import MappingKind, PartitionMapping
from .partitions import Unpartitioned

__all__ = [
    "EMPTY_FINGERPRINT",
    "Output",
    "Read",
    "TaskContext",
    "UndeclaredReadWarning",
    "encode_rows",
    "load_rows",
    "missing_edge_message",
    "publish",
    "task_output_path",
]

#: The file name of an unpartitioned stage's one output (its partition key is "").
UNPARTITIONED_NAME = "_"


class UndeclaredReadWarning(UserWarning):
    """A task read a partition its declared graph does not explain (``strict=False``); the run went on."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Output:
    """What a task published: where (None for no output), the sha256 of the bytes, and how many rows."""

    path: str | None
    fingerprint: str
    rows: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Read:
    """One (stage, partition) a task read; ``missing_edge`` says what to declare when it is undeclared."""

    task: str
    stage: str
    partition: str
    declared: bool
    missing_edge: str | None = None

    @property
    def read_task(self) -> str:
        """The task whose output was read."""
        return task_name(self.stage, self.partition)

    def to_json(self) -> dict[str, Any]:
        """``{task, read, declared, message}`` as run results report undeclared reads."""
        return {"task": self.task, "read": self.read_task, "declared": self.declared, "message": self.missing_edge}


def task_output_path(root: str | os.PathLike[str], pipeline: str, stage: str, partition: str) -> Path:
    """``root/{pipeline}/{stage}/{partition or '_'}.json``: the one place a task's output lives."""
    name = partition or UNPARTITIONED_NAME
    if "/" in name or "\\" in name or "\0" in name or name in (".", ".."):
        raise ConfigurationError(
            f"partition {partition!r} of stage {stage!r} cannot be a file name (it would leave "
            f"{stage}/ or be no file at all); use keys without '/', '\\' or NUL"
        )
    return Path(os.fspath(root), pipeline, stage, f"{name}.json")


def encode_rows(rows: object, *, task: str = "the stage") -> bytes:
    """The deterministic bytes of a list of row objects (sorted keys, compact, UTF-8, newline at the end).

    ``None`` is no rows. Anything but a list (or tuple) of mappings with text keys, or values JSON cannot
    hold (NaN, sets, dates), is refused with the task named: a task's output is data, not objects.
    """
    if rows is None:
        rows = []
    if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
        raise InvalidInput(
            f"{task} returned {type(rows).__name__}; return a list of row dicts (or None for no rows)"
        )
    for number, row in enumerate(rows):
        if not isinstance(row, Mapping) or not all(isinstance(key, str) for key in row):
            raise InvalidInput(f"{task} returned row {number} as {row!r}; every row must be a dict with text keys")
    try:
        text = json.dumps(
            [dict(row) for row in rows], sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as error:
        raise InvalidInput(
            f"{task} returned rows JSON cannot hold ({error}); use text, numbers, booleans, None, lists and dicts"
        ) from None
    return (text + "\n").encode("utf-8")


#: The fingerprint of no rows: what a task that returned None (no output) is checkpointed with.
EMPTY_FINGERPRINT = hashlib.sha256(encode_rows([])).hexdigest()


def publish(path: str | os.PathLike[str], rows: object, *, task: str = "the stage") -> Output:
    """Encode ``rows`` and publish them atomically (and durably) at ``path``.

    ``None`` is no output: nothing is written, and an earlier output at ``path`` is removed (durably),
    so the path never holds rows the checkpoint does not describe.
    """
    if rows is None:
        _remove_output(os.fspath(path))
        return Output(path=None, fingerprint=EMPTY_FINGERPRINT, rows=0)
    data = encode_rows(rows, task=task)
    atomic_write(path, data)
    count = len(rows) if isinstance(rows, Sequence) else 0
    return Output(path=os.fspath(path), fingerprint=hashlib.sha256(data).hexdigest(), rows=count)


def _remove_output(target: str) -> None:
    try:
        os.unlink(target)
    except FileNotFoundError:
        return  # the usual case: there was never an output, and no file work is done
    directory = os.open(os.path.dirname(target) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def load_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a published output."""
    with open(path, "rb") as handle:
        rows: list[dict[str, Any]] = json.loads(handle.read())
    return rows


def _suggested_mapping(graph: TaskGraph, task: int, upstream_stage: str, upstream_key: str) -> PartitionMapping:
    """The mapping that would explain a read of ``upstream_stage@upstream_key`` from task ``task``."""
    downstream = graph.stage_of(graph.names[task]).partitions
    upstream = graph.stage_of(task_name(upstream_stage, upstream_key)).partitions
    key = graph.partition_keys[task]
    if upstream.keys == downstream.keys or not isinstance(downstream, Unpartitioned):
        anchor = upstream.position(key)
    else:
        anchor = None  # one downstream task over many upstream partitions: a fan-in
    if anchor is None:
        return PartitionMapping(kind=MappingKind.ALL)
    distance = upstream.index(upstream_key) - anchor
    if distance == 0:
        return PartitionMapping(kind=MappingKind.SAME)
    return PartitionMapping(kind=MappingKind.OFFSET, first=distance, last=distance)


def missing_edge_message(graph: TaskGraph, task: int, upstream_stage: str, upstream_key: str) -> str:
    """``consumption@2026-03 read clean@2026-02, which the graph does not declare: add depends_on=...``."""
    name = graph.names[task]
    stage = graph.stage_of(name)
    declared = list(stage.upstreams.get(upstream_stage, ()))
    suggestion = [*declared, _suggested_mapping(graph, task, upstream_stage, upstream_key)]
    mappings = str(suggestion[0]) if len(suggestion) == 1 else "[" + ", ".join(map(str, suggestion)) + "]"
    return (
        f"{name} read {task_name(upstream_stage, upstream_key)}, which the graph does not declare: "
        f"add depends_on={{{upstream_stage!r}: {mappings}}} to stage {stage.name}"
    )


class TaskContext:
    """What a stage function gets: its task, stage and partition, and ``read`` for upstream rows.

    Built by the runner, one per attempt; ``reads`` are what the attempt read, in order, once each.
    ``without_output`` names the tasks whose checkpointed success produced no output (they returned
    None): reading one gives no rows, whatever file may lie at its path.
    """

    def __init__(
        self,
        *,
        graph: TaskGraph,
        task: str,
        root: str | os.PathLike[str],
        strict: bool,
        without_output: Container[str] = frozenset(),
    ) -> None:
        self._graph = graph
        self._task_id = graph.task_id(task)
        self._root = os.fspath(root)
        self._strict = strict
        self._without_output = without_output
        self._upstream = frozenset(graph.predecessors[self._task_id])
        self._reads: dict[str, Read] = {}
        self.task = task
        self.stage = graph.stage_of(task).name
        self.partition = graph.partition_keys[self._task_id]

    def __repr__(self) -> str:
        return f"TaskContext({self.task!r})"

    @property
    def pipeline(self) -> str:
        """The pipeline's name."""
        return self._graph.pipeline

    @property
    def reads(self) -> tuple[Read, ...]:
        """Every (stage, partition) this attempt read, in the order of first reading."""
        return tuple(self._reads.values())

    def partition_at(self, offset: int) -> str | None:
        """The key ``offset`` positions from this task's partition in its stage's set; None outside it."""
        return self._graph.stage_of(self.task).partitions.offset(self.partition, offset)

    def read(self, stage: str, partition: str | None = None) -> list[dict[str, Any]]:
        """The rows of ``stage@partition``; ``partition`` None means this task's own partition.

        For an unpartitioned upstream stage the partition is ignored. An undeclared read fails in strict
        mode and is reported otherwise; an upstream that has no output yet fails the task.
        """
        graph = self._graph
        upstream = next((candidate for candidate in graph.stages if candidate.name == stage), None)
        if upstream is None:
            raise ConfigurationError(
                f"{self.task} read stage {stage!r}, which pipeline {graph.pipeline!r} does not have; "
                f"its stages are {', '.join(graph.stage_names)}"
            )
        if isinstance(upstream.partitions, Unpartitioned):
            key = ""
        else:
            key = self.partition if partition is None else partition
        read_id = graph.task_id(task_name(stage, key))  # a key outside the set is an error naming close ones
        read_name = graph.names[read_id]
        if read_name not in self._reads:
            declared = read_id in self._upstream
            message = None if declared else missing_edge_message(graph, self._task_id, stage, key)
            self._reads[read_name] = Read(
                task=self.task, stage=stage, partition=key, declared=declared, missing_edge=message
            )
        record = self._reads[read_name]
        if not record.declared and self._strict:
            raise UndeclaredRead(record.missing_edge)
        if read_name in self._without_output:
            return []
        path = task_output_path(self._root, graph.pipeline, stage, key)
        try:
            return load_rows(path)
        except FileNotFoundError:
            raise InvalidInput(
                f"{self.task} read {read_name}, which has no output at {path}: it has not run (or its file "
                "was removed); run it first, or declare the dependency so the graph runs it before "
                f"{self.task}"
            ) from None
