"""The stage x partition grid of a pipeline as a self-contained SVG (PNG when cairosvg is there).

Rows are the stages in declaration order, columns the partitions in order, and every task is one cell
filled by its state (an unpartitioned stage's one task is a cell as wide as the grid). Edges between
tasks of one partition are implied by the row order and not drawn. Edges across partitions
(``offset(-1)``, windows, fan-in, fan-out) are thin arrows from the upstream cell to the downstream
one: they are the edges a scheduler forgets, so the picture shows each of them.

Every task cell is a ``<rect class="task">`` carrying ``data-task`` and ``data-state`` (and
``data-stale="true"`` when marked stale), every arrow a ``<path class="edge">`` carrying ``data-from``
and ``data-to``, so the picture can be checked by machine.

Columns
    The union of the partitioned stages' keys. When every partitioned stage is monthly or daily the
    keys are sorted: each kind has one fixed-width spelling, so text order is time order (and a month
    sorts just before its days). Otherwise they keep their order of first appearance, stage by stage.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from xml.sax.saxutils import escape, quoteattr

from ..errors import InvalidInput
from ..svg import format_number, svg_text, write_svg
from .graph import TaskGraph
from .partitions import PartitionKind

__all__ = ["DECLARED", "STALE", "STALE_OUTLINE", "STATE_COLOURS", "grid_svg", "write_grid"]

#: The state of every cell when no run state is given: the graph as declared.
DECLARED = "declared"
#: A materialized task whose upstream was re-materialized after it (drawn green, outlined yellow).
STALE = "stale"
STALE_OUTLINE = "#e6b800"
#: Fill and outline of a cell, by the task state it shows (the run engine's states, plus the two above).
STATE_COLOURS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "pending": ("#c7c7c7", "#8c8c8c"),
        "running": ("#4c78a8", "#2d4a6b"),
        "succeeded": ("#2ca02c", "#1b681b"),
        "failed": ("#d62728", "#8c1a1b"),
        "blocked": ("#ff7f0e", "#b35909"),
        "skipped": ("#a6dba0", "#5f9e58"),
        STALE: ("#2ca02c", STALE_OUTLINE),
        DECLARED: ("#f4f4f4", "#9e9e9e"),
    }
)
_RUN_STATES = tuple(state for state in STATE_COLOURS if state != DECLARED)
_NOT_GIVEN = "pending"  # a task a run state leaves out has not run
_EDGE_COLOUR = "#444444"
_TIME_KINDS = (PartitionKind.MONTHLY, PartitionKind.DAILY)

_MARGIN = 16
_TITLE_HEIGHT = 54  # title and the line under it
_HEADER = 20  # partition keys above the first row
_ROW_HEIGHT = 26
_ROW_GAP = 20  # room for the arrows between rows
_GRID_WIDTH = 800  # cells shrink to fit this, down to _MIN_CELL
_MIN_CELL = 8.0
_MAX_CELL = 72.0
_CHAR_WIDTH = 7.0  # of 12 px sans-serif, roughly; enough to keep labels apart
_SWATCH = 12
_LEGEND_ROW = 22


def _columns(graph: TaskGraph) -> list[str]:
    """The partition keys the grid's columns stand for (see the module docstring)."""
    partitioned = [
        stage.partitions for stage in graph.stages if stage.partitions.kind is not PartitionKind.UNPARTITIONED
    ]
    keys = dict.fromkeys(key for partitions in partitioned for key in partitions.keys)
    if partitioned and all(partitions.kind in _TIME_KINDS for partitions in partitioned):
        return sorted(keys)
    return list(keys)


