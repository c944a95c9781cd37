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

__all__ = ["CountingSource", "IterableSource", "Source", "count_by_iterating"]


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


@runtime_checkable
class CountingSource(Protocol):
    """A source that can count each slot's not-done records without handing them out (optional).

    ``count_not_done`` must equal ``count_by_iterating`` for the same store: per slot of ``scheme``, how
    many ids ``records(..., give_up_after=None, limit=None)`` would yield for ``period``. A source
    without it is counted by iterating (``slots.closed``).
    """

    def count_not_done(self, *, store: Store, job: str, scheme: SlotScheme, period: str) -> tuple[int, ...]:
        """Per slot 0..B-1 of ``scheme``, the records not done (never run, or failed; given up too) in ``period``."""
        ...


def count_by_iterating(source: Source, *, store: Store, job: str, scheme: SlotScheme, period: str) -> tuple[int, ...]:
    """Per slot, how many not-done records ``source.records`` yields (given-up ones too): the definition."""
    return tuple(
        sum(
            1
            for _ in source.records(
                store=store, job=job, scheme=scheme, period=period, slot=slot, give_up_after=None, limit=None
            )
        )
        for slot in range(scheme.slots)
    )


class IterableSource:
    """Ids held in memory (a list, a set, a range, or a callable that returns them).

    The ids are grouped by slot once per scheme, so a tick costs the size of its slot, not of the list.
    """

    def __init__(self, ids: Iterable[RecordId] | Callable[[], Iterable[RecordId]]) -> None:
        self._ids: list[RecordId] = list(ids() if callable(ids) else ids)
        self._by_scheme: dict[str, dict[int, list[RecordId]]] = {}
        self._distinct_keys: bool | None = None

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

    def _distinct(self) -> bool:
        """Whether no two ids share a ledger key (so a slot's size is its number of ledger keys)."""
        if self._distinct_keys is None:
            self._distinct_keys = len({record_key(record) for record in self._ids}) == len(self._ids)
        return self._distinct_keys

    def count_not_done(self, *, store: Store, job: str, scheme: SlotScheme, period: str) -> tuple[int, ...]:
        """Per slot: its size (known, the ids are fixed) less its settled records (one grouped count).

        Exact when the ledger's settled rows of a slot are records of that slot, which is what ticks
        write. Whenever the counts show otherwise (rows without a slot, a slot with more settled rows
        than records, live claims, ids sharing a key) the period is counted by iterating instead.
        """
        grouped = self._slots(scheme)
        settled = store.ledger.settled_counts(job, period, scheme.slots)
        sizes = [len(grouped.get(slot, ())) for slot in range(scheme.slots)]
        if (
            settled.unslotted
            or settled.outside
            or any(count > size for count, size in zip(settled.slots, sizes, strict=True))
            or not self._distinct()
            or store.ledger.claims.count_held(job, period, store.clock.now())
        ):
            return count_by_iterating(self, store=store, job=job, scheme=scheme, period=period)
        return tuple(size - count for size, count in zip(sizes, settled.slots, strict=True))

    def all_ids(self) -> Iterator[RecordId]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)
