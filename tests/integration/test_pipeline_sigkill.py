"""A pipeline run killed with SIGKILL halfway: the restart runs no completed task again and ends green.

A spawned process runs the meter pipeline, two tasks at a time, each stage call logged to a file and
slowed a little. Once ``KILL_AFTER`` calls have started it tells the test, which SIGKILLs it: either
while it waits inside a stage function (a task is mid-run for sure), or while it keeps working (the kill
lands wherever the run is: inside a transaction, between a temp file and its rename). ``resume`` in the
test process then finishes the run. Every task that was checkpointed before the kill was called exactly
once over both processes, every output is complete JSON, and the outputs are byte for byte those of an
uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from vardiya.clock import SystemClock
from vardiya.examples.meter_pipeline import pipeline
from vardiya.pipeline import (
    Pipeline,
    PipelineState,
    RunState,
    TaskContext,
    TaskState,
    build_graph,
    resume,
    run_pipeline,
    status,
)
from vardiya.store import open_store

from ..support.processes import run_then_kill

GRAPH = build_graph(pipeline)
KILL_AFTER = 21
CONCURRENCY = 2
PAUSE_S = 0.01
HANG_S = 600.0  # far longer than the test waits: the kill comes first


def _logged(calls_file: Path, on_call: Callable[[int], None] | None = None) -> Pipeline:
    """The example with every stage call appended to ``calls_file`` (one line per call) before it runs."""
    lock = threading.Lock()
    count = 0

    def wrap(function: Callable[[TaskContext], Any]) -> Callable[[TaskContext], Any]:
        def stage(context: TaskContext) -> Any:
            nonlocal count
            with lock:
                with calls_file.open("a", encoding="utf-8") as handle:
                    handle.write(context.task + "\n")
                count += 1
                seen = count
            if on_call is not None:
                on_call(seen)
            time.sleep(PAUSE_S)  # a task that takes time, so the kill lands among running tasks
            return function(context)

        return stage

    return Pipeline(pipeline.name, [dataclasses.replace(stage, fn=wrap(stage.fn)) for stage in pipeline.stages])


def run_until_killed(store_url: str, root: str, calls_file: str, hang: bool, conn: Connection) -> None:
    """In the child: run the logged pipeline and report once ``KILL_AFTER`` stage calls have started."""
    signalled = threading.Event()

    def on_call(seen: int) -> None:
        if seen == KILL_AFTER:
            signalled.set()
            conn.send(("ok", seen))
            if hang:
                time.sleep(HANG_S)

    try:
        with open_store(store_url, clock=SystemClock()) as store:
            result = run_pipeline(
                store, _logged(Path(calls_file), on_call), root=root, concurrency=CONCURRENCY, clock=SystemClock()
            )
        if not signalled.is_set():
            conn.send(("error", f"the run finished before {KILL_AFTER} calls: {result.to_json()}"))
    except BaseException:  # everything goes back to the test process
        if not signalled.is_set():
            conn.send(("error", traceback.format_exc()))
        raise
    finally:
        conn.close()


def _outputs(root: Path) -> dict[str, bytes]:
    """Every published output by task; fails on a file that is not complete JSON."""
    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("*.json")):
        data = path.read_bytes()
        try:
            json.loads(data)
        except json.JSONDecodeError as error:
            pytest.fail(f"{path} is partial ({len(data)} bytes): {error}", pytrace=False)
        found[f"{path.parent.name}@{path.stem}"] = data
    return found


def _reference(tmp_path: Path) -> dict[str, bytes]:
    """The outputs of an uninterrupted run, in a store and root of their own."""
    root = tmp_path / "reference"
    with open_store(f"sqlite:///{tmp_path / 'reference.db'}") as store:
        assert run_pipeline(store, pipeline, root=root).ok
    return _outputs(root)


@pytest.mark.parametrize("hang", [True, False], ids=["killed-inside-a-task", "killed-while-running"])
def test_a_killed_run_restarts_without_rerunning_completed_tasks(store_url: str, tmp_path: Path, hang: bool) -> None:
    root, calls_file = tmp_path / "out", tmp_path / "calls.txt"
    open_store(store_url).close()  # migrated before the child opens it

    seen = run_then_kill(
        run_until_killed, (store_url, str(root), str(calls_file), hang), name="doomed-pipeline", timeout=60
    )
    assert seen == KILL_AFTER

    # What the killed run left: some tasks checkpointed, each with its complete output; no partial file.
    with open_store(store_url, clock=SystemClock()) as store:
        state = PipelineState(store, "meters")
        (killed,) = state.runs()
        assert killed.state is RunState.RUNNING  # nobody closed it: the process just died
        done_before = {task for task, record in state.tasks().items() if record.state is TaskState.SUCCEEDED}
        assert 0 < len(done_before) < len(GRAPH)
        calls_before = Counter(calls_file.read_text(encoding="utf-8").split())
        assert sum(calls_before.values()) >= KILL_AFTER
        assert done_before <= set(calls_before)
        outputs_before = _outputs(root)
        for task in done_before:
            record = state.task(task)
            assert record is not None and record.output_fingerprint == hashlib.sha256(outputs_before[task]).hexdigest()
        leftovers = [path for path in root.rglob("*") if path.is_file() and path.suffix != ".json"]
        # A kill between a temp file and its rename leaves that hidden temp file, which no reader takes
        # for an output; at most one per running task.
        assert len(leftovers) <= CONCURRENCY and all(path.name.startswith(".") for path in leftovers), leftovers
        if hang:
            assert any(record.state is TaskState.RUNNING for record in state.tasks().values())

        # The restart, in this process, with the same logging.
        result = resume(store, _logged(calls_file), concurrency=CONCURRENCY, clock=SystemClock())

        assert result.ok
        assert set(result.skipped) == done_before
        assert set(result.ran) == set(GRAPH.names) - done_before
        calls = Counter(calls_file.read_text(encoding="utf-8").split())
        assert {task: calls[task] for task in done_before} == dict.fromkeys(done_before, 1), "a completed task ran again"
        assert all(calls[task] <= 2 for task in GRAPH.names)
        assert set(calls) == set(GRAPH.names)
        for task in GRAPH.names:
            succeeded = [attempt for attempt in state.history(task=task) if attempt.state is TaskState.SUCCEEDED]
            assert len(succeeded) == 1, (task, succeeded)
        assert {run.state for run in state.runs()} == {RunState.INTERRUPTED, RunState.SUCCEEDED}
        assert status(store, pipeline).green

    after = _outputs(root)
    assert after == _reference(tmp_path)
    assert sum(len(json.loads(after[f"consumption@2026-{month:02d}"])) for month in range(1, 13)) == 2_200