def _cell_states(graph: TaskGraph, states: Mapping[str, str] | None) -> list[str]:
    """The state each task id is drawn in; a task name or state the grid does not know is an error."""
    if states is None:
        return [DECLARED] * len(graph)
    drawn = [_NOT_GIVEN] * len(graph)
    ids = graph.ids
    values: dict[object, str] = {}  # each state given (an Enum member or a string) checked once, not per task
    for task, state in states.items():
        value = values.get(state)
        if value is None:
            value = values[state] = str(getattr(state, "value", state))  # an Enum of states draws as its values
            if value not in STATE_COLOURS:
                raise InvalidInput(
                    f"task {task!r} has state {value!r}, which a grid cannot draw; use one of {', '.join(STATE_COLOURS)}"
                )
        task_id = ids.get(task)
        drawn[graph.task_id(task) if task_id is None else task_id] = value  # task_id names an unknown task
    return drawn


def _legend(states: list[str], top: float, width: float) -> tuple[list[str], float]:
    """The colour key (and the arrow's meaning), flowed into rows within ``width``; returns its height."""
    entries = [(state, state) for state in states] + [("edge", "reads another partition")]
    parts, x, y = ['<g class="legend">'], float(_MARGIN), top
    for key, label in entries:
        item_width = _SWATCH + 6 + len(label) * _CHAR_WIDTH + 18
        if x + item_width > width - _MARGIN and x > _MARGIN:
            x, y = float(_MARGIN), y + _LEGEND_ROW
        if key == "edge":
            middle = y + _SWATCH / 2
            parts.append(
                f'<path class="legend-edge" d="M {format_number(x)} {format_number(middle)} H {format_number(x + _SWATCH)}" '
                f'stroke="{_EDGE_COLOUR}" stroke-width="1" marker-end="url(#arrow)"/>'
            )
        else:
            fill, outline = STATE_COLOURS[key]
            stroke_width = 2.5 if key == STALE else 1
            parts.append(
                f'<rect class="swatch" data-legend={quoteattr(key)} x="{format_number(x)}" y="{format_number(y)}" '
                f'width="{_SWATCH}" height="{_SWATCH}" fill="{fill}" stroke="{outline}" '
                f'stroke-width="{stroke_width}"/>'
            )
        parts.append(svg_text(x + _SWATCH + 6, y + _SWATCH - 1, label, class_="legend-label"))
        x += item_width
    parts.append("</g>")
    return parts, y + _SWATCH - top


class _Cell:
    """Where a task's cell is drawn: its box, its row, and whether it spans the grid (unpartitioned).

    A plain class with slots, not a frozen dataclass: the grid makes one per task (10,000 and more) and
    a frozen dataclass's ``__init__`` costs several times as much.
    """

    __slots__ = ("row", "wide", "width", "x", "y")

    def __init__(self, x: float, y: float, width: float, row: int, wide: bool) -> None:
        self.x, self.y, self.width, self.row, self.wide = x, y, width, row, wide

    @property
    def middle(self) -> float:
        return self.x + self.width / 2

    @property
    def bottom(self) -> float:
        return self.y + _ROW_HEIGHT


def _row_top(top: float, row: int) -> float:
    return top + row * (_ROW_HEIGHT + _ROW_GAP)


def _cells(graph: TaskGraph, column_of: Mapping[str, int], *, left: float, top: float, cell: float) -> list[_Cell]:
    """The cell of every task id, row by row (task ids run stage by stage, so the list is by id)."""
    span = max(1, len(column_of))
    inset = min(2.0, cell * 0.1)
    cells: list[_Cell] = []
    for row, stage in enumerate(graph.stages):
        wide = stage.partitions.kind is PartitionKind.UNPARTITIONED
        for key in stage.partitions.keys:
            column, columns = (0, span) if wide else (column_of[key], 1)
            cells.append(_Cell(left + column * cell + inset, _row_top(top, row), columns * cell - 2 * inset, row, wide))
    return cells


@dataclass(frozen=True, kw_only=True)
class _Layout:
    """The part of a grid that depends on the graph alone, made once per graph (``TaskGraph.derived``):
    where every cell, label and arrow goes. Only the cells' states, the title and the legend are
    drawn per call, which keeps a 10,000-task grid cheap enough for a page that redraws it."""

    #: The grid's right edge plus the margin, and the summary line under the title.
    right: float
    summary: str
    grid_bottom: float
    #: The partition keys over the columns, the stage names before the rows.
    labels: tuple[str, ...]
    #: Per task id, a cell's text up to its state (``<rect class="task" data-task="T"``), its box
    #: (``x="" y="" width=""``) and the start of its tooltip (``<title>T: ``).
    heads: tuple[str, ...]
    boxes: tuple[str, ...]
    tooltips: tuple[str, ...]
    #: The arrows across partitions.
    edges: tuple[str, ...]


