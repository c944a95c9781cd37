"""Idempotent sinks: outputs a rerun can write again without harm, and a crash cannot leave half-written.

- ``atomic_write``: temp file in the same directory, fsync, rename (and fsync of the directory), so a
  reader sees the old file or the new one, never a part.
- ``output_path``: a deterministic path per (period, record), so a rerun lands on the same file and
  ``skip_existing`` makes it a no-op.
- ``upsert``: write a row on its natural key; a second run updates the same row instead of adding one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..clock import ensure_aware
from ..errors import ConfigurationError, InvalidInput
from ..files import atomic_write
from ..slots.scheme import Period

__all__ = ["atomic_write", "output_path", "upsert"]


def output_path(
    root: str | os.PathLike[str], period: Period | date | datetime | str, record: object, *, suffix: str = ".json"
) -> Path:
    """``root/yyyy/MM/dd/{record}{suffix}``: the same place for the same (period, record), every run.

    ``period`` is a ``Period``, its key (``2026-12-01``, or ``2026-12-01T10:30`` for a period shorter
    than a day, which adds a ``1030`` folder so that every period has a place of its own), a date, or
    an aware datetime whose own date is taken (pass the period, not a UTC planned time, to get the
    period's local day). A naive datetime is refused.
    """
    if isinstance(period, Period):
        period = period.key
    if isinstance(period, str):
        day, _, clock_time = period.partition("T")
        try:
            moment = date.fromisoformat(day)
        except ValueError:
            raise InvalidInput(f"period {period!r} is not a period key such as 2026-12-01") from None
        within = clock_time.rstrip("Z").replace(":", "")
    elif isinstance(period, datetime):
        moment = ensure_aware(period, "period") and period.date()
        within = ""
    else:
        moment, within = period, ""
    name = str(record)
    if not name or "/" in name or name in (".", ".."):
        raise ConfigurationError(f"record id {record!r} cannot be a file name; map it to a safe name first")
    folder = f"{os.fspath(root)}/{moment.year:04d}/{moment.month:02d}/{moment.day:02d}"
    if within:
        folder = f"{folder}/{within}"
    return Path(f"{folder}/{name}{suffix}")


def upsert(
    connection: sa.Connection,
    table: sa.Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    key: Sequence[str],
) -> int:
    """Insert ``rows`` into ``table``, updating the rows whose natural ``key`` exists (SQLite, PostgreSQL).

    Never "insert and ignore the error": the second write of the same key replaces the first.
    """
    if not rows:
        return 0
    name = connection.dialect.name
    insert: postgresql.Insert | sqlite.Insert
    if name == "postgresql":
        insert = postgresql.insert(table)
    elif name == "sqlite":
        insert = sqlite.insert(table)
    else:
        raise ConfigurationError(f"upsert supports SQLite and PostgreSQL, not {name}")
    columns = [column for column in rows[0] if column not in key]
    statement = insert.on_conflict_do_update(
        index_elements=list(key),
        set_={column: insert.excluded[column] for column in columns},
    ) if columns else insert.on_conflict_do_nothing(index_elements=list(key))
    connection.execute(statement, list(rows))
    return len(rows)
