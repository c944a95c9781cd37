"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

__all__ = ["JSONDocument", "UTCDateTime", "UTCMicros", "dumps_json", "from_micros", "to_micros"]


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


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def to_micros(value: datetime) -> int:
    """An aware datetime as whole microseconds since 1970-01-01 UTC (exact, also before 1970)."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"naive datetime {value!r} given to the store; pass an aware datetime")
    return (value - _EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    """``to_micros`` undone: the aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=value)


class _MicrosOnSQLite(sa.types.TypeEngine[int]):
    """What ``UTCMicros`` is on SQLite: an integer, in a column still declared ``DATETIME``.

    The declared type only sets the column's affinity (NUMERIC), which keeps an integer as an integer;
    keeping the declaration lets migration 0005 convert the stored values in place instead of rebuilding
    the table. No driver-level conversion: ``UTCMicros`` hands the driver the integer itself.
    """

    __visit_name__ = "DATETIME"


class UTCMicros(sa.TypeDecorator[datetime]):
    """``UTCDateTime`` for the work-item columns: on SQLite an integer of microseconds since the epoch.

    PostgreSQL stores ``timestamptz``, as ``UTCDateTime`` does. On SQLite the text of ``UTCDateTime``
    (26 bytes) made every claim and completion rewrite wider rows, compare text keys in the ready and
    leased indexes, and test each text for a number (NUMERIC affinity); an integer is 8 bytes, compares
    as an integer and has nothing to test (benchmarks/README.md, ``bench_claims``). Integers sort as the
    times do. A text value (a row written before migration 0005) is still read correctly.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "sqlite":
            return _MicrosOnSQLite()
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "sqlite":
            return to_micros(value)
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise ValueError(f"naive datetime {value!r} given to the store; pass an aware datetime")
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, int):
            return from_micros(value)
        if isinstance(value, str):  # UTCDateTime's text
            return datetime.fromisoformat(value).replace(tzinfo=timezone.utc)
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


# JSONB on PostgreSQL (indexable, compact), JSON text on SQLite.
JSONDocument = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
