"""The pipeline tables on both backends: runs, checkpoints, attempt history, reads, status and staleness."""

from __future__ import annotations

from datetime import timedelta

from vardiya.clock import VirtualClock
from vardiya.pipeline import (
    Monthly,
    Output,
    Pipeline,
    PipelineState,
    Read,
    RunState,
    TaskState,
    same,
    status,
)
from vardiya.pipeline.io import EMPTY_FINGERPRINT
from vardiya.pipeline.state import AttemptEnd
from vardiya.store import Store

from ..conftest import START

MONTHS = Monthly(start="2026-01", end="2026-03")


def _pipeline() -> Pipeline:
    built = Pipeline("pair")

    @built.stage(partitions=MONTHS)
    def up(context: object) -> None: ...

    @built.stage(partitions=MONTHS, depends_on={"up": same()})
    def down(context: object) -> None: ...

    return built


def _output(name: str, rows: int = 3) -> Output:
    return Output(path=f"/out/pair/{name}.json", fingerprint=name.encode().hex().ljust(64, "0")[:64], rows=rows)


def _read(task: str, stage: str, partition: str, *, declared: bool = True) -> Read:
    return Read(task=task, stage=stage, partition=partition, declared=declared)


def _succeed(state: PipelineState, run_id: int, task: str, reads: list[Read] | None = None) -> None:
    attempt = state.start_attempt(run_id, task, 1)
    state.succeed(run_id, attempt, task, _output(task), reads or [])


def test_a_run_is_recorded_with_its_options_and_closed(store: Store, clock: VirtualClock) -> None:
    state = PipelineState(store, "pair")
    assert state.last_run() is None
    run_id = state.open_run({"mode": "run", "partitions": ["2026-01", "2026-02"], "strict": True})
    (run,) = state.runs()
    assert (run.id, run.pipeline, run.state, run.started_at, run.finished_at) == (
        run_id, "pair", RunState.RUNNING, START, None,
    )
    assert run.options == {"mode": "run", "partitions": ["2026-01", "2026-02"], "strict": True}
    clock.advance(5)
    state.close_run(run_id, RunState.SUCCEEDED)
    last = state.last_run()
    assert last is not None and (last.state, last.finished_at) == (RunState.SUCCEEDED, START + timedelta(seconds=5))
    assert PipelineState(store, "other").runs() == []


def test_a_success_is_checkpointed_with_path_fingerprint_and_rows(store: Store, clock: VirtualClock) -> None:
    state = PipelineState(store, "pair")
    run_id = state.open_run({})
    attempt = state.start_attempt(run_id, "up@2026-01", 1)
    running = state.task("up@2026-01")
    assert running is not None and (running.state, running.attempts, running.run_id) == (TaskState.RUNNING, 1, run_id)
    assert running.output_fingerprint is None
    clock.advance(2)
    state.succeed(run_id, attempt, "up@2026-01", _output("up@2026-01", rows=7))
    done = state.task("up@2026-01")
    assert done is not None
    assert (done.state, done.rows, done.output_path, done.error) == (
        TaskState.SUCCEEDED, 7, "/out/pair/up@2026-01.json", None,
    )
    assert done.output_fingerprint == _output("up@2026-01").fingerprint
    assert (done.started_at, done.finished_at, done.materialized_at) == (
        START, START + timedelta(seconds=2), START + timedelta(seconds=2),
    )
    assert done.materialized_run_id == run_id
    assert state.task("up@2026-02") is None
    assert set(state.tasks()) == {"up@2026-01"}


def test_every_attempt_is_kept_in_the_history(store: Store, clock: VirtualClock) -> None:
    state = PipelineState(store, "pair")
    run_id = state.open_run({})
    first = state.start_attempt(run_id, "up@2026-01", 1)
    clock.advance(1)
    state.fail(run_id, first, "up@2026-01", "ValueError: flaky source")
    failed = state.task("up@2026-01")
    assert failed is not None and (failed.state, failed.error) == (TaskState.FAILED, "ValueError: flaky source")
    clock.advance(10)
    second = state.start_attempt(run_id, "up@2026-01", 2)
    clock.advance(1)
    state.succeed(run_id, second, "up@2026-01", _output("up@2026-01"))
    history = state.history(task="up@2026-01")
    assert [(a.run_id, a.attempt, a.state, a.error) for a in history] == [
        (run_id, 1, TaskState.FAILED, "ValueError: flaky source"),
        (run_id, 2, TaskState.SUCCEEDED, None),
    ]
    assert [(a.started_at, a.finished_at) for a in history] == [
        (START, START + timedelta(seconds=1)),
        (START + timedelta(seconds=11), START + timedelta(seconds=12)),
    ]
    done = state.task("up@2026-01")
    assert done is not None and (done.state, done.attempts, done.error) == (TaskState.SUCCEEDED, 2, None)
    assert state.history(run_id=run_id + 1) == []


