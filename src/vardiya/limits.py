"""What vardiya accepts at its edges: names, keys and times. Pure.

One set of rules for declarations (``App``, handlers, slot jobs, pipelines, stages) and for the store's
API, so that what SQLite would keep and PostgreSQL would refuse is refused on both, with one line,
before anything is written.

- A **name** (handler, slot job, pipeline, stage, trigger) is 1 to ``NAME_MAX`` (190) ASCII letters,
  digits, ``_``, ``-`` and ``.``, starting with a letter, a digit or ``_``. Names become parts of
  work-item kinds (``call:NAME``, ``tick:NAME``, ``pipeline:NAME``) and of file paths and metrics
  labels, so they stay plain.
- A **kind** (of a work item) is 1 to ``KIND_MAX`` (200) of the same characters plus ``:``.
- A **key** (a work item's, a dedup key, a stream's order key, a ledger record id) is 1 to
  ``KEY_MAX`` (500) characters of any text but control characters (U+0000 to U+001F, U+007F).
  PostgreSQL's text refuses NUL, and a key is an identifier, not a document.

The limits are those of the store's columns (``VARCHAR(200)`` kinds and names, ``VARCHAR(500)`` keys),
counted in characters as PostgreSQL counts them. They also keep every index entry under PostgreSQL's
b-tree limit (2,704 bytes): a kind of 200 ASCII bytes and a key of 500 four-byte characters make 2,200.

**Times** vardiya takes in (``--at``, ``--from``, ``--to``, ``TIME``, a ``VirtualClock``, a tick's planned
time, an item's ``run_after``) lie in [``TIME_MIN``, ``TIME_MAX``): 1970-01-01 to 9000-01-01 UTC. The
lower end is where the IANA zone database is authoritative; the upper end leaves every period, window,
lease, retry wait and backlog computed from a time about a thousand years before Python's last date.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from .errors import InvalidInput

__all__ = [
    "KEY_MAX",
    "KIND_MAX",
    "NAME_MAX",
    "PERIOD_MAX",
    "TIME_MAX",
    "TIME_MIN",
    "check_key",
    "check_kind",
    "check_name",
    "check_time",
]

NAME_MAX = 190
KIND_MAX = 200
KEY_MAX = 500
#: A ledger period key (``2026-12-01``, ``2026-12-01T14:00``): the ledger's ``VARCHAR(64)``.
PERIOD_MAX = 64

TIME_MIN = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(9000, 1, 1, tzinfo=UTC)

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_KIND = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAME_RULE = f"1 to {NAME_MAX} ASCII letters, digits, '_', '-' or '.', starting with a letter, a digit or '_'"


def _shown(value: str) -> str:
    """A value for a one-line message: long ones cut, so the line stays readable."""
    return repr(value) if len(value) <= 60 else f"{value[:40]!r}... ({len(value)} characters)"


def check_name(name: object, what: str) -> str:
    """``name`` if it is a valid name; else a one-line error saying the rule (``what``: "a handler name")."""
    if not isinstance(name, str):
        raise InvalidInput(f"{what} must be a string of {_NAME_RULE}; got {name!r}")
    if len(name) > NAME_MAX or _NAME.fullmatch(name) is None:
        raise InvalidInput(f"{what} must be {_NAME_RULE}; got {_shown(name)}")
    return name


def check_kind(kind: object) -> str:
    """``kind`` if it is a valid work-item kind; else a one-line error."""
    if not isinstance(kind, str) or len(kind) > KIND_MAX or _KIND.fullmatch(kind) is None:
        shown = _shown(kind) if isinstance(kind, str) else repr(kind)
        raise InvalidInput(
            f"a work-item kind must be 1 to {KIND_MAX} ASCII letters, digits, '_', '-', '.' or ':', "
            f"starting with a letter, a digit or '_'; got {shown}"
        )
    return kind


def check_key(key: object, what: str = "a key", limit: int = KEY_MAX) -> str:
    """``key`` if it is 1 to ``limit`` characters without control characters; else a one-line error."""
    if not isinstance(key, str):
        raise InvalidInput(f"{what} must be a string, got {key!r}")
    # isprintable() is one C loop and true for nearly every key; only the others are searched.
    if not key or len(key) > limit or (not key.isprintable() and _CONTROL.search(key) is not None):
        problem = "is empty" if not key else f"is {len(key)} characters long" if len(key) > limit else "holds a control character"
        raise InvalidInput(
            f"{what} must be 1 to {limit} characters without control characters (U+0000-U+001F, U+007F); "
            f"{_shown(key)} {problem}"
        )
    return key


def _range() -> str:
    return f"{TIME_MIN:%Y-%m-%dT%H:%MZ} to {TIME_MAX:%Y-%m-%dT%H:%MZ} (exclusive)"


def check_time(moment: datetime, what: str = "time") -> datetime:
    """``moment`` in UTC if it lies in the supported range; else a one-line error giving the range.

    ``moment`` must be aware (``clock.ensure_aware`` says so first where a naive one may come).
    """
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:  # an offset that pushes it past year 1 or year 9999
        utc = None
    if utc is None or not TIME_MIN <= utc < TIME_MAX:
        raise InvalidInput(
            f"{what} {moment.isoformat()} is outside the times vardiya supports, {_range()}; give a time in that range"
        )
    return utc
