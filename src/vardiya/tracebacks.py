"""The traceback kept with a failure: formatted where the exception is caught, bounded, storable.

A failure's error line says what went wrong; its traceback says where. Both are stored with the
failed ledger record, work item attempt or pipeline task run (migration 0010), so ``vardiya errors``
and ``vardiya dlq show`` can answer "why" long after the process that failed is gone.

A traceback is bounded to its last ``TRACEBACK_LIMIT`` bytes (UTF-8), cut at a line boundary: the end
is where the error was raised, the part worth keeping when a deep recursion or a long chain of causes
runs to megabytes. A cut traceback starts with a line that says how much was left out. NUL characters
(which PostgreSQL text refuses, ``store.types.check_no_nul``) are written as ``\\x00``.
"""

from __future__ import annotations

import traceback

__all__ = ["TRACEBACK_LIMIT", "bound_traceback", "format_traceback", "storable_line"]

#: The most of a traceback kept, in UTF-8 bytes (the last part of it).
TRACEBACK_LIMIT = 8 * 1024


def format_traceback(error: BaseException, *, limit: int = TRACEBACK_LIMIT) -> str:
    """The traceback of ``error`` (with its causes, as Python prints them), bounded by ``bound_traceback``."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return bound_traceback(text, limit=limit)


def bound_traceback(text: str, *, limit: int = TRACEBACK_LIMIT) -> str:
    """``text`` NUL-free and at most ``limit`` bytes: its last whole lines, after a line saying the cut."""
    text = text.replace("\x00", "\\x00").rstrip("\n")
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    # Room for the header; the header itself is short and ASCII, its length bounded by the digits.
    header_room = 80
    tail = data[len(data) - (limit - header_room):]
    newline = tail.find(b"\n")
    # Keep whole lines: drop the partial first line (a single line longer than the room is kept cut).
    kept = tail[newline + 1:] if 0 <= newline < len(tail) - 1 else tail
    kept_text = kept.decode("utf-8", errors="ignore")
    left_out = len(data) - len(kept)
    return f"[traceback cut: its first {left_out} bytes left out, the last {len(kept)} kept]\n{kept_text}"


def storable_line(text: str) -> str:
    """An error line as the store keeps it: NUL characters written as ``\\x00``."""
    return text.replace("\x00", "\\x00")
