"""Where a slot job's records come from: the ids of one slot that the ledger does not have as settled.

A source answers one question: "the records of slot s that are not done (and not given up) for
period P", as a stream of ids in chunks, so a tick's memory does not grow with the table. The in-memory
``IterableSource`` is here; the SQL table source with pushdown is ``sql_source.SqlTableSource``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..store.records import record_key
from .hashing import RecordId
from .scheme import SlotScheme

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["IterableSource", "Source"]


@runtime_checkable
class Source(Protocol):
    """The records of a slot job."""

    def records(
        self,
        *,
        store: Store,
        job: str,
        scheme: SlotScheme,
        period: str,
        slot: int,
        give_up_after: int | None,
        limit: int | None,
    ) -> Iterator[RecordId]:
        """The ids of ``slot`` under ``scheme`` that are not settled for ``period``, at most ``limit``."""
        ...

    def all_ids(self) -> Iterator[RecordId]:
        """Every id of the source, for reports (balance, migration plans)."""
        ...


class IterableSource:
    """Ids held in memory (a list, a set, a range, or a callable that returns them).

    The ids are grouped by slot once per scheme, so a tick costs the size of its slot, not of the list.
    """

    def __init__(self, ids: Iterable[RecordId] | Callable[[], Iterable[RecordId]]) -> None:
        self._ids: list[RecordId] = list(ids() if callable(ids) else ids)
        self._by_scheme: dict[str, dict[int, list[RecordId]]] = {}

    def _slots(self, scheme: SlotScheme) -> dict[int, list[RecordId]]:
        grouped = self._by_scheme.get(scheme.fingerprint)
        if grouped is None:
            grouped = {}
            for record in self._ids:
                grouped.setdefault(scheme.slot_of(record), []).append(record)
            self._by_scheme[scheme.fingerprint] = grouped
        return grouped

    def records(
        self,
        *,
        store: Store,
        job: str,
        scheme: SlotScheme,
        period: str,
        slot: int,
        give_up_after: int | None,
        limit: int | None,
    ) -> Iterator[RecordId]:
        candidates = self._slots(scheme).get(slot, [])
        if not candidates:
            return iter(())
        # A slot whose records are all settled (the usual case for the backlog) costs one count.
        if store.ledger.count_settled(job, period, slot, give_up_after=give_up_after) >= len(candidates):
            return iter(())
        settled = store.ledger.settled_in_slot(job, period, slot, give_up_after=give_up_after)
        settled.update(store.ledger.claims.held(job, period, store.clock.now()))  # another run's, for now
        unsettled = (record for record in candidates if record_key(record) not in settled)
        return islice(unsettled, limit) if limit is not None else unsettled

    def all_ids(self) -> Iterator[RecordId]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)
