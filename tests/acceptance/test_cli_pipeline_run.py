"""``vardiya pipeline run|status|resume|rerun|backfill`` on the meter example, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, run_cli

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "meter_pipeline.py")
PIPE = f"{EXAMPLE}:pipeline"
MISSING_EDGE = f"{EXAMPLE}:pipeline_missing_edge"
RUN_KEYS = {"run_id", "ran", "succeeded", "failed", "blocked", "skipped"}


def _json(result):  # type: ignore[no-untyped-def]
    assert result.stdout, result.stderr
    return json.loads(result.stdout)


def test_drill_blocks_descendants_then_resume_turns_it_green(tmp_path: Path) -> None:
    db = ["--db", f"sqlite:///{tmp_path / 'vardiya.db'}"]
    first = run_cli("pipeline", "run", PIPE, *db, "--inject-failure", "clean@2026-06", "--json", cwd=tmp_path)
    assert first.code == 1, first.stderr
    document = _json(first)
    assert set(document) >= RUN_KEYS
    assert document["failed"] == ["clean@2026-06"]
    assert sorted(document["blocked"]) == sorted(
        ["consumption@2026-06", "consumption@2026-07", "summary@2026-06", "summary@2026-07"]
    )
    assert len(document["succeeded"]) == 43

    status = run_cli("pipeline", "status", PIPE, *db, "--json", "--plot", "grid.svg", cwd=tmp_path)
    assert status.code == 0
    states = _json(status)["tasks"]
    assert states["clean@2026-06"] == "failed" and states["summary@2026-07"] == "blocked"
    assert (tmp_path / "grid.svg").read_text().count('data-state="blocked"') >= 4

    preview = run_cli("pipeline", "resume", PIPE, *db, "--dry-run", "--json", cwd=tmp_path)
    assert preview.code == 0, preview.stderr
    planned = _json(preview)
    assert planned["resumes"] == document["run_id"] and len(planned["skipped"]) == 43
    people = run_cli("pipeline", "resume", PIPE, *db, "--dry-run", cwd=tmp_path, env={"COLUMNS": "200"})
    assert "would run 5 task(s) and skip 43 done; nothing was run" in people.stdout and "  summary@2026-07" in people.stdout
    assert _json(run_cli("pipeline", "status", PIPE, *db, "--json", cwd=tmp_path))["tasks"] == states  # ran nothing
    resumed = run_cli("pipeline", "resume", PIPE, *db, "--json", cwd=tmp_path)
    assert resumed.code == 0, resumed.stderr
    assert sorted(_json(resumed)["ran"]) == sorted(["clean@2026-06", *document["blocked"]])
    assert _json(resumed)["ran"] == planned["to_run"]  # the dry run's list, in its order
    final = _json(run_cli("pipeline", "status", PIPE, *db, "--json", cwd=tmp_path))
    assert set(final["tasks"].values()) == {"succeeded"} and final["stale"] == []

    again = run_cli("pipeline", "rerun", PIPE, *db, "--task", "clean@2026-03", "--json", cwd=tmp_path)
    assert again.code == 0, again.stderr
    assert sorted(_json(again)["ran"]) == sorted(
        ["clean@2026-03", "consumption@2026-03", "consumption@2026-04", "summary@2026-03", "summary@2026-04"]
    )


def test_backfill_and_people_output(tmp_path: Path) -> None:
    db = ["--db", f"sqlite:///{tmp_path / 'vardiya.db'}"]
    result = run_cli("pipeline", "backfill", PIPE, *db, "--from", "2026-01", "--to", "2026-03", "--max-concurrent", "2", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "succeeded" in result.stdout and "12" in result.stdout  # 4 stages x 3 months


def test_missing_edge_fails_in_strict_mode_and_warns_without(tmp_path: Path) -> None:
    strict = run_cli("pipeline", "run", MISSING_EDGE, "--db", f"sqlite:///{tmp_path / 'a.db'}", "--strict", "--json", cwd=tmp_path)
    assert strict.code == 1
    document = _json(strict)
    assert "consumption@2026-03" in document["failed"]
    assert "clean@2026-02" in document["errors"]["consumption@2026-03"]
    lenient = run_cli("pipeline", "run", MISSING_EDGE, "--db", f"sqlite:///{tmp_path / 'b.db'}", "--json", cwd=tmp_path)
    assert lenient.code == 0
    reads = _json(lenient)["undeclared_reads"]
    assert len(reads) == 11 and all(read["task"].startswith("consumption@") for read in reads)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["run", PIPE, "--partitions", "2026-05..2027-02"], "2027-02"),
        (["run", PIPE, "--task", "clen@2026-06"], "clean@2026-06"),
        (["rerun", PIPE, "--task", "nothing@2026-01"], "no task"),
        (["run", f"{EXAMPLE}:nope"], "has no attribute"),
    ],
    ids=["range-outside", "unknown-task-hint", "unknown-rerun-task", "bad-pipe"],
)
def test_bad_pipeline_input(tmp_path: Path, arguments: list[str], fragment: str) -> None:
    result = run_cli("pipeline", *arguments, "--db", f"sqlite:///{tmp_path / 'vardiya.db'}", cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "out").exists()


def test_a_resume_dry_run_without_a_run_is_refused_in_one_line(tmp_path: Path) -> None:
    db = ["--db", f"sqlite:///{tmp_path / 'vardiya.db'}"]
    assert run_cli("db", "upgrade", *db, cwd=tmp_path).code == 0
    refused = run_cli("pipeline", "resume", PIPE, *db, "--dry-run", cwd=tmp_path)
    assert_one_line_error(refused, "pipeline 'meters' has no run to resume; start one with a run first")
