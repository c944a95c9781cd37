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

from ..errors import ConfigurationError

__all__ = ["atomic_write", "output_path", "upsert"]


def atomic_write(
    path: str | os.PathLike[str], data: bytes | str, *, skip_existing: bool = False, durable: bool = True
) -> bool:
    """Publish ``data`` at ``path`` atomically; returns False when ``skip_existing`` found it already there.

    The rename alone already guarantees that no reader and no killed process ever leaves or sees a
    partial file. ``durable`` (the default) adds the fsyncs of the file and its directory, so the new
    file also survives a power loss; without it a write costs about a third.
    """
    target = Path(path)
    if skip_existing and target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(descriptor, 0o644)  # mkstemp makes 0600; an output is meant to be read by others
        with os.fdopen(descriptor, "wb") as handle:
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
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return True


def output_path(root: str | os.PathLike[str], period: date | datetime | str, record: object, *, suffix: str = ".json") -> Path:
    """``root/yyyy/MM/dd/{record}{suffix}``: the same place for the same (period, record), every run."""
    if isinstance(period, str):
        day = date.fromisoformat(period[:10])
    elif isinstance(period, datetime):
        day = period.date()
    else:
        day = period
    name = str(record)
    if not name or "/" in name or name in (".", ".."):
        raise ConfigurationError(f"record id {record!r} cannot be a file name; map it to a safe name first")
    return Path(root) / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}" / f"{name}{suffix}"


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