def _layout(graph: TaskGraph) -> _Layout:
    """Where everything of ``graph``'s grid goes (see ``_Layout``)."""
    columns = _columns(graph)
    cell = min(_MAX_CELL, max(_MIN_CELL, _GRID_WIDTH / max(1, len(columns))))
    left = _MARGIN + max(60.0, max(len(name) for name in graph.stage_names) * _CHAR_WIDTH + 16)
    top = _TITLE_HEIGHT + (_HEADER if columns else 0)
    cells = _cells(graph, {key: number for number, key in enumerate(columns)}, left=left, top=top, cell=cell)
    keys, names = graph.partition_keys, graph.names
    crossing = [
        (before, task)
        for task, upstream in enumerate(graph.predecessors)
        for before in upstream
        if keys[before] != keys[task]
    ]
    summary = (
        f"{len(graph):,} tasks, {graph.edge_count:,} edges, {len(crossing):,} across partitions (arrows); "
        "edges within a partition follow the row order"
    )
    labels: list[str] = []
    every = max(1, math.ceil((max((len(key) for key in columns), default=0) * _CHAR_WIDTH + 6) / cell))
    for column, key in enumerate(columns):
        if column % every == 0:
            labels.append(svg_text(left + (column + 0.5) * cell, top - 7, key, class_="partition", text_anchor="middle"))
    for row, stage in enumerate(graph.stages):
        middle = _row_top(top, row) + _ROW_HEIGHT / 2
        labels.append(svg_text(left - 8, middle + 4, stage.name, class_="stage", text_anchor="end"))
    numbers: dict[float, str] = {}  # the coordinates repeat by column and by row: each formatted once

    def formatted(value: float) -> str:
        text = numbers.get(value)
        if text is None:
            text = numbers[value] = format_number(value)
        return text

    return _Layout(
        right=left + max(1, len(columns)) * cell + _MARGIN,
        summary=summary,
        grid_bottom=_row_top(top, len(graph.stages)) - _ROW_GAP,
        labels=tuple(labels),
        heads=tuple(f'<rect class="task" data-task={_quoted(name)}' for name in names),
        boxes=tuple(f'x="{formatted(place.x)}" y="{formatted(place.y)}" width="{formatted(place.width)}"' for place in cells),
        tooltips=tuple(f"<title>{escape(name)}: " for name in names),
        edges=tuple(_edge_path(names[before], names[task], cells[before], cells[task]) for before, task in crossing),
    )


