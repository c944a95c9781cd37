"""RunOptions: a pipeline run's options as one frozen value, the same document the run's row keeps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vardiya import InvalidInput
from vardiya.pipeline import RunMode, RunOptions


def test_the_inputs_are_normalised_when_made(tmp_path: Path) -> None:
    options = RunOptions(root=tmp_path / "out", partitions="2026-01..2026-03", tasks="clean@2026-01")  # type: ignore[arg-type]
    assert options.root == os.path.abspath(tmp_path / "out")
    assert options.partitions == ("2026-01", "2026-03")
    assert options.tasks == ("clean@2026-01",)
    assert RunOptions(root="x", partitions="2026-05").partitions == ("2026-05", "2026-05")  # type: ignore[arg-type]


def test_to_json_and_from_json_round_trip(tmp_path: Path) -> None:
    options = RunOptions(
        mode=RunMode.BACKFILL, root=str(tmp_path), partitions=("a", "b"), tasks=("t",), concurrency=3,
        fail_fast=True, strict=True, inject_failure=("t",), plan_upstream=False, started_by={"trigger": "nightly"},
        resumes=7,
    )
    document = options.to_json()
    assert document["mode"] == "backfill" and document["partitions"] == ["a", "b"]
    assert document["started_by"] == {"trigger": "nightly"} and document["resumes"] == 7
    assert RunOptions.from_json(document) == options


def test_a_document_of_an_older_run_reads_with_defaults(tmp_path: Path) -> None:
    options = RunOptions.from_json({"mode": "run", "root": str(tmp_path)})
    assert (options.concurrency, options.fail_fast, options.plan_upstream, options.tasks) == (1, False, True, None)
    assert "started_by" not in options.to_json() and "resumes" not in options.to_json()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be a whole number of at least 1"),
        ({"concurrency": 0, "mode": RunMode.BACKFILL}, "max_concurrent must be a whole number"),
        ({"concurrency": 2.0}, "concurrency must be a whole number"),
        ({"root": ""}, "needs a root directory"),
        ({"tasks": [1]}, "tasks must name tasks as strings"),
        ({"strict": "yes"}, "strict must be True or False"),
        ({"mode": "sideways"}, "a run's mode is one of run, resume, rerun, backfill"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        RunOptions(**{"root": "out", **options})  # type: ignore[arg-type]
