"""The stage x partition grid: valid SVG, one cell per task coloured by its state, arrows across partitions."""

from __future__ import annotations

import sys
import types
import xml.etree.ElementTree as ET
from enum import Enum
from pathlib import Path

import pytest

from tests.unit.test_pipeline_graph import MONTHS, STAGES, meter_pipeline, noop
from vardiya.errors import InvalidInput
from vardiya.pipeline import (
    Monthly,
    Pipeline,
    Stage,
    Static,
    TaskGraph,
    all_partitions,
    build_graph,
    offset,
    same,
)
from vardiya.pipeline.grid import DECLARED, STALE_OUTLINE, STATE_COLOURS, grid_svg, write_grid

SVG = "{http://www.w3.org/2000/svg}"
RUN_STATES = ["pending", "running", "succeeded", "failed", "blocked", "skipped", "stale"]


@pytest.fixture(scope="module")
def graph() -> TaskGraph:
    return build_graph(meter_pipeline())


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.tag == f"{SVG}svg"
    return root


def cells(root: ET.Element) -> dict[str, ET.Element]:
    found: dict[str, ET.Element] = {}
    for rect in root.iter(f"{SVG}rect"):
        task = rect.get("data-task")
        if task is not None:
            assert task not in found, f"two cells for {task}"
            found[task] = rect
    return found


def edges(root: ET.Element) -> list[tuple[str | None, str | None, str]]:
    return [
        (path.get("data-from"), path.get("data-to"), path.get("d", ""))
        for path in root.iter(f"{SVG}path")
        if path.get("class") == "edge"
    ]


def legend(root: ET.Element) -> list[str]:
    return [str(rect.get("data-legend")) for rect in root.iter(f"{SVG}rect") if rect.get("class") == "swatch"]


def box(rect: ET.Element) -> tuple[float, float, float]:
    return float(rect.get("x", "nan")), float(rect.get("y", "nan")), float(rect.get("width", "nan"))


def test_one_declared_cell_per_task_when_no_state_is_given(graph: TaskGraph) -> None:
    root = parse(grid_svg(graph, title="meters"))
    found = cells(root)
    assert sorted(found) == sorted(graph.names) and len(found) == 48
    assert {rect.get("data-state") for rect in found.values()} == {DECLARED}
    assert {rect.get("fill") for rect in found.values()} == {STATE_COLOURS[DECLARED][0]}
    assert legend(root) == [DECLARED]
    title = root.find(f"{SVG}title")
    assert title is not None and title.text == "meters"


def test_rows_are_stages_in_declaration_order_and_columns_are_months_in_order(graph: TaskGraph) -> None:
    found = cells(parse(grid_svg(graph, title="meters")))
    for stage in STAGES:
        row = [box(found[f"{stage}@{month}"]) for month in MONTHS]
        assert len({y for _, y, _ in row}) == 1, stage  # one row per stage
        assert [x for x, _, _ in row] == sorted(x for x, _, _ in row)  # months left to right
    tops = [box(found[f"{stage}@2026-01"])[1] for stage in STAGES]
    assert tops == sorted(tops) and len(set(tops)) == 4
    for month in MONTHS:  # one column per month, shared by every stage
        assert len({box(found[f"{stage}@{month}"])[0] for stage in STAGES}) == 1


def test_cells_are_coloured_by_state_and_tasks_left_out_are_pending(graph: TaskGraph) -> None:
    given = {
        "ingest@2026-01": "skipped",
        "ingest@2026-02": "succeeded",
        "clean@2026-06": "failed",
        "consumption@2026-06": "blocked",
        "ingest@2026-12": "running",
        "summary@2026-03": "stale",
    }
    root = parse(grid_svg(graph, given, title="run"))
    found = cells(root)
    for task, rect in found.items():
        state = given.get(task, "pending")
        assert rect.get("data-state") == state, task
        assert rect.get("fill") == STATE_COLOURS[state][0], task
    assert found["summary@2026-03"].get("stroke") == STALE_OUTLINE
    assert found["clean@2026-06"].get("stroke") != STALE_OUTLINE
    assert len({STATE_COLOURS[state][0] for state in RUN_STATES[:-1]}) == 6  # stale is succeeded, outlined
    assert legend(root) == RUN_STATES


