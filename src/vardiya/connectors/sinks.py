"""Idempotent sinks: outputs a rerun can write again without harm, and a crash cannot leave half-written.

- ``atomic_write``: temp file in the same directory, fsync, rename (and fsync of the directory), so a
  reader sees the old file or the new one, never a part.
- ``output_path``: a deterministic path per (period, record), so a rerun lands on the same file and
  ``skip_existing`` makes it a no-op.
- ``upsert``: write a row on its natural key; a second run updates the same row instead of adding one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..clock import ensure_aware
from ..errors import ConfigurationError, InvalidInput
from ..slots.scheme import Period

__all__ = ["atomic_write", "output_path", "upsert"]


def atomic_write(
    path: str | os.PathLike[str], data: bytes | str, *, skip_existing: bool = False, durable: bool = True
) -> bool:
    """Publish ``data`` at ``path`` atomically; returns False when ``skip_existing`` found it already there.

    The rename alone already guarantees that no reader and no killed process ever leaves or sees a
    partial file. ``durable`` (the default) adds the fsyncs of the file and its directory, so the new
    file also survives a power loss; without it a write costs about a third.
    """
    # Plain os.path on purpose: an output per record makes pathlib's parsing a visible cost.
    target = os.fspath(path)
    if skip_existing and os.path.exists(target):
        return False
    parent, name = os.path.split(target)
    parent = parent or "."
    os.makedirs(parent, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    descriptor, temporary = tempfile.mkstemp(dir=parent, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)  # mkstemp makes 0600; an output is meant to be read by others
            handle.write(payload)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    if not durable:
        return True
    directory = os.open(parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return True


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
