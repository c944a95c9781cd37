"""Dedup through the store, as an attempt sees it (the ``DedupGate`` of ``execute``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from ..store.api import Store
from ..store.types import dumps_json
from .execute import BatchRecord
from .handlers import Handler

__all__ = ["StoreGate"]


def storable(result: Any) -> Any:
    """A result as the dedup store keeps it: itself if it is JSON, else its text form."""
    try:
        dumps_json(result)
    except (TypeError, ValueError):
        return repr(result)
    return result


class StoreGate:
    """Dedup keys of one handler for one work item (``item_id`` None for a sync call)."""

    def __init__(self, store: Store, handler: Handler, item_id: int | None) -> None:
        self._store = store
        self._handler = handler
        self._item_id = item_id
        self._dedup = handler.dedup

    def _key(self, record: BatchRecord) -> str:
        if record.dedup_key is None:
            assert self._dedup is not None
            record.dedup_key = self._dedup.key_of(record.record)
        return record.dedup_key

    def admit(self, records: Sequence[BatchRecord]) -> dict[int, Any]:
        if self._dedup is None:
            return {}
        keys = {record.offset: self._key(record) for record in records}
        return self._store.dedup.admit_many(
            self._handler.name, keys, window=self._dedup.window_s, item_id=self._item_id
        )

    def settle(self, succeeded: Sequence[tuple[BatchRecord, Any]], failed: Sequence[BatchRecord]) -> None:
        if self._dedup is None:
            return
        self._store.dedup.settle_many(
            self._handler.name,
            {self._key(record): storable(result) for record, result in succeeded},
            [self._key(record) for record in failed],
        )

    @contextlib.contextmanager
    def transaction(self, record: BatchRecord) -> Iterator[Any]:
        with self._store.transaction() as connection:
            yield connection
            if self._dedup is not None:
                self._store.dedup.settle_many(
                    self._handler.name, {self._key(record): None}, [], connection=connection
                )
