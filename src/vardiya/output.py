"""Output for people at any width: tables that never cut a cell, plain values, progress on a terminal.

Piped output is 80 columns (Rich's default off a terminal; ``COLUMNS`` overrides), and a cut cell is
worse than no table: ``worker-3f…`` cannot be pasted into ``vardiya dlq show``. So every command builds
its tables with :class:`FitTable`. Its columns never wrap a cell (ids, names, figures) unless a column is
declared ``wrap=True`` (prose: an error, a list of task names), which then wraps between words only;
and a table whose columns cannot all fit the width is printed as ``key: value`` lines, one block per
row, instead of squeezing cells into ellipses. ``kubectl describe`` and ``psql``'s ``\\x`` do the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

__all__ = ["FitTable", "cell", "progress"]

_UNBOUNDED = 1_000_000  # a width no table reaches: measures what the columns need, uncut


class FitTable(Table):
    """A Rich table that prints whole cells, or ``key: value`` blocks when its columns do not fit."""

    def add_column(self, header: RenderableType = "", *, wrap: bool = False, **options: Any) -> None:  # type: ignore[override]
        """A column; ``wrap=True`` lets its cells wrap between words (never inside one), else none wraps."""
        options.setdefault("no_wrap", not wrap)
        options["overflow"] = "fold"  # never an ellipsis; the width check below keeps folds from happening
        super().add_column(header, **options)

    def needed_width(self, console: Console, options: ConsoleOptions) -> int:
        """The narrowest this table can be printed without cutting or folding a cell: every column that
        does not wrap at its widest cell, every other one at its longest word, plus padding and rules.
        (Rich's own measure counts a longest word for every column, and then folds the rest.)"""
        wide = options.update_width(_UNBOUNDED)
        total = self._extra_width
        for column in self.columns:
            measured = self._measure_column(console, wide, column)
            total += measured.maximum if column.no_wrap else measured.minimum
        return total

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.columns or self.needed_width(console, options) <= options.max_width:
            yield from super().__rich_console__(console, options)
            return
        yield from self._vertical(console)

    def _vertical(self, console: Console) -> Iterator[RenderableType]:
        """One block of ``header: value`` lines per row; the title first, the caption last."""
        if self.title:
            yield _text(console, self.title, "bold")
        headers = [header.plain if isinstance(header, Text) else str(header) for header in (c.header for c in self.columns)]
        rows = list(zip(*(column._cells for column in self.columns), strict=True))
        for number, row in enumerate(rows):
            if number:
                yield Text("")
            for header, value in zip(headers, row, strict=True):
                rendered = _text(console, value) if isinstance(value, str | Text) else value
                if isinstance(rendered, Text):
                    if not rendered.plain:
                        continue
                    yield Text.assemble((f"{header}: " if header else ""), rendered)
                else:
                    yield Text(f"{header}:")
                    yield rendered
        if self.caption:
            yield _text(console, self.caption, "dim")


def _text(console: Console, value: str | Text | Any, style: str = "") -> Text:
    if isinstance(value, Text):
        return value
    return console.render_str(str(value), style=style)


def cell(value: Any, *, digits: int | None = None) -> str:
    """A value as text for people: no Python ``None``/``True``; ``-`` for nothing, yes/no for flags."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if digits is not None else f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return ", ".join(cell(item) for item in value) or "-"
    return str(value)


@contextlib.contextmanager
def progress(console: Console, label: str, total: int | None) -> Iterator[Callable[..., None]]:
    """A progress bar on a terminal (gone when done); off a terminal (piped, a log) nothing at all.

    Yields ``advance(steps=1, description=None)``; the caller's output stays the same either way.
    """
    if not console.is_terminal:
        yield lambda *_args, **_kwargs: None
        return
    columns: Iterable[Any] = (
        TextColumn(f"[bold]{label}[/] {{task.description}}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=total)

        def advance(steps: int = 1, description: str | None = None) -> None:
            bar.update(task, advance=steps, description=description)  # None keeps the description

        yield advance
