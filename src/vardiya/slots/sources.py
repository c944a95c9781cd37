"""Where a slot job's records come from: the ids of one slot that the ledger does not have as settled.

A source answers one question: "the records of slot s that are not done (and not given up) for
period P", as a stream of ids in chunks, so a tick's memory does not grow with the table. The in-memory
``IterableSource`` is here; the SQL table source with pushdown is ``sql_source.SqlTableSource``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..store.ledger_changes import LedgerChanges, Marker
from ..store.records import record_key
from .balance import BalanceReport, balance
from .hashing import RecordId
from .scheme import SlotScheme

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["KEPT_OPEN_MAX", "IterableSource", "OpenCounts", "Source"]


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
class OpenCounts(Protocol):
    """A source that counts a whole period's open records per slot faster than iterating them."""

    def open_counts(
        self, *, store: Store, job: str, scheme: SlotScheme, period: str, give_up_after: int | None,
        tokens: dict[int, int] | None = None, held: dict[str, str] | None = None,
    ) -> tuple[int, ...]:
        """How many ids of each slot (``range(scheme.slots)``) ``records`` would yield now; ``tokens``
        (the period's ledger markers) and ``held`` (its live claims) when already read, markers first."""
        ...


#: Open records an ``IterableSource`` keeps between calls, over all its slots (then it starts afresh).
KEPT_OPEN_MAX = 1_000_000


class IterableSource:
    """Ids held in memory (a list, a set, a range, or a callable that returns them).

    The ids are grouped by slot once per scheme, so a tick costs the size of its slot, not of the list.
    A slot's *open* records (not settled in the ledger) are read exactly: the slot's settled keys
    against its ids. Never by comparing counts: a ledger row of a record the list no longer holds would
    stand in for one that was never done, and the record would be skipped without a word. The answer
    is kept with the slot's ledger change marker (``store.ledger_changes``) read before it, so a
    backlog slot, or a closed period of a report, whose ledger has not changed costs one indexed read
    of the period's markers, not a read of its keys.
    """

    def __init__(self, ids: Iterable[RecordId] | Callable[[], Iterable[RecordId]]) -> None:
        self._ids: list[RecordId] = list(ids() if callable(ids) else ids)
        self._by_scheme: dict[str, dict[int, list[RecordId]]] = {}
        # (scheme, job, period, slot, give_up_after) -> (marker read before the rows, the open records)
        self._open: dict[tuple[str, str, str, int, int | None], tuple[Marker, list[RecordId]]] = {}
        self._kept = 0
        self._balances: dict[str, BalanceReport] = {}

    def _slots(self, scheme: SlotScheme) -> dict[int, list[RecordId]]:
        grouped = self._by_scheme.get(scheme.fingerprint)
        if grouped is None:
            grouped = {}
            for record in self._ids:
                grouped.setdefault(scheme.slot_of(record), []).append(record)
            self._by_scheme[scheme.fingerprint] = grouped
        return grouped

    def _kept_answer(
        self, scheme: SlotScheme, job: str, period: str, slot: int, give_up_after: int | None, marker: Marker
    ) -> list[RecordId] | None:
        """The open records kept for the slot under ``marker`` (its marker now), if they are still the answer."""
        kept = self._open.get((scheme.fingerprint, job, period, slot, give_up_after))
        return kept[1] if kept is not None and kept[0] == marker else None

    def _open_records(
        self, store: Store, job: str, scheme: SlotScheme, period: str, slot: int, give_up_after: int | None,
        tokens: dict[int, int], by_slot: dict[int | None, set[str]] | None = None,
    ) -> list[RecordId]:
        """The slot's ids not settled for the period, in list order (claims not applied); exact.

        ``tokens`` are the period's change markers, read before any row: an answer kept under the same
        marker is the answer now. ``by_slot`` is the period's settled keys when the caller read them
        all at once (``Ledger.settled_by_slot``, read after ``tokens``).
        """
        candidates = self._slots(scheme).get(slot, [])
        if not candidates:
            return []
        marker = LedgerChanges.marker(tokens, slot)
        kept = self._kept_answer(scheme, job, period, slot, give_up_after, marker)
        if kept is not None:
            return kept
        key = (scheme.fingerprint, job, period, slot, give_up_after)
        if marker == (None, None):  # nothing of the slot was ever written: every id is open
            settled: set[str] = set()
        elif by_slot is not None:
            settled = by_slot.get(slot, set()) | by_slot.get(None, set())
        else:
            settled = store.ledger.settled_in_slot(job, period, slot, give_up_after=give_up_after)
        open_records = [record for record in candidates if record_key(record) not in settled] if settled else candidates
        if len(open_records) <= KEPT_OPEN_MAX:  # an answer too big to keep leaves the kept ones alone
            if self._kept + len(open_records) > KEPT_OPEN_MAX:
                self._open.clear()
                self._kept = 0
            self._open[key] = (marker, open_records)
            self._kept += len(open_records)
        return open_records

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
        if not self._slots(scheme).get(slot):
            return iter(())
        tokens = store.ledger.changes.markers(job, period)
        open_records = self._open_records(store, job, scheme, period, slot, give_up_after, tokens)
        if not open_records:
            return iter(())
        held = store.ledger.claims.held(job, period, store.clock.now())  # another run's, for now
        free: Iterator[RecordId] = (
            (record for record in open_records if record_key(record) not in held) if held else iter(open_records)
        )
        return islice(free, limit) if limit is not None else free

    def open_counts(
        self, *, store: Store, job: str, scheme: SlotScheme, period: str, give_up_after: int | None,
        tokens: dict[int, int] | None = None, held: dict[str, str] | None = None,
    ) -> tuple[int, ...]:
        """How many of each slot's records ``records`` would yield now: one marker read, one claims read.

        The reports' question for a whole period (``slots/closed.py``), answered from the kept open
        records when the period's ledger has not changed. ``tokens`` and ``held`` are the period's
        markers and live claims when the caller read them for many periods at once (markers first).
        """
        if tokens is None:
            tokens = store.ledger.changes.markers(job, period)
        if held is None:
            held = store.ledger.claims.held(job, period, store.clock.now())
        grouped = self._slots(scheme)
        stale = [
            slot for slot in range(scheme.slots)
            if grouped.get(slot) and (marker := LedgerChanges.marker(tokens, slot)) != (None, None)
            and self._kept_answer(scheme, job, period, slot, give_up_after, marker) is None
        ]
        # Most slots to read (a period not asked about before): one read of the period, not one a slot.
        by_slot = store.ledger.settled_by_slot(job, period, give_up_after=give_up_after) if len(stale) > 1 else None
        counts = []
        for slot in range(scheme.slots):
            open_records = self._open_records(store, job, scheme, period, slot, give_up_after, tokens, by_slot)
            if held and open_records:
                counts.append(sum(1 for record in open_records if record_key(record) not in held))
            else:
                counts.append(len(open_records))
        return tuple(counts)

    def balance(self, scheme: SlotScheme) -> BalanceReport:
        """``slots.balance`` of the ids under ``scheme``, worked out once per scheme: the ids never change."""
        report = self._balances.get(scheme.fingerprint)
        if report is None:
            report = self._balances[scheme.fingerprint] = balance(self._ids, scheme)
        return report

    def all_ids(self) -> Iterator[RecordId]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)
