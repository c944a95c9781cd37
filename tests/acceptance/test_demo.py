"""``vardiya demo`` runs end to end on a fresh SQLite store, as the README promises."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli


def test_demo_runs_and_reports_its_figures(tmp_path: Path) -> None:
    result = run_cli("demo", "--json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert Path(document["directory"]) == tmp_path / "vardiya-demo"
    primitives = document["sections"]["primitives"]
    assert primitives["enqueued"] == 200
    assert primitives["re_enqueued"] == 0
    assert primitives["succeeded"] == 198
    assert primitives["dead"] == 2
    assert primitives["ledger_done"] == 198
    assert primitives["ledger_failed"] == 2
    assert primitives["duplicate_detected"] is True
    assert (tmp_path / "vardiya-demo" / "vardiya.db").exists()

    slots = document["sections"]["slots"]
    assert slots["processed"] == 28_742 and slots["still_failed"] == 0 and slots["files"] == 28_742
    assert slots["recovered_slots"][0] == 3 and slots["recovered"] == 1_198
    assert slots["balance"]["max"] - slots["balance"]["min"] <= 1

    pipelines = document["sections"]["pipelines"]
    assert (pipelines["tasks"], pipelines["edges"], pipelines["blast_radius"]) == (48, 47, 4)
    assert pipelines["failed"] == ["clean@2026-06"] and len(pipelines["blocked"]) == 4
    assert sorted(pipelines["resumed"]) == sorted(pipelines["failed"] + pipelines["blocked"])
    assert pipelines["green"] is True and pipelines["undeclared_failures"] > 0


def test_demo_for_people_prints_tables_and_can_run_twice(tmp_path: Path) -> None:
    first = run_cli("demo", cwd=tmp_path)
    assert first.code == 0, first.stderr
    assert "dead letters" in first.stdout
    second = run_cli("demo", cwd=tmp_path)
    assert second.code == 0, second.stderr
    assert "enqueued 200 readings" in second.stdout
