"""The dashboard's own store reads, on both backends: one task's failed attempts, newest first."""

from __future__ import annotations

from pathlib import Path

from vardiya.pipeline import Pipeline, Static, rerun, run_pipeline
from vardiya.store import Store
from vardiya.store.ui_reads import task_failures


def test_a_tasks_failures_are_its_own_newest_first_with_tracebacks(store: Store, tmp_path: Path) -> None:
    pipeline = Pipeline("meters")
    attempts = {"north": 0}

    @pipeline.stage(partitions=Static(keys=["north", "south"]))
    def load(context: object) -> list[dict[str, int]]:
        if context.partition == "north":
            attempts["north"] += 1
            raise OSError(f"meter feed unreachable ({attempts['north']})")
        return []

    assert run_pipeline(store, pipeline, root=tmp_path).failed == ("load@north",)
    assert rerun(store, pipeline, "load@north", root=tmp_path).failed == ("load@north",)
    found = task_failures(store, "meters", "load@north")
    assert [failure.error for failure in found] == ["OSError: meter feed unreachable (2)", "OSError: meter feed unreachable (1)"]
    assert all(failure.traceback and "in load" in failure.traceback for failure in found)
    assert found[0].run_id > found[1].run_id
    assert task_failures(store, "meters", "load@south") == []
    assert task_failures(store, "other", "load@north") == []
    assert len(task_failures(store, "meters", "load@north", limit=1)) == 1