def test_stale_tasks_keep_their_fill_and_get_a_yellow_outline(graph: TaskGraph) -> None:
    states = dict.fromkeys(graph.names, "succeeded")
    found = cells(parse(grid_svg(graph, states, title="run", stale=["summary@2026-05"])))
    stale = found["summary@2026-05"]
    assert stale.get("data-state") == "succeeded" and stale.get("data-stale") == "true"
    assert stale.get("fill") == STATE_COLOURS["succeeded"][0] and stale.get("stroke") == STALE_OUTLINE
    assert [task for task, rect in found.items() if rect.get("data-stale")] == ["summary@2026-05"]


def test_states_may_be_an_enum_of_strings(graph: TaskGraph) -> None:
    class State(str, Enum):  # like store.schema.TaskState: str() of a member is not its value
        FAILED = "failed"

    found = cells(parse(grid_svg(graph, {"clean@2026-06": State.FAILED}, title="run")))
    assert found["clean@2026-06"].get("data-state") == "failed"


def test_an_unknown_state_or_task_is_refused(graph: TaskGraph) -> None:
    with pytest.raises(InvalidInput, match=r"'clean@2026-06' has state 'done'.*succeeded"):
        grid_svg(graph, {"clean@2026-06": "done"}, title="run")
    with pytest.raises(InvalidInput, match=r"no task 'clen@2026-06'.*did you mean 'clean@2026-06'"):
        grid_svg(graph, {"clen@2026-06": "failed"}, title="run")
    with pytest.raises(InvalidInput, match=r"no task 'summary@2027-01'"):
        grid_svg(graph, {}, title="run", stale=["summary@2027-01"])


def test_only_cross_partition_edges_are_drawn_as_arrows(graph: TaskGraph) -> None:
    root = parse(grid_svg(graph, title="meters"))
    drawn = edges(root)
    expected = [(f"clean@{MONTHS[k]}", f"consumption@{MONTHS[k + 1]}") for k in range(11)]
    assert sorted((up, down) for up, down, _ in drawn) == sorted(expected)
    found = cells(root)
    for up, down, shape in drawn:  # from the bottom of the upstream cell to the top of the downstream one
        move, _, start_y, line, _, end_y = shape.split()
        assert (move, line) == ("M", "L")
        assert up is not None and down is not None
        assert float(start_y) == pytest.approx(box(found[up])[1] + float(found[up].get("height", "nan")))
        assert float(end_y) == pytest.approx(box(found[down])[1])


def test_an_unpartitioned_stage_is_one_wide_cell_and_same_row_edges_arc() -> None:
    months = Monthly(start="2026-01", end="2026-04")
    pipeline = Pipeline(
        "ledger",
        [
            Stage(name="ingest", fn=noop, partitions=months),
            Stage(name="balance", fn=noop, partitions=months, depends_on={"ingest": same(), "balance": offset(-1)}),
            Stage(name="report", fn=noop, depends_on={"balance": all_partitions()}),
        ],
    )
    graph = build_graph(pipeline)
    root = parse(grid_svg(graph, title="ledger"))
    found = cells(root)
    assert len(found) == 9
    x, _, width = box(found["report"])
    first_x, _, _ = box(found["ingest@2026-01"])
    last_x, _, last_width = box(found["ingest@2026-04"])
    assert x == pytest.approx(first_x) and x + width == pytest.approx(last_x + last_width)
    drawn = {(up, down): shape for up, down, shape in edges(root)}
    assert len(drawn) == 3 + 4  # balance to the next month; every month into the report
    assert " Q " in drawn[("balance@2026-01", "balance@2026-02")]  # the same row: an arc above it
    fan_in = drawn[("balance@2026-03", "report")].split()
    assert fan_in[1] == fan_in[4]  # vertical, at the upstream column


