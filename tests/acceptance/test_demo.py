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


def test_demo_for_people_prints_tables_and_can_run_twice(tmp_path: Path) -> None:
    first = run_cli("demo", cwd=tmp_path)
    assert first.code == 0, first.stderr
    assert "dead letters" in first.stdout
    second = run_cli("demo", cwd=tmp_path)
    assert second.code == 0, second.stderr
    assert "enqueued 200 readings" in second.stdout
