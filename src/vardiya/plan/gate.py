"""Dedup keys in memory: the ``DedupGate`` an attempt uses, for a replay instead of a store.

The rule is the store's own (``store.dedup.is_duplicate``); only where the keys live differs. Keys
are taken, settled and (on a redrive) given a fresh window exactly as ``DedupKeys.admit_many``,
``settle_many`` and ``extend_for_items`` do. Two things the store does not do, because a plan needs
them: the gate counts its reads and writes and lets their time pass on the attempt's clock (the
profile's dedup costs: a read for every record an attempt looks up, which is every record of its
batch, and a write for every record whose outcome it settles); and it can be told not to retain the
keys of dead items, which is the usual design a plan compares vardiya's with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..clock import Clock
from ..invoke.execute import BatchRecord
from ..rules.dedup import DedupOutcome, is_duplicate
from ..store.records import ItemState

__all__ = ["ItemGate", "MemoryKeys"]

_UNFINISHED = (ItemState.PENDING, ItemState.RUNNING, ItemState.FAILED)


@dataclass(slots=True)
class _Key:
    outcome: DedupOutcome
    result: Any
    first_seen: datetime
    expires_at: datetime
    item_id: int | None


class MemoryKeys:
    """The dedup keys of one replayed handler, and the states of the items that hold them."""

    def __init__(
        self,
        *,
        clock: Clock,
        window_s: float,
        read_ms: float = 0.0,
        write_ms: float = 0.0,
        retain_dead: bool = True,
    ) -> None:
        self.clock = clock
        self.window = timedelta(seconds=window_s)
        self.read_s = read_ms / 1000.0
        self.write_s = write_ms / 1000.0
        self.retain_dead = retain_dead
        self.states: dict[int, ItemState] = {}
        """Item id -> state, kept up to date by the replay (a key held by a dead item stays live)."""
        self.reads = 0
        self.writes = 0
        self.reprocessed = 0
        """Records that ran although their key had already succeeded (its window had passed)."""
        self._keys: dict[str, _Key] = {}
        self._held: dict[int, set[str]] = {}

    def for_item(self, item_id: int | None) -> ItemGate:
        """The gate of one work item (None: a sync call, which has no item)."""
        return ItemGate(self, item_id)

    @property
    def dedup_ms(self) -> float:
        """The time the dedup store took: every read and every write at the profile's cost."""
        return (self.reads * self.read_s + self.writes * self.write_s) * 1000.0

    def redrive(self, item_id: int) -> None:
        """A dead item is redriven now: its keys get a fresh window (``DedupKeys.extend_for_items``)."""
        now = self.clock.now()
        for key in self._held.get(item_id, ()):
            row = self._keys[key]
            if row.item_id == item_id:
                row.expires_at = max(row.expires_at, now + (row.expires_at - row.first_seen))

    def _admit(self, item_id: int | None, records: Sequence[BatchRecord]) -> dict[int, Any]:
        now = self.clock.now()
        duplicates: dict[int, Any] = {}
        for record in records:
            key = record.dedup_key
            assert key is not None, "a replayed record with dedup carries its key"
            row = self._keys.get(key)
            if row is not None:
                holder = self.states.get(row.item_id) if row.item_id is not None else None
                live = row.expires_at > now or (self.retain_dead and holder is ItemState.DEAD)
                if is_duplicate(
                    row.outcome,
                    live=live,
                    same_item=item_id is not None and row.item_id == item_id,
                    holder_unfinished=holder in _UNFINISHED,
                ):
                    duplicates[record.offset] = row.result
                    continue
                if row.outcome is DedupOutcome.SUCCEEDED:
                    self.reprocessed += 1
                if row.item_id is not None:
                    self._held.get(row.item_id, set()).discard(key)
            self._keys[key] = _Key(DedupOutcome.PENDING, None, now, now + self.window, item_id)
            if item_id is not None:
                self._held.setdefault(item_id, set()).add(key)
        self.reads += len(records)
        self.clock.sleep(self.read_s * len(records))
        return duplicates

    def _settle(self, succeeded: Sequence[tuple[BatchRecord, Any]], failed: Sequence[BatchRecord]) -> None:
        for record, result in succeeded:
            row = self._keys[record.dedup_key]  # type: ignore[index]
            row.outcome, row.result = DedupOutcome.SUCCEEDED, result
        for record in failed:
            row = self._keys[record.dedup_key]  # type: ignore[index]
            row.outcome, row.result = DedupOutcome.FAILED, None
        written = len(succeeded) + len(failed)
        self.writes += written
        self.clock.sleep(self.write_s * written)


class ItemGate:
    """``MemoryKeys`` as one item's attempt sees it: the ``DedupGate`` protocol of ``execute``."""

    __slots__ = ("_item_id", "_keys")

    def __init__(self, keys: MemoryKeys, item_id: int | None) -> None:
        self._keys = keys
        self._item_id = item_id

    def admit(self, records: Sequence[BatchRecord]) -> dict[int, Any]:
        return self._keys._admit(self._item_id, records)

    def settle(self, succeeded: Sequence[tuple[BatchRecord, Any]], failed: Sequence[BatchRecord]) -> None:
        self._keys._settle(succeeded, failed)

    @contextlib.contextmanager
    def transaction(self, record: BatchRecord) -> Iterator[None]:
        """No store to write to: the record's key is settled as succeeded when the block ends."""
        yield None
        self._keys._settle([(record, None)], [])
