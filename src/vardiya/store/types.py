"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

__all__ = ["JSONDocument", "UTCDateTime", "dumps_json"]


def dumps_json(value: Any) -> str:
    """The one JSON encoding of the store: compact, keys kept in the caller's order."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend.

    PostgreSQL stores ``timestamptz``. SQLite has no time type, so the value is stored as UTC text in
    SQLAlchemy's fixed-width format, which sorts and compares correctly as text. A naive datetime is
    refused: its zone would be a guess.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise ValueError(f"naive datetime {value!r} given to the store; pass an aware datetime")
        value = value.astimezone(timezone.utc)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


# JSONB on PostgreSQL (indexable, compact), JSON text on SQLite.
JSONDocument = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
