"""The dedup rule: when a record whose key is already stored must not run, and what a key's outcome is."""

from __future__ import annotations

import enum

__all__ = ["DedupOutcome", "is_duplicate"]


class DedupOutcome(str, enum.Enum):
    """What became of the first invocation that carried a dedup key."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


def is_duplicate(outcome: DedupOutcome, *, live: bool, same_item: bool, holder_unfinished: bool) -> bool:
    """Whether a record whose key is already stored must not run (the one rule, shared with the planner).

    ``live``: within its window, or held by a dead item. ``same_item``: held by the item now running
    (a retry, or a redrive of it). ``holder_unfinished``: the holding item is pending, running or failed.
    A key that succeeded is a duplicate while live, and always within its own item (the record is done
    even if the item died and was redriven after the window); a pending key is a duplicate while a
    different unfinished item holds it (a copy in flight elsewhere); a failed key is never one.
    """
    if outcome is DedupOutcome.SUCCEEDED:
        return live or same_item
    if outcome is DedupOutcome.PENDING:
        return live and not same_item and holder_unfinished
    return False
