"""SVG pictures written by hand: the primitives every chart of vardiya shares, and their atomic write.

The slot report's bar chart (``slots/chart.py``), the planner's batch sweep and the pipeline state grid
(``pipeline/grid.py``) all draw with these, so they live below all three: a picture of one concept
never imports another concept's package to reach a helper.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from .errors import InvalidInput
from .files import atomic_write

__all__ = ["check_chart_path", "format_number", "svg_text", "write_svg"]


def format_number(value: float) -> str:
    """A coordinate with at most two decimals and no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def svg_text(x: float, y: float, content: str, **attributes: str) -> str:
    # Python names stand for SVG ones: class_ is class, text_anchor is text-anchor.
    extra = "".join(
        f" {name.rstrip('_').replace('_', '-')}={quoteattr(value)}" for name, value in attributes.items()
    )
    return f'<text x="{format_number(x)}" y="{format_number(y)}"{extra}>{escape(content)}</text>'


def check_chart_path(path: str | os.PathLike[str]) -> str:
    """The format a chart path asks for, ``svg`` or ``png``; anything else is a clear error.

    PNG needs the optional ``cairosvg`` package; without it this says to write .svg instead. Call it
    before doing the work, so a bad path fails first.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".svg":
        return "svg"
    if suffix == ".png":
        try:
            importlib.import_module("cairosvg")
        except ImportError:
            raise InvalidInput(
                f"cannot write {os.fspath(path)}: PNG needs the cairosvg package, which is not installed; "
                "write an .svg file instead (or pip install cairosvg)"
            ) from None
        return "png"
    raise InvalidInput(f"cannot write a chart to {os.fspath(path)}: use a file name ending in .svg or .png")


def write_svg(path: str | os.PathLike[str], svg: str) -> Path:
    """Write a picture to ``path`` atomically: .svg as is, .png through cairosvg; returns the path.

    Any other suffix, or .png without cairosvg, is an ``InvalidInput`` that says to write .svg.
    """
    chart_format = check_chart_path(path)
    if chart_format == "png":
        cairosvg = importlib.import_module("cairosvg")
        atomic_write(path, cairosvg.svg2png(bytestring=svg.encode("utf-8")))
    else:
        atomic_write(path, svg)
    return Path(path)
