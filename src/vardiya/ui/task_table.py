"""The pipeline page's task table: one row per task, its name linked to the task's page, its state and
the way to rerun it (blast radius first).

A big pipeline has 10,000 rows and more, so the rows are built here as text rather than by a template
loop (20 µs a row), escaped and quoted as the template's ``{{ }}`` and ``urlencode`` would. What a
row says about its task alone (the escaped name, both links) never changes for a loaded app's graph,
so it is made once per graph (``TaskGraph.derived``, ~35 µs a row) and only the state and the stale
mark are put in per request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from jinja2.utils import url_quote
from markupsafe import Markup, escape

from ..pipeline.graph import TaskGraph

__all__ = ["task_rows"]

_STALE = ' <span class="muted">(stale)</span>'


@dataclass(frozen=True, kw_only=True)
class _RowParts:
    """Each task's row without its stale mark and state: the text before them, and after them."""

    heads: Mapping[str, str]
    tails: Mapping[str, str]


def _row_parts(graph: TaskGraph) -> _RowParts:
    base = f"/pipelines/{escape(url_quote(graph.pipeline))}"
    heads: dict[str, str] = {}
    tails: dict[str, str] = {}
    for task in graph.names:
        shown, quoted = escape(task), escape(url_quote(task))
        heads[task] = f'<tr data-task="{shown}"><td><a href="{base}/tasks/{quoted}">{shown}</a>'
        tails[task] = f'</td>\n<td><a href="{base}/rerun?task={quoted}">rerun… (blast radius first)</a></td></tr>'
    return _RowParts(heads=heads, tails=tails)


def task_rows(graph: TaskGraph, tasks: Mapping[str, str], stale: Sequence[str]) -> Markup:
    """The table's rows for ``tasks`` (name -> state, in the order shown) of ``graph``, the ``stale``
    ones marked: the ``tasks`` and ``stale`` of ``pipeline status --json``."""
    parts = graph.derived(_RowParts, _row_parts)
    heads, tails, marked = parts.heads, parts.tails, set(stale)
    cells = {state: f"</td><td data-state>{escape(state)}" for state in set(tasks.values())}  # each escaped once
    return Markup("".join([
        f"{heads[task]}{_STALE if task in marked else ''}{cells[state]}{tails[task]}" for task, state in tasks.items()
    ]))
