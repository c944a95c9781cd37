"""Impact before anything fails: blast radius, rerun sets, every task's count, restarts with checkpoints."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.unit.test_pipeline_graph import MONTHS, meter_pipeline, noop, random_pipelines
from vardiya.errors import InvalidInput
from vardiya.pipeline import (
    Daily,
    Pipeline,
    Stage,
    TaskGraph,
    all_partitions,
    blast_radius,
    build_graph,
    descendant_counts,
    descendants,
    impact_all,
    offset,
    rerun_set,
    restart_after_failure,
    same,
    task_impact,
    window,
)


@pytest.fixture(scope="module")
def graph() -> TaskGraph:
    return build_graph(meter_pipeline())


def brute_force_descendants(graph: TaskGraph) -> dict[str, set[str]]:
    """Every task's descendants by a plain search over the edges, one task at a time."""
    below: dict[str, list[str]] = {task: [] for task in graph.names}
    for up, down in graph.edges():
        below[up].append(down)
    found: dict[str, set[str]] = {}
    for task in graph.names:
        seen: set[str] = set()
        stack = list(below[task])
        while stack:
            after = stack.pop()
            if after not in seen:
                seen.add(after)
                stack.extend(below[after])
        found[task] = seen
    return found


def test_clean_in_june_blocks_two_periods_of_consumption_and_summary(graph: TaskGraph) -> None:
    # consumption@07 reads clean@06 (offset -1); nothing reads consumption across periods, so it stops there.
    blocked = ["consumption@2026-06", "consumption@2026-07", "summary@2026-06", "summary@2026-07"]
    assert descendants(graph, "clean@2026-06") == blocked
    assert blast_radius(graph, "clean@2026-06") == 4
    assert rerun_set(graph, "clean@2026-06") == ["clean@2026-06", *blocked]
    assert task_impact(graph, "clean@2026-06").to_json() == {
        "task": "clean@2026-06",
        "blast_radius": 4,
        "blocked": blocked,
        "rerun_count": 5,
        "rerun": ["clean@2026-06", *blocked],
    }


def test_the_same_partition_variant_reports_a_smaller_blast_radius(graph: TaskGraph) -> None:
    variant = graph.variant_without_cross_partition_edges()
    assert descendants(variant, "clean@2026-06") == ["consumption@2026-06", "summary@2026-06"]
    assert task_impact(variant, "clean@2026-06").to_json()["rerun_count"] == 3


@pytest.mark.parametrize(
    ("task", "radius"),
    [
        ("ingest@2026-06", 5),
        ("ingest@2026-12", 3),  # no 2027-01 to carry the failure into
        ("clean@2026-12", 2),
        ("consumption@2026-01", 1),
        ("summary@2026-06", 0),
    ],
)
def test_blast_radius_by_hand(graph: TaskGraph, task: str, radius: int) -> None:
    assert blast_radius(graph, task) == radius


def test_impact_all_gives_every_count_and_the_total(graph: TaskGraph) -> None:
    # Per period: ingest 5, clean 4, consumption 1, summary 0; December has no next period: 3, 2, 1, 0.
    result = impact_all(graph)
    assert list(result.tasks) == graph.order
    assert result.tasks["ingest@2026-01"] == 5 and result.tasks["clean@2026-12"] == 2
    assert result.total == 11 * (5 + 4 + 1) + (3 + 2 + 1) == 116
    assert result.to_json() == {"tasks": result.tasks, "total": 116}
    assert [result.tasks[f"clean@{month}"] for month in MONTHS] == [4] * 11 + [2]
    assert impact_all(graph.variant_without_cross_partition_edges()).total == 12 * (3 + 2 + 1) == 72


def test_a_yearly_report_is_in_every_blast_radius() -> None:
    pipeline = meter_pipeline()
    pipeline.add(Stage(name="report", fn=noop, depends_on={"summary": all_partitions()}))
    graph = build_graph(pipeline)
    assert descendants(graph, "clean@2026-06")[-1] == "report"
    assert impact_all(graph).total == 116 + 48  # every monthly task also blocks the report
    assert task_impact(graph, "report").to_json()["blocked"] == []