def grid_svg(
    graph: TaskGraph,
    states: Mapping[str, str] | None = None,
    *,
    title: str,
    stale: Iterable[str] = (),
) -> str:
    """The grid of ``graph`` with each cell coloured by its task's state, as SVG text.

    ``states`` maps task names to run states (a task left out is pending); without it every cell is
    ``declared``. Tasks in ``stale`` keep their state's fill and get a yellow outline.
    """
    drawn = _cell_states(graph, states)
    marked = {graph.task_id(task) for task in stale}
    layout = graph.derived(_Layout, _layout)
    summary = layout.summary
    width = math.ceil(max(layout.right, 2 * _MARGIN + max(len(title) * 9, len(summary) * 6.5)))
    legend, legend_height = _legend(list(_RUN_STATES) if states is not None else [DECLARED], layout.grid_bottom + 28, width)
    height = math.ceil(layout.grid_bottom + 28 + legend_height + _MARGIN)
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">'),
        f"<title>{escape(title)}</title>",
        "<defs>",
        ('<marker id="arrow" viewBox="0 0 6 6" refX="6" refY="3" markerWidth="6" markerHeight="6" '
         f'orient="auto"><path d="M 0 0 L 6 3 L 0 6 z" fill="{_EDGE_COLOUR}"/></marker>'),
        "</defs>",
        f'<rect class="background" x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        svg_text(_MARGIN, 24, title, class_="title", font_size="16", font_weight="bold"),
        svg_text(_MARGIN, 44, summary, class_="summary", fill="#555555"),
        *layout.labels,
    ]
    parts += _task_rects(layout, drawn, marked)
    parts.append('<g class="edges" fill="none">')
    parts += layout.edges
    parts.append("</g>")
    parts += legend
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _task_rects(layout: _Layout, drawn: list[str], marked: set[int]) -> list[str]:
    """Every task's cell, filled by its state, outlined yellow when stale, named in its tooltip.

    The grid's hot loop (one element per task): what depends on the task alone is in the layout, and
    the attributes that depend only on the state and the stale mark are made once per pair.
    """
    styles = {(state, flag): _rect_style(state, flag) for state in set(drawn) for flag in (False, True)}
    return [
        f"{head}{before}{box}{after}{tooltip}{note}</title></rect>"
        for head, box, tooltip, (before, after, note) in zip(
            layout.heads, layout.boxes, layout.tooltips,
            [styles[state, task in marked] for task, state in enumerate(drawn)], strict=True,
        )
    ]


def _rect_style(state: str, marked_stale: bool) -> tuple[str, str, str]:
    """The parts of a task's cell that depend on its state and stale mark only: the attributes before the
    box, those after it, and the tooltip's note."""
    fill, outline = STATE_COLOURS[state]
    is_stale = marked_stale or state == STALE
    stroke, stroke_width = (STALE_OUTLINE, 2.5) if is_stale else (outline, 1)
    note = f"{state}, stale" if marked_stale and state != STALE else state
    flag = ' data-stale="true"' if is_stale else ""
    head = f" data-state={quoteattr(state)}{flag} "
    tail = f' height="{_ROW_HEIGHT}" fill="{fill}" stroke="{stroke}" stroke-width="{stroke_width}">'
    return head, tail, escape(note)


_PLAIN = str.maketrans("", "", "&<>\"'\n\r\t")


def _quoted(value: str) -> str:
    """``quoteattr(value)``, with a short way for the usual name that has nothing to escape."""
    if len(value.translate(_PLAIN)) == len(value):
        return f'"{value}"'
    return quoteattr(value)


def _edge_path(upstream: str, downstream: str, start: _Cell, end: _Cell) -> str:
    """A thin arrow from the upstream cell to the downstream one.

    Into or out of a wide (unpartitioned) cell the arrow is vertical, at the other cell's column, so a
    fan-in reads as one arrow per partition rather than a knot at the wide cell's middle. Within one
    row it arcs above the row instead of running along its cells.
    """
    start_x = end.middle if start.wide else start.middle
    end_x = start.middle if end.wide else end.middle
    if start.row < end.row:
        shape = f"M {format_number(start_x)} {format_number(start.bottom)} L {format_number(end_x)} {format_number(end.y)}"
    elif start.row > end.row:
        shape = f"M {format_number(start_x)} {format_number(start.y)} L {format_number(end_x)} {format_number(end.bottom)}"
    else:
        bend = start.y - _ROW_GAP * 0.8
        shape = (
            f"M {format_number(start_x)} {format_number(start.y)} "
            f"Q {format_number((start_x + end_x) / 2)} {format_number(bend)} {format_number(end_x)} {format_number(end.y)}"
        )
    return (
        f'<path class="edge" data-from={quoteattr(upstream)} data-to={quoteattr(downstream)} d="{shape}" '
        f'stroke="{_EDGE_COLOUR}" stroke-width="1" stroke-opacity="0.8" marker-end="url(#arrow)"/>'
    )


def write_grid(path: str | os.PathLike[str], svg: str) -> Path:
    """Write a grid to ``path`` atomically: .svg as is, .png with cairosvg; returns the path."""
    return write_svg(path, svg)
