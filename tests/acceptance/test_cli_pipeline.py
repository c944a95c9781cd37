"""``vardiya pipeline graph|impact`` as a user runs it: JSON shapes of cli.md, tables for people, one-line errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, run_cli

GRAPH_FIELDS = {"stages", "tasks", "edges", "order"}
IMPACT_FIELDS = {"task", "blast_radius", "blocked", "rerun_count", "rerun"}
ALL_FIELDS = {"tasks", "total"}
SVG = "{http://www.w3.org/2000/svg}"

METERS = '''
from vardiya.pipeline import Monthly, Pipeline, offset, same

YEAR = Monthly(start="2026-01", end="2026-12")
meters = Pipeline("meters")


@meters.stage(partitions=YEAR)
def ingest(context):
    pass


@meters.stage(partitions=YEAR, depends_on={"ingest": same()})
def clean(context):
    pass


@meters.stage(partitions=YEAR, depends_on={"clean": [same(), offset(-1)]})
def consumption(context):
    pass


@meters.stage(partitions=YEAR, depends_on={"consumption": same()})
def summary(context):
    pass


not_a_pipeline = {"stages": ["ingest"]}
'''

BROKEN = '''
from vardiya.pipeline import Monthly, Pipeline, same

MONTHS = Monthly(start="2026-01", end="2026-03")

cycle = Pipeline("loop")


@cycle.stage(partitions=MONTHS, depends_on={"b": same()})
def a(context):
    pass


@cycle.stage(partitions=MONTHS, depends_on={"a": same()})
def b(context):
    pass


typo = Pipeline("typo")


@typo.stage(partitions=MONTHS)
def ingest(context):
    pass


@typo.stage(partitions=MONTHS, depends_on={"ingset": same()})
def clean(context):
    pass
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "meters.py").write_text(METERS, encoding="utf-8")
    (tmp_path / "broken.py").write_text(BROKEN, encoding="utf-8")
    syntax_error = "from vardiya.pipeline import Pipeline\nmeters = Pipeline('x'\n"
    (tmp_path / "syntax.py").write_text(syntax_error, encoding="utf-8")
    return tmp_path


def run_json(*args: str, cwd: Path) -> dict[str, object]:
    result = run_cli(*args, "--json", cwd=cwd)
    assert result.code == 0, (result.stdout, result.stderr)
    assert result.stderr == ""
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def assert_fits_80_columns(text: str) -> None:
    assert text.strip()
    assert max(len(line) for line in text.splitlines()) <= 80, text


# -- graph ----------------------------------------------------------------------------------------


def test_graph_json_has_48_tasks_47_edges_and_an_order_that_respects_them(project: Path) -> None:
    document = run_json("pipeline", "graph", "meters.py:meters", cwd=project)
    assert set(document) == GRAPH_FIELDS
    assert document["stages"] == ["ingest", "clean", "consumption", "summary"]
    assert document["tasks"] == 48 and document["edges"] == 47
    order = document["order"]
    assert isinstance(order, list) and len(order) == 48 and len(set(order)) == 48
    position = {task: place for place, task in enumerate(order)}
    months = [f"2026-{month:02d}" for month in range(1, 13)]
    edges = [(f"{up}@{month}", f"{down}@{month}") for month in months
             for up, down in (("ingest", "clean"), ("clean", "consumption"), ("consumption", "summary"))]
    edges += [(f"clean@{months[k]}", f"consumption@{months[k + 1]}") for k in range(11)]
    assert len(edges) == 47
    for up, down in edges:
        assert position[up] < position[down], (up, down)


def test_graph_plot_writes_a_grid_with_48_task_cells(project: Path) -> None:
    document = run_json("pipeline", "graph", "meters.py:meters", "--plot", "grid.svg", cwd=project)
    assert document["plot"] == "grid.svg" and document["tasks"] == 48
    root = ET.fromstring((project / "grid.svg").read_bytes())
    tasks = [rect.get("data-task") for rect in root.iter(f"{SVG}rect") if rect.get("data-task")]
    assert len(tasks) == 48 and len(set(tasks)) == 48
    assert "consumption@2026-07" in tasks
    arrows = [path for path in root.iter(f"{SVG}path") if path.get("class") == "edge"]
    assert len(arrows) == 11


def test_graph_for_people_is_a_table_within_80_columns(project: Path) -> None:
    result = run_cli("pipeline", "graph", "meters.py:meters", "--plot", "grid.svg", cwd=project)
    assert result.code == 0, result.stderr
    assert_fits_80_columns(result.stdout)
    assert "consumption" in result.stdout and "clean same(), offset(-1)" in result.stdout
    assert "48 tasks, 47 edges (11 across partitions)" in result.stdout
    assert "grid written to grid.svg" in result.stdout


def test_a_bad_plot_path_fails_before_anything_is_written(project: Path) -> None:
    assert_one_line_error(run_cli("pipeline", "graph", "meters.py:meters", "--plot", "grid.pdf", cwd=project), ".svg")
    assert not (project / "grid.pdf").exists()


# -- impact ---------------------------------------------------------------------------------------


def test_impact_of_clean_in_june_blocks_four_and_reruns_five(project: Path) -> None:
    document = run_json("pipeline", "impact", "meters.py:meters", "--task", "clean@2026-06", cwd=project)
    assert set(document) == IMPACT_FIELDS
    blocked = ["consumption@2026-06", "consumption@2026-07", "summary@2026-06", "summary@2026-07"]
    assert document == {
        "task": "clean@2026-06",
        "blast_radius": 4,
        "blocked": blocked,
        "rerun_count": 5,
        "rerun": ["clean@2026-06", *blocked],
    }


def test_without_cross_partition_edges_the_blast_radius_is_two(project: Path) -> None:
    document = run_json(
        "pipeline", "impact", "meters.py:meters", "--task", "clean@2026-06", "--same-partition-only", cwd=project
    )
    assert document["blast_radius"] == 2 and document["rerun_count"] == 3
    assert document["blocked"] == ["consumption@2026-06", "summary@2026-06"]


def test_impact_all_totals_116_and_72_without_cross_partition_edges(project: Path) -> None:
    document = run_json("pipeline", "impact", "meters.py:meters", "--all", cwd=project)
    assert set(document) == ALL_FIELDS
    tasks = document["tasks"]
    assert isinstance(tasks, dict) and len(tasks) == 48
    assert document["total"] == 116 == sum(tasks.values())
    assert tasks["clean@2026-06"] == 4 and tasks["ingest@2026-06"] == 5 and tasks["summary@2026-06"] == 0
    variant = run_json("pipeline", "impact", "meters.py:meters", "--all", "--same-partition-only", cwd=project)
    assert variant["total"] == 72
    assert variant["tasks"]["clean@2026-06"] == 2  # type: ignore[index]


def test_impact_for_people_lists_the_blocked_tasks_within_80_columns(project: Path) -> None:
    result = run_cli("pipeline", "impact", "meters.py:meters", "--task", "clean@2026-06", cwd=project)
    assert result.code == 0, result.stderr
    assert_fits_80_columns(result.stdout)
    for task in ("consumption@2026-06", "consumption@2026-07", "summary@2026-06", "summary@2026-07"):
        assert task in result.stdout
    assert "runs 5 tasks" in result.stdout


def test_impact_all_for_people_shows_the_ten_largest_and_the_total(project: Path) -> None:
    result = run_cli("pipeline", "impact", "meters.py:meters", "--all", cwd=project)
    assert result.code == 0, result.stderr
    assert_fits_80_columns(result.stdout)
    shown = [line for line in result.stdout.splitlines() if "@2026-" in line]
    assert len(shown) == 10 and all(" 5 " in line for line in shown)
    assert "total over 48 tasks" in result.stdout and "116" in result.stdout
    assert "1 more with blast radius 5" in result.stdout  # ingest@2026-11 ties the tenth


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ((), "--task T"),
        (("--all", "--task", "clean@2026-06"), "exclude each other"),
    ],
)
def test_impact_needs_exactly_one_of_task_and_all(project: Path, options: tuple[str, ...], fragment: str) -> None:
    result = run_cli("pipeline", "impact", "meters.py:meters", *options, "--json", cwd=project)
    assert_one_line_error(result, fragment, "--all")


def test_an_unknown_task_suggests_a_close_name(project: Path) -> None:
    result = run_cli("pipeline", "impact", "meters.py:meters", "--task", "clen@2026-06", "--json", cwd=project)
    assert_one_line_error(result, "no task 'clen@2026-06'", "did you mean 'clean@2026-06'")
    result = run_cli("pipeline", "impact", "meters.py:meters", "--task", "clean@2026-13", cwd=project)
    assert_one_line_error(result, "no task 'clean@2026-13'", "2026-01..2026-12")


# -- bad pipelines --------------------------------------------------------------------------------


def test_a_cycle_is_named(project: Path) -> None:
    for command in (("graph",), ("impact", "--all")):
        result = run_cli("pipeline", command[0], "broken.py:cycle", *command[1:], "--json", cwd=project)
        assert_one_line_error(result, "cycle", "a@2026-01 -> b@2026-01 -> a@2026-01")


def test_an_unknown_upstream_stage_is_named_with_a_hint(project: Path) -> None:
    result = run_cli("pipeline", "graph", "broken.py:typo", "--json", cwd=project)
    assert_one_line_error(result, "'ingset'", "did you mean 'ingest'")


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ("syntax.py:meters", ("does not import", "SyntaxError")),
        ("missing.py:meters", ("no such file 'missing.py'", "PIPE")),
        ("meters.py:nowhere", ("no attribute 'nowhere'", "PIPE")),
        ("no_such_module:meters", ("no module named 'no_such_module'", "PIPE")),
        ("meters.py", ("MODULE_OR_FILE:ATTR",)),
        ("meters.py:not_a_pipeline", ("is of type dict, not a vardiya Pipeline",)),
    ],
)
def test_a_pipe_that_is_not_a_pipeline_is_one_line(project: Path, spec: str, fragments: tuple[str, ...]) -> None:
    for command in (("graph",), ("impact", "--all")):
        line = assert_one_line_error(run_cli("pipeline", *command, spec, cwd=project), *fragments)
        assert "--app" not in line  # PIPE is an argument here, not the global option
