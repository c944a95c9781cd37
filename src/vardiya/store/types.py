"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

from ..errors import InvalidInput
from .postgres import POSTGRES_TIMES
from .sqlite import SQLITE_TIMES

__all__ = [
    "json_text",
    "JSONDocument", "UTCDateTime", "UTCMicros", "check_no_nul", "dumps_json", "from_micros", "has_nul", "to_micros",
]


# One encoder for every call: ``json.dumps`` with options builds a new encoder each time, which was a
# fifth of a bulk submit's Python (benchmarks/README.md, bench_enqueue).
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def dumps_json(value: Any) -> str:
    """The one JSON encoding of the store: compact, keys kept in the caller's order."""
    return _ENCODE(value)


# An escaped NUL is ``\u0000`` after an even number of backslashes (an odd one makes it the text
# ``\u0000`` of a literal backslash, which every backend stores).
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def has_nul(text: str) -> bool:
    """Whether JSON text made by ``dumps_json`` holds a NUL character (U+0000) in a string.

    ``json`` always escapes NUL, so a substring test settles nearly every text at C speed; only a text
    that holds the six characters is searched for an escape that is not a literal backslash.
    """
    return "\\u0000" in text and _NUL_ESCAPE.search(text) is not None


def check_no_nul(text: str, what: str) -> str:
    """``text`` (JSON from ``dumps_json``), unless it holds a NUL character: then one line, nothing written.

    PostgreSQL's ``jsonb`` cannot hold U+0000 and SQLite can; refusing it on both keeps the backends
    accepting the same payloads (as SQS refuses it in a message body).
    """
    if has_nul(text):
        raise InvalidInput(
            f"{what} holds a NUL character (U+0000), which the store does not keep on PostgreSQL or SQLite; "
            "remove it, or encode binary data (e.g. base64) before passing it"
        )
    return text


def json_text(value: Any, what: str) -> str:
    """``value`` as the JSON text the store keeps; ``InvalidInput`` naming ``what`` when it has none
    or holds a NUL (``check_no_nul``). The one check of every payload, record and item."""
    try:
        text = dumps_json(value)
    except (TypeError, ValueError) as error:
        raise InvalidInput(
            f"{what} does not serialise to JSON ({error}); pass dicts, lists, strings, numbers, booleans or None"
        ) from None
    return check_no_nul(text, what)


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
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return (SQLITE_TIMES if dialect.name == "sqlite" else POSTGRES_TIMES).read_time(value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        # An integer of microseconds, or UTCDateTime's text (a row written before migration 0005).
        return (SQLITE_TIMES if dialect.name == "sqlite" else POSTGRES_TIMES).read_time(value)


# JSONB on PostgreSQL (indexable, compact), JSON text on SQLite.
JSONDocument = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
