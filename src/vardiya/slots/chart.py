"""Pictures of a slot report: a per-slot bar chart as a self-contained SVG (PNG when cairosvg is there).

The SVG is written by hand, with no dependency: one panel per series (records and p95 duration per slot
for ``vardiya slots report --plot``), each with a y axis of round tick values, slot numbers under the
bars, and highlighted bars for the slots that would overrun their tick interval. Every bar is a
``<rect class="bar">`` carrying ``data-slot`` and ``data-value``, so the picture can be checked by machine.
A bar's height is its value over the axis top (a round number at or above the largest value) times
the panel's plot height: heights are proportional to values.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape, quoteattr

from ..errors import InvalidInput
from ..svg import check_chart_path, format_number, svg_text, write_svg

if TYPE_CHECKING:
    from .report import LedgerReport

__all__ = [
    "bar_chart_svg",
    "check_chart_path",
    "format_number",
    "report_chart_svg",
    "svg_text",
    "write_chart",
    "write_svg",
]

BAR_COLOUR = "#4c78a8"
HIGHLIGHT_COLOUR = "#d62728"
_MARGIN_LEFT = 76
_MARGIN_RIGHT = 24
_TITLE_HEIGHT = 40
_PANEL_TITLE = 26  # above each plot area
_PANEL_FOOT = 46  # slot numbers and the x axis label under each plot area
_LABEL_WIDTH = 26  # horizontal room one slot number needs
_TICKS = 5


def _axis(maximum: float) -> tuple[float, list[float]]:
    """A round axis top at or above ``maximum`` and its tick values, starting at 0."""
    if maximum <= 0:
        return 1.0, [0.0, 1.0]
    raw = maximum / _TICKS
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-12))
    count = max(1, math.ceil(maximum / step - 1e-9))
    return count * step, [index * step for index in range(count + 1)]


def _tick_text(value: float, step: float) -> str:
    if float(step).is_integer():
        return f"{value:,.0f}"
    decimals = max(0, math.ceil(-math.log10(step))) + 1
    return f"{value:,.{decimals}f}"


def _checked(labels: Sequence[str], series: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    if not labels:
        raise InvalidInput("a bar chart needs at least one bar; give one label per slot")
    if not series:
        raise InvalidInput("a bar chart needs at least one series, e.g. {'records': counts}")
    checked: dict[str, list[float]] = {}
    for name, values in series.items():
        numbers = [float(value) for value in values]
        if len(numbers) != len(labels):
            raise InvalidInput(
                f"series {name!r} has {len(numbers)} values for {len(labels)} labels; give one value per label"
            )
        if any(not math.isfinite(number) or number < 0 for number in numbers):
            raise InvalidInput(f"series {name!r} has a value that is negative or not finite; bars need values >= 0")
        checked[name] = numbers
    return checked


def _panel(
    name: str, values: list[float], labels: Sequence[str], highlight: Collection[int], top: float, plot_width: float,
    plot_height: float, x_label: str,
) -> list[str]:
    """One panel, drawn with its plot area's top-left corner at (0, 0) of a translated group."""
    axis_top, ticks = _axis(max(values))
    step = ticks[1] - ticks[0]
    slot_width = plot_width / len(values)
    bar_width = slot_width * 0.8
    every = max(1, math.ceil(len(values) * _LABEL_WIDTH / plot_width))
    parts = [
        f'<g class="panel" data-series={quoteattr(name)} transform="translate({_MARGIN_LEFT} {format_number(top)})">',
        svg_text(0, -10, name, class_="panel-title", font_weight="bold"),
    ]
    for tick in ticks:
        y = plot_height - tick / axis_top * plot_height
        parts.append(
            f'<line class="grid" x1="0" y1="{format_number(y)}" x2="{format_number(plot_width)}" y2="{format_number(y)}" '
            'stroke="#e0e0e0"/>'
        )
        parts.append(svg_text(-8, y + 4, _tick_text(tick, step), class_="tick", text_anchor="end"))
    for index, value in enumerate(values):
        height = value / axis_top * plot_height
        x = index * slot_width + (slot_width - bar_width) / 2
        marked = index in highlight
        parts.append(
            f'<rect class="{"bar overrun" if marked else "bar"}" data-slot="{index}" data-value="{value:g}" '
            f'x="{format_number(x)}" y="{format_number(plot_height - height)}" width="{format_number(bar_width)}" '
            f'height="{format_number(height)}" fill="{HIGHLIGHT_COLOUR if marked else BAR_COLOUR}">'
            f"<title>{escape(f'{x_label} {labels[index]}: {value:,.6g}')}</title></rect>"
        )
        if index % every == 0:
            parts.append(
                svg_text(index * slot_width + slot_width / 2, plot_height + 16, labels[index], class_="label",
                      text_anchor="middle")
            )
    parts += [
        (f'<line class="axis" x1="0" y1="{format_number(plot_height)}" x2="{format_number(plot_width)}" '
         f'y2="{format_number(plot_height)}" stroke="#333"/>'),
        f'<line class="axis" x1="0" y1="0" x2="0" y2="{format_number(plot_height)}" stroke="#333"/>',
        svg_text(plot_width / 2, plot_height + 36, x_label, class_="axis-label", text_anchor="middle"),
        svg_text(-_MARGIN_LEFT + 14, plot_height / 2, name, class_="axis-label", text_anchor="middle",
              transform=f"rotate(-90 {-_MARGIN_LEFT + 14} {format_number(plot_height / 2)})"),
        "</g>",
    ]
    return parts