def test_a_failure_keeps_the_last_good_checkpoint(store: Store) -> None:
    state = PipelineState(store, "pair")
    first_run = state.open_run({})
    _succeed(state, first_run, "up@2026-01")
    second_run = state.open_run({}, invalidate=["up@2026-01"])
    assert state.task("up@2026-01").state is TaskState.PENDING  # type: ignore[union-attr]
    attempt = state.start_attempt(second_run, "up@2026-01", 1)
    state.fail(second_run, attempt, "up@2026-01", "boom")
    record = state.task("up@2026-01")
    assert record is not None
    assert (record.state, record.run_id, record.materialized_run_id) == (TaskState.FAILED, second_run, first_run)
    assert record.output_fingerprint == _output("up@2026-01").fingerprint


def test_reads_are_recorded_once_each_with_whether_the_graph_declares_them(store: Store) -> None:
    state = PipelineState(store, "pair")
    run_id = state.open_run({})
    reads = [
        _read("down@2026-02", "up", "2026-02"),
        _read("down@2026-02", "up", "2026-01", declared=False),
    ]
    first = state.start_attempt(run_id, "down@2026-02", 1)
    state.fail(run_id, first, "down@2026-02", "boom", reads)
    second = state.start_attempt(run_id, "down@2026-02", 2)
    state.succeed(run_id, second, "down@2026-02", _output("down@2026-02"), reads)  # the same reads again
    recorded = state.reads(run_id=run_id)
    assert [(r.task, r.read_task, r.declared) for r in recorded] == [
        ("down@2026-02", "up@2026-01", False),
        ("down@2026-02", "up@2026-02", True),
    ]
    assert state.reads(task="down@2026-01") == []
    assert PipelineState(store, "other").reads() == []
    assert state.materialized_reads() == {"down@2026-02": ["up@2026-01", "up@2026-02"]}


def test_blocked_tasks_name_the_failed_upstream(store: Store) -> None:
    state = PipelineState(store, "pair")
    run_id = state.open_run({})
    _succeed(state, run_id, "down@2026-01")
    state.block(run_id, {"down@2026-01": "upstream up@2026-01 failed", "down@2026-02": "upstream up@2026-02 failed"})
    tasks = state.tasks()
    assert {name: (record.state, record.error) for name, record in tasks.items()} == {
        "down@2026-01": (TaskState.BLOCKED, "upstream up@2026-01 failed"),
        "down@2026-02": (TaskState.BLOCKED, "upstream up@2026-02 failed"),
    }
    assert tasks["down@2026-01"].attempts == 1 and tasks["down@2026-02"].attempts == 0
    assert state.history(task="down@2026-02") == []


def test_one_wave_records_ends_blocks_and_starts_together(store: Store, clock: VirtualClock) -> None:
    state = PipelineState(store, "pair")
    run_id = state.open_run({})
    first, second = state.record(run_id, started=[("up@2026-01", 1), ("up@2026-02", 1)])
    assert first != second
    assert {name: record.state for name, record in state.tasks().items()} == {
        "up@2026-01": TaskState.RUNNING, "up@2026-02": TaskState.RUNNING,
    }
    clock.advance(3)
    nothing = Output(path=None, fingerprint=EMPTY_FINGERPRINT, rows=0)  # the stage returned None
    (third,) = state.record(
        run_id,
        ended=[
            AttemptEnd(
                attempt_id=first, task="up@2026-01", finished_at=clock.now(), output=nothing,
                reads=(_read("up@2026-01", "up", "2026-02", declared=False),),
            ),
            AttemptEnd(attempt_id=second, task="up@2026-02", finished_at=clock.now(), error="boom"),
        ],
        blocked={"down@2026-02": "upstream up@2026-02 failed"},
        started=[("down@2026-01", 1)],
    )
    tasks = state.tasks()
    done = tasks["up@2026-01"]
    assert (done.state, done.output_path, done.output_fingerprint, done.rows, done.materialized_run_id) == (
        TaskState.SUCCEEDED, None, EMPTY_FINGERPRINT, 0, run_id,
    )
    assert done.finished_at == START + timedelta(seconds=3)
    assert (tasks["up@2026-02"].state, tasks["up@2026-02"].error) == (TaskState.FAILED, "boom")
    assert (tasks["down@2026-02"].state, tasks["down@2026-02"].error) == (
        TaskState.BLOCKED, "upstream up@2026-02 failed",
    )
    assert (tasks["down@2026-01"].state, tasks["down@2026-01"].started_at) == (
        TaskState.RUNNING, START + timedelta(seconds=3),
    )
    history = state.history(run_id=run_id)
    assert [(a.id, a.task, a.state) for a in history] == [
        (first, "up@2026-01", TaskState.SUCCEEDED),
        (second, "up@2026-02", TaskState.FAILED),
        (third, "down@2026-01", TaskState.RUNNING),
    ]
    assert [(r.task, r.read_task, r.declared) for r in state.reads(run_id=run_id)] == [
        ("up@2026-01", "up@2026-02", False),
    ]
    assert state.record(run_id) == []  # nothing to record