def test_restart_with_checkpoints_runs_the_failed_task_and_what_it_blocked(graph: TaskGraph) -> None:
    restart = restart_after_failure(graph, "clean@2026-06")
    assert (restart.with_checkpoints, restart.without_checkpoints) == (5, 48)
    assert restart.to_json() == {
        "failed": "clean@2026-06",
        "blocked": ["consumption@2026-06", "consumption@2026-07", "summary@2026-06", "summary@2026-07"],
        "never_run": [],
        "with_checkpoints": 5,
        "without_checkpoints": 48,
        "saved": 43,
    }


def test_restart_runs_what_is_not_done(graph: TaskGraph) -> None:
    assert restart_after_failure(graph, "clean@2026-06", done=set()).with_checkpoints == 48
    # fail_fast stopped after January: February onward never ran, and consumption@07 was done earlier.
    done = {f"{stage}@2026-01" for stage in ("ingest", "clean", "consumption", "summary")}
    restart = restart_after_failure(graph, "clean@2026-06", done=done | {"consumption@2026-07"})
    assert "consumption@2026-07" not in restart.blocked
    assert restart.blocked == ("consumption@2026-06", "summary@2026-06", "summary@2026-07")
    assert restart.with_checkpoints == 48 - 5
    assert restart.never_run[0] == "ingest@2026-02"


def test_a_failed_task_cannot_be_done(graph: TaskGraph) -> None:
    with pytest.raises(InvalidInput, match="both failed and done"):
        restart_after_failure(graph, "clean@2026-06", done={"clean@2026-06"})


@pytest.mark.parametrize(
    ("task", "hint"),
    [
        ("clen@2026-06", "did you mean 'clean@2026-06'"),
        ("clean@2026-13", "stage 'clean' has partitions 2026-01..2026-12; did you mean"),
        ("nothing", "tasks are named stage@partition, e.g. 'ingest@2026-01'"),
    ],
)
def test_an_unknown_task_lists_close_names(graph: TaskGraph, task: str, hint: str) -> None:
    with pytest.raises(InvalidInput, match=f"no task '{task}'") as raised:
        task_impact(graph, task)
    assert hint in str(raised.value)
    with pytest.raises(InvalidInput):
        restart_after_failure(graph, "clean@2026-06", done={task})


@settings(max_examples=200)
@given(random_pipelines())
def test_impact_all_equals_brute_force_descendant_counts(pipeline: Pipeline) -> None:
    graph = build_graph(pipeline)
    expected = brute_force_descendants(graph)
    result = impact_all(graph)
    assert result.tasks == {task: len(expected[task]) for task in graph.order}
    assert result.total == sum(map(len, expected.values()))
    place = {task: number for number, task in enumerate(graph.order)}
    for task in graph.names:
        assert descendants(graph, task) == sorted(expected[task], key=place.__getitem__)


def test_exact_counts_on_a_wide_graph_with_windows_and_a_fan_in() -> None:
    days = Daily(start="2026-01-01", end="2026-03-31")
    stages = [Stage(name="s0", fn=noop, partitions=days)]
    for number in range(1, 8):
        mappings = [window(-3, 0)] if number % 3 == 0 else [same(), offset(-1)]
        upstream = {f"s{number - 1}": mappings}
        stages.append(Stage(name=f"s{number}", fn=noop, partitions=days, depends_on=upstream))
    fan_in = {"s7": all_partitions(), "s2": all_partitions()}
    stages.append(Stage(name="report", fn=noop, depends_on=fan_in))
    fan_out = {"report": all_partitions(), "s0": same()}
    stages.append(Stage(name="again", fn=noop, partitions=days, depends_on=fan_out))
    graph = build_graph(Pipeline("wide", stages))
    expected = brute_force_descendants(graph)
    counts = descendant_counts(graph)
    assert counts == [len(expected[task]) for task in graph.names]
    # Through the report, the first day reaches every task of "again": sets as wide as the graph.
    assert counts[graph.task_id("s0@2026-01-01")] > len(days)

