"""The stable hash H behind ``assign="hash"``, in Python and in SQL.

A record's slot under ``assign="hash"`` is ``H(id) mod B``. H must never change silently: if it did,
every record's hour would move at once. So it is versioned and pinned by test vectors.

H, version 1 (``HASH_VERSION = 1``)::

    H(id) = int(md5(canonical_text(id).encode("utf-8")).hexdigest()[:15], 16)

that is, the first 60 bits of the MD5 of the id's canonical text, read as a non-negative integer
(0 <= H < 2**60). Canonical text:

- an ``int``: its decimal form, ``str(id)`` (``-5`` -> ``"-5"``, no leading zeros, no ``+``);
- a ``str``: the string itself, encoded as UTF-8.

``bool`` is rejected although it is an ``int`` subclass: ``True`` as an id is almost always a bug. So is
anything else (floats, bytes, UUID objects): pass ``str(value)`` explicitly if that is the id.

Because an int and its decimal string have the same canonical text, ``H(42) == H("42")``. That is what
lets the database compute the same slot: PostgreSQL and SQLite cast the column to text first, which gives
exactly this decimal form for integer columns. 60 bits rather than 64 keep the value inside a signed
bigint on every database, so no engine ever sees a negative hash.

Why MD5: it is stable, specified, everywhere (PostgreSQL and MySQL natively, SQLite through
``register_sqlite_functions``) and well mixed; nothing here needs a cryptographic property.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

from sqlalchemy import BigInteger, Integer, Text, cast, func, literal_column
from sqlalchemy.dialects.postgresql import BIT
from sqlalchemy.sql.elements import ColumnElement

from ..errors import ConfigurationError, InvalidInput

__all__ = [
    "HASH_VERSION",
    "SQLITE_HASH_FUNCTION",
    "RecordId",
    "canonical_text",
    "hash_slot",
    "hash_slot_sql",
    "mod_slot_sql",
    "register_sqlite_functions",
    "stable_hash",
]

HASH_VERSION = 1
"""Version of H. Bump it only together with a scheme migration: every hashed record would move."""

SQLITE_HASH_FUNCTION = "vardiya_slot_hash"
"""Name of the SQL function ``register_sqlite_functions`` installs: ``vardiya_slot_hash(text, B)``."""

_HEX_DIGITS = 15  # 15 hex digits = 60 bits

RecordId = int | str
"""What a record id may be: a stable int or str (see the canonical text above)."""


def canonical_text(record_id: RecordId) -> str:
    """The text H hashes: decimal for an int, the string itself for a str."""
    if isinstance(record_id, bool):
        raise InvalidInput(f"record id {record_id!r} is a bool; ids must be int or str")
    if isinstance(record_id, int):
        return str(record_id)
    if isinstance(record_id, str):
        return record_id
    raise InvalidInput(
        f"record id {record_id!r} has type {type(record_id).__name__}; ids must be int or str "
        "(pass str(value) if its text is the stable id)"
    )


def stable_hash(record_id: RecordId) -> int:
    """H(id) of ``HASH_VERSION``: the first 60 bits of MD5 of the canonical text."""
    digest = hashlib.md5(canonical_text(record_id).encode("utf-8"), usedforsecurity=False)
    return int(digest.hexdigest()[:_HEX_DIGITS], 16)


def hash_slot(record_id: RecordId, slots: int) -> int:
    """The slot ``H(id) mod B`` of a record under ``assign="hash"``."""
    return stable_hash(record_id) % _checked_slots(slots)


def _checked_slots(slots: object) -> int:
    """B as a positive int; it ends up as SQL text, so nothing else may pass."""
    if isinstance(slots, bool) or not isinstance(slots, int):
        raise InvalidInput(f"slots must be an integer, got {slots!r}")
    if slots <= 0:
        raise InvalidInput(f"slots must be a positive integer, got {slots}; use e.g. slots=24")
    return slots


def _slots_literal(slots: int) -> ColumnElement[Any]:
    """B rendered inline rather than as a bind parameter.

    The same expression serves queries, generated columns and expression indexes; DDL accepts no bind
    parameters, and an expression index only matches a query whose text is the same. B is a validated
    int, so rendering it cannot inject anything.
    """
    return literal_column(str(_checked_slots(slots)), Integer)


def mod_slot_sql(column: ColumnElement[Any], slots: int) -> ColumnElement[Any]:
    """``((col % B) + B) % B``: floor modulo in SQL, equal to Python's ``id % B`` for negative ids too.

    SQL's ``%`` truncates towards zero (``-5 % 24 = -5``); adding B once and taking the rest again maps
    every id into 0..B-1 exactly as ``SlotScheme.slot_of`` does.
    """
    b = _slots_literal(slots)
    return ((column % b) + b) % b


def hash_slot_sql(column: ColumnElement[Any], slots: int, dialect_name: str) -> ColumnElement[Any]:
    """The SQL expression computing ``H(col) mod B`` in the database named by ``dialect_name``.

    PostgreSQL: ``('x' || substr(md5(CAST(col AS TEXT)), 1, 15))::bit(60)::bigint % B``: the hex digits
    read as a 60-bit string, then as a non-negative bigint. SQLite has no MD5, so it calls
    ``vardiya_slot_hash(CAST(col AS TEXT), B)``, which ``register_sqlite_functions`` must have installed
    on the connection.
    """
    b = _slots_literal(slots)
    text = cast(column, Text)
    if dialect_name == "postgresql":
        hex_prefix = func.substr(
            func.md5(text), literal_column("1", Integer), literal_column(str(_HEX_DIGITS), Integer)
        )
        bits = cast(literal_column("'x'", Text).concat(hex_prefix), BIT(60))
        return cast(bits, BigInteger) % b
    if dialect_name == "sqlite":
        return getattr(func, SQLITE_HASH_FUNCTION)(text, b, type_=BigInteger)
    raise ConfigurationError(
        f"assign='hash' pushdown is not available on {dialect_name!r} (only postgresql and sqlite); "
        "store a slot column computed with vardiya.slots.hash_slot instead"
    )


def _sqlite_slot_hash(text: object, slots: object) -> int | None:
    """The body of ``vardiya_slot_hash``; NULL in, NULL out, as SQL functions do."""
    if text is None or slots is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if not isinstance(text, (int, str)):
        # A REAL would hash as Python's repr, not as the id's text: refuse rather than disagree.
        raise ValueError(f"{SQLITE_HASH_FUNCTION}: cast the id to TEXT first, got {type(text).__name__}")
    return hash_slot(text, _checked_slots(slots))


def register_sqlite_functions(dbapi_connection: sqlite3.Connection) -> None:
    """Install ``vardiya_slot_hash(text, B)`` on a sqlite3 connection (e.g. from a ``connect`` event).

    It is registered as deterministic, which SQLite requires before the function may appear in a
    generated column or an index.
    """
    dbapi_connection.create_function(SQLITE_HASH_FUNCTION, 2, _sqlite_slot_hash, deterministic=True)
