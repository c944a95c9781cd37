"""The SQL over a stream's batch documents that ``HandlerFigureReads.stream_totals`` runs, per backend.

A batch item's payload is ``{"lane", "size", "records": [[offset, key, record, arrived_ms, ...]],
"completed": [[arrived_ms, finished_ms]]}`` and a dead batch's result has ``co_failed``. SQLite reads
them with ``json_extract`` and expands the arrays with the table-valued ``json_each``; PostgreSQL
(JSONB) with ``->``/``->>`` and ``jsonb_array_elements`` in a lateral join.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from .records import ItemState
from .schema import work_items
from .url import Backend

__all__ = ["stream_latencies", "stream_sums"]

_W = work_items.c


def _count_of(backend: Backend, document: sa.ColumnElement[object], key: str) -> sa.ColumnElement[int]:
    """The integer at ``document[key]``."""
    if backend is Backend.POSTGRESQL:
        return sa.cast(document.op("->>")(key), sa.BigInteger)
    return sa.func.json_extract(document, f"$.{key}", type_=sa.BigInteger)


def _length_of(backend: Backend, document: sa.ColumnElement[object], key: str) -> sa.ColumnElement[int]:
    """The length of the array at ``document[key]`` (NULL when there is none)."""
    if backend is Backend.POSTGRESQL:
        return sa.func.jsonb_array_length(document.op("->")(key), type_=sa.BigInteger)
    return sa.func.json_array_length(document, f"$.{key}", type_=sa.BigInteger)


def stream_sums(backend: Backend, of_kind: Sequence[sa.ColumnElement[bool]]) -> sa.Select[int, int, int]:
    """Unique records (each batch's ``size``, else its records' count), dead records, co-failed."""
    dead = _W.state == ItemState.DEAD
    records = sa.func.coalesce(_length_of(backend, _W.payload, "records"), 0)
    return sa.select(
        sa.func.sum(sa.func.coalesce(_count_of(backend, _W.payload, "size"), records)),
        sa.func.sum(records).filter(dead),
        sa.func.sum(sa.func.coalesce(_count_of(backend, _W.result, "co_failed"), 0)).filter(dead),
    ).where(*of_kind)


def _elements(backend: Backend, key: str, name: str) -> Any:
    """The elements of the payload's array ``key``, one row each (column ``value``)."""
    if backend is Backend.POSTGRESQL:
        return (
            sa.func.jsonb_array_elements(_W.payload.op("->")(key))
            .table_valued(sa.column("value", postgresql.JSONB))
            .lateral(name)
        )
    return sa.func.json_each(_W.payload, f"$.{key}").table_valued("value").alias(name)


def _at(backend: Backend, element: sa.ColumnElement[object], index: int) -> sa.ColumnElement[int]:
    """The integer at position ``index`` of an array element."""
    if backend is Backend.POSTGRESQL:
        return sa.cast(element.op("->>")(index), sa.BigInteger)
    return sa.func.json_extract(element, f"$[{index}]", type_=sa.BigInteger)


def stream_latencies(
    backend: Backend,
    of_kind: Sequence[sa.ColumnElement[bool]],
    finished: sa.ColumnElement[bool],
    done_ms: sa.ColumnElement[int],
) -> sa.Subquery:
    """One row (column ``ms``) per latency: each completed record's finish minus its arrival, and each
    record of a finished batch its batch's end (``done_ms``) minus its arrival."""
    completed = _elements(backend, "completed", "completed")
    records = _elements(backend, "records", "record")
    done = sa.select((_at(backend, completed.c.value, 1) - _at(backend, completed.c.value, 0)).label("ms"))
    done = done.select_from(work_items).join(completed, sa.true()).where(*of_kind)
    ended = sa.select((done_ms - _at(backend, records.c.value, 3)).label("ms"))
    ended = ended.select_from(work_items).join(records, sa.true()).where(*of_kind, finished)
    return sa.union_all(done, ended).subquery("latencies")
