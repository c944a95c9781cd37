"""The stable hash H behind ``assign="hash"``, in Python, and the SQLite function that computes it.

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

This module is pure and sits at the top of the package: the slot schemes hash with it, and every
SQLite connection vardiya opens (the store's and a user database's) installs its function, so the
store needs no engine package to do so. The SQL form of H (``hash_slot_sql``) is ``slots.hashing``'s.
"""

from __future__ import annotations

import hashlib
import sqlite3

from .errors import InvalidInput

__all__ = [
    "HASH_DIGITS",
    "HASH_VERSION",
    "SQLITE_HASH_FUNCTION",
    "RecordId",
    "canonical_text",
    "checked_slots",
    "hash_slot",
    "register_sqlite_functions",
    "stable_hash",
]

HASH_VERSION = 1
"""Version of H. Bump it only together with a scheme migration: every hashed record would move."""

SQLITE_HASH_FUNCTION = "vardiya_slot_hash"
"""Name of the SQL function ``register_sqlite_functions`` installs: ``vardiya_slot_hash(text, B)``."""

HASH_DIGITS = 15
"""Hex digits of the MD5 that H keeps: 15 hex digits are 60 bits."""

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
    return int(digest.hexdigest()[:HASH_DIGITS], 16)


def hash_slot(record_id: RecordId, slots: int) -> int:
    """The slot ``H(id) mod B`` of a record under ``assign="hash"``."""
    return stable_hash(record_id) % checked_slots(slots)


def checked_slots(slots: object) -> int:
    """B as a positive int; it ends up as SQL text, so nothing else may pass."""
    if isinstance(slots, bool) or not isinstance(slots, int):
        raise InvalidInput(f"slots must be an integer, got {slots!r}")
    if slots <= 0:
        raise InvalidInput(f"slots must be a positive integer, got {slots}; use e.g. slots=24")
    return slots


def _sqlite_slot_hash(text: object, slots: object) -> int | None:
    """The body of ``vardiya_slot_hash``; NULL in, NULL out, as SQL functions do."""
    if text is None or slots is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if not isinstance(text, (int, str)):
        # A REAL would hash as Python's repr, not as the id's text: refuse rather than disagree.
        raise ValueError(f"{SQLITE_HASH_FUNCTION}: cast the id to TEXT first, got {type(text).__name__}")
    return hash_slot(text, checked_slots(slots))


def register_sqlite_functions(dbapi_connection: sqlite3.Connection) -> None:
    """Install ``vardiya_slot_hash(text, B)`` on a sqlite3 connection (e.g. from a ``connect`` event).

    It is registered as deterministic, which SQLite requires before the function may appear in a
    generated column or an index.
    """
    dbapi_connection.create_function(SQLITE_HASH_FUNCTION, 2, _sqlite_slot_hash, deterministic=True)