def test_columns_sort_periods_and_keep_static_keys_in_their_order() -> None:
    early, late = Monthly(start="2026-03", end="2026-05"), Monthly(start="2026-01", end="2026-04")
    stages = [Stage(name="a", fn=noop, partitions=early), Stage(name="b", fn=noop, partitions=late)]
    graph = build_graph(Pipeline("p", stages))
    found = cells(parse(grid_svg(graph, title="p")))
    xs = {month: box(found[f"b@{month}"])[0] for month in ("2026-01", "2026-02", "2026-03", "2026-04")}
    assert list(xs.values()) == sorted(xs.values())
    assert box(found["a@2026-03"])[0] == pytest.approx(xs["2026-03"])
    regions = Static(keys=("west", "east", "north"))
    graph = build_graph(Pipeline("r", [Stage(name="load", fn=noop, partitions=regions)]))
    found = cells(parse(grid_svg(graph, title="r")))
    assert box(found["load@west"])[0] < box(found["load@east"])[0] < box(found["load@north"])[0]


def test_text_is_escaped(graph: TaskGraph) -> None:
    root = parse(grid_svg(graph, title='meters <&> "quoted"'))
    title = root.find(f"{SVG}title")
    assert title is not None and title.text == 'meters <&> "quoted"'
    assert 'meters &lt;&amp;&gt; "quoted"' in grid_svg(graph, title='meters <&> "quoted"')


def test_write_grid_writes_svg_and_refuses_other_suffixes(graph: TaskGraph, tmp_path: Path) -> None:
    svg = grid_svg(graph, title="meters")
    written = write_grid(tmp_path / "grid.svg", svg)
    assert written == tmp_path / "grid.svg" and len(cells(parse(written.read_text(encoding="utf-8")))) == 48
    with pytest.raises(InvalidInput, match=r"\.svg or \.png"):
        write_grid(tmp_path / "grid.pdf", svg)
    assert not (tmp_path / "grid.pdf").exists()


def test_png_without_cairosvg_says_to_use_svg(
    graph: TaskGraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cairosvg", None)  # import cairosvg now raises ImportError
    with pytest.raises(InvalidInput, match=r"cairosvg.*\.svg"):
        write_grid(tmp_path / "grid.png", grid_svg(graph, title="meters"))
    assert not (tmp_path / "grid.png").exists()


def test_png_with_cairosvg_converts(graph: TaskGraph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[bytes] = []
    fake = types.ModuleType("cairosvg")

    def svg2png(*, bytestring: bytes) -> bytes:
        received.append(bytestring)
        return b"\x89PNG fake"

    fake.svg2png = svg2png  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cairosvg", fake)
    write_grid(tmp_path / "grid.png", grid_svg(graph, title="meters"))
    assert (tmp_path / "grid.png").read_bytes() == b"\x89PNG fake"
    assert len(cells(parse(received[0].decode("utf-8")))) == 48


def test_a_graph_drawn_before_draws_as_a_fresh_one() -> None:
    """The layout is kept with the graph (``TaskGraph.derived``); nothing of a former call's states,
    stale marks or title may show in the next one."""
    kept = build_graph(meter_pipeline())
    first = dict.fromkeys(kept.names, "failed")
    grid_svg(kept, first, title="a long first title, wider than the grid's summary line, so the width moves " * 3,
             stale=kept.names[:5])
    grid_svg(kept, title="declared")
    states = {name: RUN_STATES[number % len(RUN_STATES)] for number, name in enumerate(kept.names)}
    stale = kept.names[3::7]
    again = grid_svg(kept, states, title="run 2", stale=stale)
    assert again == grid_svg(build_graph(meter_pipeline()), states, title="run 2", stale=stale)
    found = cells(parse(again))
    assert {task: rect.get("data-state") for task, rect in found.items()} == states
    assert {task for task, rect in found.items() if rect.get("data-stale")} == set(stale) | {
        task for task, state in states.items() if state == "stale"
    }
