"""The dashboard's background runs: one per pipeline at a time, done with a result or failed with the error."""

from __future__ import annotations

import threading

import pytest

from vardiya.errors import InvalidInput
from vardiya.ui.runs import BackgroundRuns, RunBusy, RunPhase


def test_a_run_ends_done_with_its_result_and_a_second_run_of_the_pipeline_waits_for_it() -> None:
    runs = BackgroundRuns()
    release = threading.Event()

    def slow() -> dict[str, object]:
        release.wait(30)
        return {"run_id": 7}

    first = runs.start("grid", "rerun", "clean@north", slow)
    assert runs.get(first.id) is not None and runs.get(first.id).phase is RunPhase.RUNNING  # type: ignore[union-attr]
    with pytest.raises(RunBusy, match="pipeline 'grid' is already running \\(rerun of clean@north, run 1"):
        runs.start("grid", "resume", None, dict)
    other = runs.start("other", "resume", None, lambda: {"run_id": 1})  # another pipeline is not held up
    release.set()
    runs.wait(30)
    done = runs.get(first.id)
    assert done is not None and done.phase is RunPhase.DONE and done.result == {"run_id": 7} and done.error is None
    assert runs.get(other.id).phase is RunPhase.DONE  # type: ignore[union-attr]
    again = runs.start("grid", "resume", None, lambda: {"run_id": 8})  # free again once the first ended
    runs.wait(30)
    assert again.id == 3 and runs.get(again.id).to_json()["phase"] == "done"  # type: ignore[union-attr]


def test_a_run_that_raises_is_failed_with_its_one_line_error() -> None:
    runs = BackgroundRuns()

    def broken() -> dict[str, object]:
        raise InvalidInput("the upstream load@north is not done;\n run it first")

    started = runs.start("grid", "resume", None, broken)
    runs.wait(30)
    found = runs.get(started.id)
    assert found is not None and found.phase is RunPhase.FAILED and found.result is None
    assert found.error == "the upstream load@north is not done; run it first"
    assert runs.get(99) is None


def test_the_server_forgets_the_oldest_finished_runs_only() -> None:
    runs = BackgroundRuns(kept=2)
    for number in range(4):
        runs.start(f"p{number}", "resume", None, dict)
        runs.wait(30)
    assert [runs.get(run_id) is not None for run_id in (1, 2, 3, 4)] == [False, False, True, True]
