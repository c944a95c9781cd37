"""The stable hash H in SQL: the expressions that compute a record's slot inside the database.

H itself (its definition, version and test vectors, the SQLite function) is ``vardiya.hashing``'s;
its names are re-exported here, where they have always been imported from.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer, Text, cast, func, literal_column
from sqlalchemy.dialects.postgresql import BIT
from sqlalchemy.sql.elements import ColumnElement

from ..errors import ConfigurationError
from ..hashing import (
    HASH_DIGITS,
    HASH_VERSION,
    SQLITE_HASH_FUNCTION,
    RecordId,
    canonical_text,
    checked_slots,
    hash_slot,
    register_sqlite_functions,
    stable_hash,
)

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


def _slots_literal(slots: int) -> ColumnElement[Any]:
    """B rendered inline rather than as a bind parameter.

    The same expression serves queries, generated columns and expression indexes; DDL accepts no bind
    parameters, and an expression index only matches a query whose text is the same. B is a validated
    int, so rendering it cannot inject anything.
    """
    return literal_column(str(checked_slots(slots)), Integer)


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
            func.md5(text), literal_column("1", Integer), literal_column(str(HASH_DIGITS), Integer)
        )
        bits = cast(literal_column("'x'", Text).concat(hex_prefix), BIT(60))
        return cast(bits, BigInteger) % b
    if dialect_name == "sqlite":
        return getattr(func, SQLITE_HASH_FUNCTION)(text, b, type_=BigInteger)
    raise ConfigurationError(
        f"assign='hash' pushdown is not available on {dialect_name!r} (only postgresql and sqlite); "
        "store a slot column computed with vardiya.slots.hash_slot instead"
    )