def test_checkpoints_are_the_rows_state_output_and_materializing_run(store: Store, clock: VirtualClock) -> None:
    """What a plan reads (``checkpoints``) says what the whole rows say, for every kind of row."""
    state = PipelineState(store, "pair")
    first = state.open_run({})
    _succeed(state, first, "up@2026-01")  # an output file
    started, = state.record(first, started=[("up@2026-02", 1)])
    nothing = Output(path=None, fingerprint=EMPTY_FINGERPRINT, rows=0)  # the stage returned None
    state.record(first, ended=[AttemptEnd(attempt_id=started, task="up@2026-02", finished_at=clock.now(), output=nothing)])
    second = state.open_run({}, invalidate=["up@2026-01"])
    attempt = state.start_attempt(second, "up@2026-01", 1)
    state.fail(second, attempt, "up@2026-01", "boom")  # failed, its last good checkpoint kept
    state.block(second, {"down@2026-01": "upstream up@2026-01 failed"})
    state.record(second, started=[("down@2026-02", 1)])
    rows = state.tasks()
    assert state.checkpoints() == {
        name: (row.state, row.output_path is not None, row.materialized_run_id) for name, row in rows.items()
    }
    assert state.checkpoints() == {
        "up@2026-01": (TaskState.FAILED, True, first),
        "up@2026-02": (TaskState.SUCCEEDED, False, first),
        "down@2026-01": (TaskState.BLOCKED, False, None),
        "down@2026-02": (TaskState.RUNNING, False, None),
    }
    assert PipelineState(store, "other").checkpoints() == {}


def test_a_held_connection_still_commits_every_wave(store: Store, clock: VirtualClock) -> None:
    state = PipelineState(store, "pair")
    run_id = state.open_run({})
    with state.holding_connection():
        (attempt,) = state.record(run_id, started=[("up@2026-01", 1)])
        # Read through another connection: the wave is committed, not waiting in an open transaction.
        assert state.task("up@2026-01").state is TaskState.RUNNING  # type: ignore[union-attr]
        clock.advance(1)
        end = AttemptEnd(attempt_id=attempt, task="up@2026-01", finished_at=clock.now(), output=_output("up@2026-01"))
        state.record(run_id, ended=[end])
        assert state.task("up@2026-01").state is TaskState.SUCCEEDED  # type: ignore[union-attr]
    state.start_attempt(run_id, "up@2026-02", 1)  # and without it, a connection from the pool again
    assert state.task("up@2026-02").state is TaskState.RUNNING  # type: ignore[union-attr]


def test_a_new_run_closes_what_a_killed_run_left_open(store: Store, clock: VirtualClock) -> None:
    state = PipelineState(store, "pair")
    killed = state.open_run({})
    _succeed(state, killed, "up@2026-01")
    state.start_attempt(killed, "up@2026-02", 1)  # then the process dies
    clock.advance(60)
    restart = state.open_run({"mode": "resume"})
    runs = {run.id: run for run in state.runs()}
    assert (runs[killed].state, runs[killed].finished_at) == (RunState.INTERRUPTED, START + timedelta(seconds=60))
    assert runs[restart].state is RunState.RUNNING
    interrupted = state.task("up@2026-02")
    assert interrupted is not None and interrupted.state is TaskState.FAILED
    assert "interrupted" in (interrupted.error or "")
    (attempt,) = state.history(task="up@2026-02")
    assert (attempt.state, attempt.finished_at) == (TaskState.FAILED, START + timedelta(seconds=60))
    assert state.task("up@2026-01").state is TaskState.SUCCEEDED  # type: ignore[union-attr]


def test_status_lists_every_task_and_the_stale_ones(store: Store) -> None:
    pipeline = _pipeline()
    state = PipelineState(store, "pair")
    assert status(store, pipeline).tasks == dict.fromkeys(
        ["up@2026-01", "up@2026-02", "up@2026-03", "down@2026-01", "down@2026-02", "down@2026-03"],
        TaskState.PENDING,
    )
    first = state.open_run({})
    for month in ("2026-01", "2026-02", "2026-03"):
        _succeed(state, first, f"up@{month}")
        _succeed(state, first, f"down@{month}", [_read(f"down@{month}", "up", month)])
    # down@2026-03 also read up@2026-02, which its stage does not declare: lineage still tracks it.
    _succeed(state, first, "down@2026-03", [_read("down@2026-03", "up", "2026-02", declared=False)])
    assert status(store, pipeline).green
    second = state.open_run({})
    _succeed(state, second, "up@2026-02")  # re-materialized after its readers
    current = status(store, pipeline)
    assert current.stale == ("down@2026-02", "down@2026-03")
    assert current.counts[TaskState.SUCCEEDED] == 6 and not current.green
    assert current.to_json()["stale"] == ["down@2026-02", "down@2026-03"]
    _succeed(state, second, "down@2026-02")
    assert status(store, pipeline).stale == ("down@2026-03",)
