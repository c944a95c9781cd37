"""Running the meter pipeline for real: checkpoints, failures, resume, rerun, backfill, lineage, bad input."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vardiya.clock import SystemClock, VirtualClock
from vardiya.errors import ConfigurationError, InvalidInput, UndeclaredRead
from vardiya.examples.meter_pipeline import pipeline, pipeline_missing_edge
from vardiya.pipeline import (
    Monthly,
    Pipeline,
    PipelineState,
    RunState,
    TaskContext,
    TaskState,
    UndeclaredReadWarning,
    backfill,
    build_graph,
    descendants,
    rerun,
    rerun_set,
    resume,
    resume_preview,
    run_pipeline,
    same,
    status,
    task_output_path,
)
from vardiya.store import Store

GRAPH = build_graph(pipeline)
MONTHS = [f"2026-{month:02d}" for month in range(1, 13)]


def instrumented(
    source: Pipeline, *, calls: list[str] | None = None, pause_s: float = 0.0, name: str | None = None
) -> Pipeline:
    """``source`` with every stage function counting its calls and taking ``pause_s`` of real time."""

    def wrap(function: Callable[[TaskContext], Any]) -> Callable[[TaskContext], Any]:
        def stage(context: TaskContext) -> Any:
            if calls is not None:
                calls.append(context.task)
            if pause_s:
                time.sleep(pause_s)  # work that takes time, so that overlapping tasks can be seen
            return function(context)

        return stage

    return Pipeline(
        name or source.name, [dataclasses.replace(stage, fn=wrap(stage.fn)) for stage in source.stages]
    )


def _consumption_rows(root: Path, name: str = "meters") -> int:
    return sum(len(json.loads((root / name / "consumption" / f"{month}.json").read_text())) for month in MONTHS)


def _fingerprints(store: Store, name: str = "meters") -> dict[str, str | None]:
    return {task: record.output_fingerprint for task, record in PipelineState(store, name).tasks().items()}


def _nothing_written(store: Store, name: str) -> None:
    state = PipelineState(store, name)
    assert (state.runs(), state.tasks()) == ([], {})


def test_the_example_runs_green_and_checkpoints_every_task(store: Store, tmp_path: Path) -> None:
    result = run_pipeline(store, pipeline, root=tmp_path, concurrency=4)

    assert result.ok and set(result.succeeded) == set(GRAPH.names) and result.ran == result.succeeded
    assert list(result.succeeded) == GRAPH.order
    assert (result.failed, result.blocked, result.skipped, result.pending) == ((), (), (), ())
    assert _consumption_rows(tmp_path) == 2_200
    state = PipelineState(store, "meters")
    records = state.tasks()
    assert sum(records[f"consumption@{month}"].rows or 0 for month in MONTHS) == 2_200
    assert records["consumption@2026-01"].rows == 0  # no predecessor, by definition
    for task, record in records.items():
        stage, _, partition = task.partition("@")
        path = task_output_path(tmp_path, "meters", stage, partition)
        assert record.output_path == str(path)
        assert record.output_fingerprint == hashlib.sha256(path.read_bytes()).hexdigest()
        assert (record.state, record.attempts, record.materialized_run_id) == (TaskState.SUCCEEDED, 1, result.run_id)
    history = state.history(run_id=result.run_id)
    assert sorted(attempt.task for attempt in history) == sorted(GRAPH.names)
    assert {attempt.state for attempt in history} == {TaskState.SUCCEEDED}
    assert [(r.read_task, r.declared) for r in state.reads(task="consumption@2026-07")] == [
        ("clean@2026-06", True), ("clean@2026-07", True),
    ]
    assert state.last_run().state is RunState.SUCCEEDED  # type: ignore[union-attr]
    assert status(store, pipeline).green
    assert result.to_json()["run_id"] == result.run_id

    again = run_pipeline(store, pipeline, root=tmp_path)
    assert (again.ran, again.skipped) == ((), tuple(GRAPH.order))


def test_a_failure_blocks_exactly_its_descendants_and_resume_runs_exactly_those(store: Store, tmp_path: Path) -> None:
    failed = run_pipeline(store, pipeline, root=tmp_path, concurrency=3, inject_failure=["clean@2026-06"])

    blast = descendants(GRAPH, "clean@2026-06")
    assert blast == ["consumption@2026-06", "consumption@2026-07", "summary@2026-06", "summary@2026-07"]
    assert failed.failed == ("clean@2026-06",)
    assert failed.errors == {"clean@2026-06": "injected failure (drill)"}
    assert failed.blocked == tuple(blast)
    assert set(failed.succeeded) == set(GRAPH.names) - {"clean@2026-06", *blast}
    assert not failed.ok and failed.pending == ()
    states = status(store, pipeline).tasks
    assert states["clean@2026-06"] is TaskState.FAILED
    assert {task for task, state in states.items() if state is TaskState.BLOCKED} == set(blast)
    state = PipelineState(store, "meters")
    assert state.task("summary@2026-07").error == "upstream clean@2026-06 failed"  # type: ignore[union-attr]
    assert state.last_run().state is RunState.FAILED  # type: ignore[union-attr]

    runs_before = state.runs()
    preview = resume_preview(store, pipeline)  # the dry run: the same plan, nothing written
    assert preview.to_run == ("clean@2026-06", *blast) and preview.resumes == failed.run_id
    assert preview.failed == ("clean@2026-06",)
    assert set(preview.skipped) == set(failed.succeeded) and preview.root == str(tmp_path)
    assert state.runs() == runs_before and status(store, pipeline).tasks == states
    resumed = resume(store, pipeline)
    assert resumed.ran == preview.to_run
    assert set(resumed.skipped) == set(failed.succeeded)
    assert resumed.ok
    assert status(store, pipeline).green
    assert _consumption_rows(tmp_path) == 2_200
    assert state.last_run().options["resumes"] == failed.run_id  # type: ignore[union-attr]


def test_a_success_whose_output_file_is_gone_is_not_done_and_a_resume_runs_it_again(
    store: Store, tmp_path: Path
) -> None:
    assert run_pipeline(store, pipeline, root=tmp_path).ok
    task_output_path(tmp_path, "meters", "clean", "2026-03").unlink()  # the checkpoint says succeeded
    preview = resume_preview(store, pipeline)
    assert preview.to_run == ("clean@2026-03",) and preview.failed == ()
    assert set(preview.skipped) == set(GRAPH.names) - {"clean@2026-03"}
    assert resume(store, pipeline).ran == preview.to_run
    assert task_output_path(tmp_path, "meters", "clean", "2026-03").exists()
    assert resume_preview(store, pipeline).to_run == ()


def test_rerun_runs_exactly_the_task_and_its_descendants_with_the_same_fingerprints(
    store: Store, tmp_path: Path
) -> None:
    calls: list[str] = []
    counted = instrumented(pipeline, calls=calls)
    first = run_pipeline(store, counted, root=tmp_path)
    before = _fingerprints(store)
    calls.clear()

    again = rerun(store, counted, "clean@2026-03", root=tmp_path, concurrency=2)

    expected = rerun_set(GRAPH, "clean@2026-03")
    assert expected == ["clean@2026-03", "consumption@2026-03", "consumption@2026-04", "summary@2026-03", "summary@2026-04"]
    assert again.ran == tuple(expected) and again.skipped == () and again.ok
    assert sorted(calls) == sorted(expected)
    assert _fingerprints(store) == before
    records = PipelineState(store, "meters").tasks()
    assert {task for task, record in records.items() if record.materialized_run_id == again.run_id} == set(expected)
    assert {record.materialized_run_id for task, record in records.items() if task not in expected} == {first.run_id}
    assert status(store, pipeline).green


def test_backfill_never_runs_more_than_k_tasks_at_once(store: Store, tmp_path: Path) -> None:
    slow = instrumented(pipeline, pause_s=0.02)
    result = backfill(store, slow, "2026-03", "2026-08", root=tmp_path, max_concurrent=2, clock=SystemClock())

    in_range = {task for task in GRAPH.names if "2026-03" <= task.partition("@")[2] <= "2026-08"}
    assert set(result.ran) == in_range | {"ingest@2026-02", "clean@2026-02"}  # consumption@2026-03 needs clean@2026-02
    assert result.ok
    attempts = PipelineState(store, "meters").history(run_id=result.run_id)
    events = sorted(
        [(attempt.started_at, 1) for attempt in attempts] + [(attempt.finished_at, -1) for attempt in attempts],
        key=lambda event: (event[0], event[1]),  # an end and a start at the same instant do not overlap
    )
    running = most = 0
    for _moment, change in events:
        running += change
        most = max(most, running)
    assert most == 2


def test_strict_mode_fails_a_read_the_graph_does_not_declare(store: Store, tmp_path: Path) -> None:
    result = run_pipeline(store, pipeline_missing_edge, root=tmp_path, strict=True)

    late = [f"consumption@{month}" for month in MONTHS[1:]]
    assert result.failed == tuple(late)
    assert set(result.blocked) == {f"summary@{month}" for month in MONTHS[1:]}
    assert result.errors["consumption@2026-03"] == (
        "UndeclaredRead: consumption@2026-03 read clean@2026-02, which the graph does not declare: "
        "add depends_on={'clean': [same(), offset(-1)]} to stage consumption"
    )
    assert "consumption@2026-01" in result.succeeded
    assert [read.read_task for read in result.undeclared_reads if read.task == "consumption@2026-03"] == ["clean@2026-02"]
    reads = PipelineState(store, "meters_missing_edge").reads(run_id=result.run_id, task="consumption@2026-03")
    assert [(read.read_task, read.declared) for read in reads] == [("clean@2026-02", False), ("clean@2026-03", True)]
    # The IO layer raises it before touching the file: a configuration error, not a flaky read to retry.
    context = TaskContext(
        graph=build_graph(pipeline_missing_edge), task="consumption@2026-03", root=tmp_path, strict=True
    )
    with pytest.raises(UndeclaredRead, match="add depends_on") as raised:
        context.read("clean", "2026-02")
    assert isinstance(raised.value, ConfigurationError)
    assert [(read.read_task, read.declared) for read in context.reads] == [("clean@2026-02", False)]


def test_without_strict_a_missing_edge_runs_green_and_warns(store: Store, tmp_path: Path) -> None:
    with pytest.warns(UndeclaredReadWarning) as warned:
        result = run_pipeline(store, pipeline_missing_edge, root=tmp_path)

    assert result.ok
    messages = [str(warning.message) for warning in warned]
    assert len(messages) == 11
    assert messages[1] == (
        "consumption@2026-03 read clean@2026-02, which the graph does not declare: "
        "add depends_on={'clean': [same(), offset(-1)]} to stage consumption"
    )
    assert [read.task for read in result.undeclared_reads] == [f"consumption@{month}" for month in MONTHS[1:]]
    assert result.to_json()["undeclared_reads"][0]["read"] == "clean@2026-01"
    undeclared = [read for read in PipelineState(store, "meters_missing_edge").reads() if not read.declared]
    assert len(undeclared) == 11
    assert _consumption_rows(tmp_path, "meters_missing_edge") == 2_200

    # Rerunning clean@2026-02 by the declared graph leaves consumption@2026-03, which read it, stale.
    with pytest.warns(UndeclaredReadWarning):
        again = rerun(store, pipeline_missing_edge, "clean@2026-02", root=tmp_path)
    assert again.ran == ("clean@2026-02", "consumption@2026-02", "summary@2026-02")
    assert status(store, pipeline_missing_edge).stale == ("consumption@2026-03",)


def test_a_selection_plans_its_missing_upstream_or_refuses_naming_it(store: Store, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as refused:
        run_pipeline(store, pipeline, root=tmp_path, partitions="2026-07", plan_upstream=False)
    message = str(refused.value)
    assert "clean@2026-06 (needed by consumption@2026-07)" in message and "\n" not in message
    _nothing_written(store, "meters")

    result = run_pipeline(store, pipeline, root=tmp_path, partitions=("2026-07", "2026-07"))
    assert result.ran == (
        "ingest@2026-06", "ingest@2026-07", "clean@2026-06", "clean@2026-07", "consumption@2026-07", "summary@2026-07",
    )
    assert PipelineState(store, "meters").task("consumption@2026-07").rows == 200  # type: ignore[union-attr]

    # Now clean@2026-06 is done: the same refusing selection runs, and reads the checkpoint.
    later = run_pipeline(store, pipeline, root=tmp_path, partitions="2026-08", plan_upstream=False)
    assert later.ran == ("ingest@2026-08", "clean@2026-08", "consumption@2026-08", "summary@2026-08")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"tasks": ["clean@2026-13"]}, "no task 'clean@2026-13'; stage 'clean' has partitions 2026-01..2026-12"),
        ({"tasks": ["cleen@2026-03"]}, "did you mean 'clean@2026-03'?"),
        ({"inject_failure": ["consumtion@2026-06"]}, "did you mean 'consumption@2026-06'?"),
        ({"partitions": ("2025-12", "2026-02")}, "partition range 2025-12..2026-02: partition '2025-12' is not in"),
        ({"partitions": "2026-05..2026-02"}, "runs backwards"),
        ({"partitions": "2027-01"}, "use a key in 2026-01..2026-12"),
        ({"concurrency": 0}, "concurrency must be a whole number of at least 1"),
        ({"tasks": []}, "the task selection is empty"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_anything_is_written(
    store: Store, tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        run_pipeline(store, pipeline, root=tmp_path, **arguments)
    assert expected in str(refused.value) and "\n" not in str(refused.value)
    _nothing_written(store, "meters")
    assert not (tmp_path / "meters").exists()


def test_bad_input_to_rerun_backfill_and_resume(store: Store, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="did you mean 'summary@2026-04'"):
        rerun(store, pipeline, "sumary@2026-04", root=tmp_path)
    with pytest.raises(InvalidInput, match="max_concurrent must be"):
        backfill(store, pipeline, "2026-01", "2026-02", root=tmp_path, max_concurrent=0)
    with pytest.raises(InvalidInput, match="has no run to resume"):
        resume(store, pipeline)
    with pytest.raises(InvalidInput, match=r"needs ingest@2026-04 \(needed by clean@2026-04\)"):
        rerun(store, pipeline, "clean@2026-04", root=tmp_path)  # nothing upstream is done yet
    _nothing_written(store, "meters")
    run_pipeline(store, pipeline, root=tmp_path, partitions="2026-01")
    with pytest.raises(InvalidInput, match="which this run does not run \\(already done\\)"):
        run_pipeline(store, pipeline, root=tmp_path, partitions="2026-01", inject_failure="clean@2026-01")


def test_fail_fast_stops_launching_at_the_first_failure(store: Store, tmp_path: Path) -> None:
    result = run_pipeline(store, pipeline, root=tmp_path, fail_fast=True, inject_failure="ingest@2026-01")

    assert (result.ran, result.failed) == (("ingest@2026-01",), ("ingest@2026-01",))
    assert result.blocked == tuple(descendants(GRAPH, "ingest@2026-01"))
    assert len(result.pending) == 48 - 1 - len(result.blocked)
    assert status(store, pipeline).counts[TaskState.PENDING] == len(result.pending)
    assert resume(store, pipeline).ok


def _flaky_pipeline(failures: int, retries: int) -> tuple[Pipeline, list[str]]:
    calls: list[str] = []
    built = Pipeline("flaky")

    @built.stage(partitions=Monthly(start="2026-01", end="2026-01"), retries=retries, retry_wait_s=30)
    def fetch(context: TaskContext) -> list[dict[str, Any]]:
        calls.append(context.task)
        if len(calls) <= failures:
            raise ConnectionError(f"source unavailable (call {len(calls)})")
        return [{"value": 1}]

    return built, calls


def test_retries_wait_on_the_injected_clock_and_are_kept_in_the_history(
    store: Store, clock: VirtualClock, tmp_path: Path
) -> None:
    flaky, calls = _flaky_pipeline(failures=2, retries=2)
    start = clock.now()
    result = run_pipeline(store, flaky, root=tmp_path)
    assert result.ok and calls == ["fetch@2026-01"] * 3
    assert (clock.now() - start).total_seconds() == 60
    history = PipelineState(store, "flaky").history(task="fetch@2026-01")
    assert [(attempt.attempt, attempt.state, attempt.error) for attempt in history] == [
        (1, TaskState.FAILED, "ConnectionError: source unavailable (call 1)"),
        (2, TaskState.FAILED, "ConnectionError: source unavailable (call 2)"),
        (3, TaskState.SUCCEEDED, None),
    ]

    exhausted, _ = _flaky_pipeline(failures=5, retries=1)
    failed = run_pipeline(store, exhausted, root=tmp_path / "other")
    assert failed.errors == {"fetch@2026-01": "ConnectionError: source unavailable (call 2)"}
    assert PipelineState(store, "flaky").task("fetch@2026-01").attempts == 3 + 2  # type: ignore[union-attr]


def test_a_read_of_an_output_that_does_not_exist_fails_the_task(store: Store, tmp_path: Path) -> None:
    built = Pipeline("loose")

    @built.stage
    def totals(context: TaskContext) -> None: ...

    @built.stage
    def report(context: TaskContext) -> list[dict[str, Any]]:
        return context.read("totals")  # undeclared, and totals never ran

    with pytest.warns(UndeclaredReadWarning, match="add depends_on={'totals': same\\(\\)} to stage report"):
        result = run_pipeline(store, built, root=tmp_path, tasks="report")
    assert result.failed == ("report",)
    assert result.errors["report"].startswith("InvalidInput: report read totals, which has no output at ")
    assert "run it first, or declare the dependency" in result.errors["report"]


def test_a_stage_that_returns_no_rows_list_fails_without_retries(store: Store, tmp_path: Path) -> None:
    built = Pipeline("odd")

    @built.stage(retries=3)
    def broken(context: TaskContext) -> Any:
        return {"not": "a list"}

    @built.stage(depends_on={"broken": same()})
    def nothing(context: TaskContext) -> None:
        return None

    result = run_pipeline(store, built, root=tmp_path)
    assert result.errors == {"broken": "InvalidInput: broken returned dict; return a list of row dicts (or None for no rows)"}
    assert result.blocked == ("nothing",)
    assert len(PipelineState(store, "odd").history(task="broken")) == 1


def test_a_stage_that_returns_none_publishes_no_file_and_reads_as_no_rows(store: Store, tmp_path: Path) -> None:
    built = Pipeline("effects")
    months = Monthly(start="2026-01", end="2026-02")
    produced: list[dict[str, Any]] | None = None  # what notify returns; None is no output

    @built.stage(partitions=months)
    def notify(context: TaskContext) -> list[dict[str, Any]] | None:
        return produced

    @built.stage(partitions=months, depends_on={"notify": same()})
    def count(context: TaskContext) -> list[dict[str, Any]]:
        return [{"read": len(context.read("notify"))}]

    def counted(month: str) -> int:
        return int(json.loads(task_output_path(tmp_path, "effects", "count", month).read_text())[0]["read"])

    first = run_pipeline(store, built, root=tmp_path, concurrency=2)
    assert first.ok
    assert not (tmp_path / "effects" / "notify").exists()
    records = PipelineState(store, "effects").tasks()
    for month in ("2026-01", "2026-02"):
        record = records[f"notify@{month}"]
        assert (record.state, record.output_path, record.rows) == (TaskState.SUCCEEDED, None, 0)
        assert record.output_fingerprint == hashlib.sha256(b"[]\n").hexdigest()
        assert counted(month) == 0
    assert run_pipeline(store, built, root=tmp_path).skipped == tuple(build_graph(built).order)  # done, no file

    produced = [{"sent": 1}]
    assert rerun(store, built, "notify@2026-01", root=tmp_path).ok
    assert task_output_path(tmp_path, "effects", "notify", "2026-01").exists() and counted("2026-01") == 1
    produced = None
    assert rerun(store, built, "notify@2026-01", root=tmp_path).ok
    assert not task_output_path(tmp_path, "effects", "notify", "2026-01").exists()  # no stale rows left
    assert counted("2026-01") == 0

    # The checkpoint, not a stray file, says what a task produced (a later run reads it from the store).
    stray = task_output_path(tmp_path, "effects", "notify", "2026-02")
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_text('[{"sent": 1}]\n')
    assert rerun(store, built, "count@2026-02", root=tmp_path).ran == ("count@2026-02",)
    assert counted("2026-02") == 0