def bar_chart_svg(
    title: str,
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    highlight: Collection[int] = (),
    highlight_label: str = "highlighted",
    x_label: str = "slot",
    width: int = 960,
    panel_height: int = 260,
) -> str:
    """A self-contained SVG with one bar panel per series (in order), one bar per label in each.

    Bars at the indexes in ``highlight`` are drawn in another colour, explained by ``highlight_label``.
    """
    checked = _checked(labels, series)
    plot_width = width - _MARGIN_LEFT - _MARGIN_RIGHT
    plot_height = panel_height - _PANEL_TITLE - _PANEL_FOOT
    if plot_width < len(labels) or plot_height < 40:
        raise InvalidInput(f"a chart of {width} x {panel_height} px per panel is too small for {len(labels)} bars")
    height = _TITLE_HEIGHT + panel_height * len(checked)
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">'),
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        svg_text(_MARGIN_LEFT, 24, title, class_="title", font_size="16", font_weight="bold"),
    ]
    marked = {index for index in highlight if 0 <= index < len(labels)}
    if marked:
        legend_x = width - _MARGIN_RIGHT
        parts += [
            f'<rect class="legend" x="{legend_x - 12}" y="14" width="12" height="12" fill="{HIGHLIGHT_COLOUR}"/>',
            svg_text(legend_x - 18, 24, highlight_label, class_="legend", text_anchor="end"),
        ]
    for number, (name, values) in enumerate(checked.items()):
        top = _TITLE_HEIGHT + number * panel_height + _PANEL_TITLE
        parts += _panel(name, values, labels, marked, top, plot_width, plot_height, x_label)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def report_chart_svg(report: LedgerReport) -> str:
    """The picture of a ledger report: records per slot and p95 duration per slot, overruns marked."""
    owner = report.job or "slot job"
    return bar_chart_svg(
        f"{owner}, period {report.period}: records and p95 duration per slot",
        [str(load.slot) for load in report.slots],
        {
            "records": [load.count for load in report.slots],
            "p95 duration (ms)": [load.p95_ms for load in report.slots],
        },
        highlight=report.overrun_slots,
        highlight_label="would overrun its tick interval",
    )


def write_chart(path: str | os.PathLike[str], report: LedgerReport) -> Path:
    """Write the report's chart to ``path`` (.svg, or .png with cairosvg) atomically; returns the path."""
    return write_svg(path, report_chart_svg(report))
