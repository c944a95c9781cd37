"""Counting not-done records without reading them agrees with iterating the source, on both backends.

``slots.closed.not_done_counts`` asks a source that can count (``IterableSource``, ``SqlTableSource``)
for its per-slot counts; ``sources.count_by_iterating`` (the records a tick or a backfill would get,
given-up ones included) is the definition. Every case here compares the two on the same store: a
table of record states (never run, done, failed, given up, done in another period only, done without
a slot), a scheme change between periods, anomalies the counts must notice (rows without a slot, rows
of a slot the scheme does not have, an over-full slot, live claims, ids sharing a key), a custom
source that cannot count, and random ledgers (hypothesis).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vardiya.slots import IterableSource, SlotJob, SlotScheme
from vardiya.slots.closed import not_done_counts
from vardiya.slots.hashing import RecordId
from vardiya.slots.job import SchemeChange
from vardiya.slots.scheme import Assign
from vardiya.slots.sources import CountingSource, Source, count_by_iterating
from vardiya.slots.sql_source import SqlTableSource
from vardiya.store import LedgerEntry, LedgerStatus, Store

from .test_sql_source import create_users

JOB = "counted"
DAY = datetime(2026, 11, 20, tzinfo=UTC)
RECORDS = 240  # 10 a slot of 24
MAX_ATTEMPTS = 3
STATES = ("never", "done", "failed", "given_up", "elsewhere", "unslotted")


def _job(source: Source, *, changes: tuple[SchemeChange, ...] = ()) -> SlotJob:
    return SlotJob(
        name=JOB,
        scheme=SlotScheme(slots=24),
        source=source,
        handler=lambda record: None,
        max_attempts=MAX_ATTEMPTS,
        scheme_changes=changes,
    )


def _mark(store: Store, job: SlotJob, day: int, states: dict[int, str]) -> None:
    """Ledger rows of ``day``'s period for records in ``states``, in the slots ticks would give them.

    ``elsewhere`` records are done in the period before only (in that period's scheme) and in another
    job; ``unslotted`` ones are done without a slot.
    """
    period = job.scheme.period_of(DAY + timedelta(days=day))
    before = job.scheme.period_after(period, -1)
    scheme, earlier = job.scheme_for(period), job.scheme_for(before)
    entries: list[LedgerEntry] = []
    elsewhere: list[LedgerEntry] = []
    other_job: list[LedgerEntry] = []
    for record, state in states.items():
        slot = scheme.slot_of(record)
        if state == "done":
            entries.append(LedgerEntry(record=record, status=LedgerStatus.DONE, slot=slot))
        elif state == "failed":
            entries.append(LedgerEntry(record=record, status=LedgerStatus.FAILED, attempts=1, slot=slot))
        elif state == "given_up":
            entries.append(LedgerEntry(record=record, status=LedgerStatus.FAILED, attempts=MAX_ATTEMPTS, slot=slot))
        elif state == "unslotted":
            entries.append(LedgerEntry(record=record, status=LedgerStatus.DONE))
        elif state == "elsewhere":
            elsewhere.append(LedgerEntry(record=record, status=LedgerStatus.DONE, slot=earlier.slot_of(record)))
            other_job.append(LedgerEntry(record=record, status=LedgerStatus.DONE, slot=slot))
    store.ledger.mark(JOB, period.key, entries)
    store.ledger.mark(JOB, before.key, elsewhere)
    store.ledger.mark("another-job", period.key, other_job)


class _Watched(IterableSource):
    """An ``IterableSource`` that counts its ``records`` calls (did the count iterate?)."""

    calls = 0

    def records(self, **question) -> Iterator[RecordId]:  # type: ignore[no-untyped-def]
        self.calls += 1
        return super().records(**question)


def _both(
    store: Store, job: SlotJob, day: int = 0, *, iterates: bool | None = None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The counts, and the reference; with ``iterates``, whether counting must (not) have iterated."""
    period = job.scheme.period_of(DAY + timedelta(days=day))
    scheme = job.scheme_for(period)
    before = getattr(job.source, "calls", 0)
    counted = not_done_counts(store, job, period)
    if iterates is not None:
        assert (job.source.calls > before) is iterates  # type: ignore[attr-defined]
    expected = count_by_iterating(job.source, store=store, job=JOB, scheme=scheme, period=period.key)
    return counted, expected


def _table_states() -> dict[int, str]:
    return {record: STATES[(record * 7 + record // 24) % len(STATES)] for record in range(RECORDS)}


class _OnlyRecords:
    """A third-party source: ``records`` and ``all_ids``, no ``count_not_done``."""

    def __init__(self, ids: list[int]) -> None:
        self._inner = IterableSource(ids)
        self.calls = 0

    def records(self, **question) -> Iterator[RecordId]:  # type: ignore[no-untyped-def]
        self.calls += 1
        return self._inner.records(**question)

    def all_ids(self) -> Iterator[RecordId]:
        return self._inner.all_ids()


def test_an_iterable_source_counts_every_state_like_iterating(store: Store) -> None:
    job = _job(_Watched(range(RECORDS)))
    states = _table_states()
    del states[5]  # a record with no ledger row at all
    _mark(store, job, 0, {r: s for r, s in states.items() if s != "unslotted"})
    counted, iterated = _both(store, job, iterates=False)
    assert counted == iterated
    # never run, failed and given up are not done; done and done-in-another-period-only are as said
    expected = [0] * 24
    for record in range(RECORDS):
        if states.get(record, "never") in ("never", "failed", "given_up", "elsewhere", "unslotted"):
            expected[record % 24] += 1
    assert list(counted) == expected and sum(expected) > 0


def test_rows_without_a_slot_are_counted_like_iterating(store: Store) -> None:
    job = _job(_Watched(range(RECORDS)))
    _mark(store, job, 0, _table_states())
    counted, iterated = _both(store, job, iterates=True)
    assert counted == iterated


def test_a_scheme_change_between_periods_counts_each_period_in_its_own_scheme(store: Store) -> None:
    change = SchemeChange(effective_from=DAY + timedelta(days=1), scheme=SlotScheme(slots=12, assign=Assign.HASH))
    job = _job(_Watched(range(RECORDS)), changes=(change,))
    states = {r: s for r, s in _table_states().items() if s != "unslotted"}
    _mark(store, job, 0, states)
    _mark(store, job, 1, {r: ("done" if s == "failed" else s) for r, s in states.items()})
    for day, slots in ((0, 24), (1, 12)):
        counted, iterated = _both(store, job, day, iterates=False)
        assert len(counted) == slots and counted == iterated


def test_rows_of_a_slot_the_scheme_does_not_have_and_over_full_slots_are_counted_like_iterating(
    store: Store,
) -> None:
    job = _job(_Watched(range(RECORDS)))
    period = job.scheme.period_of(DAY).key
    # slot 3 full and one more row in it (a record of slot 4 marked as slot 3), slot 30 out of range
    store.ledger.mark(
        JOB, period, [LedgerEntry(record=r, status=LedgerStatus.DONE, slot=3) for r in range(3, RECORDS, 24)]
    )
    store.ledger.mark(JOB, period, [LedgerEntry(record=4, status=LedgerStatus.DONE, slot=3)])
    counted, iterated = _both(store, job, iterates=True)
    assert counted == iterated and counted[3] == 0 and counted[4] == 10
    store.ledger.mark(JOB, period, [LedgerEntry(record=5, status=LedgerStatus.DONE, slot=30)])
    counted, iterated = _both(store, job, iterates=True)
    assert counted == iterated and counted[5] == 10


def test_records_held_by_a_live_claim_are_counted_like_iterating(store: Store) -> None:
    job = _job(_Watched(range(RECORDS)))
    period = job.scheme.period_of(DAY).key
    _mark(store, job, 0, dict.fromkeys(range(0, RECORDS, 3), "done"))
    now = store.clock.now()
    taken = store.ledger.claims.take(
        JOB, period, ["1", "2", "25"], owner="run-1", until=now + timedelta(hours=1), now=now
    )
    assert taken == {"1", "2", "25"}
    counted, iterated = _both(store, job, iterates=True)
    assert counted == iterated and counted[1] == 8  # slot 1: none done, 2 of its 10 held


def test_ids_sharing_a_ledger_key_are_counted_like_iterating(store: Store) -> None:
    job = _job(_Watched([*range(48), 7, 9]))  # 7 and 9 twice: one ledger key each
    _mark(store, job, 0, dict.fromkeys(range(0, 48, 2), "done"))
    counted, iterated = _both(store, job, iterates=True)
    assert counted == iterated


def test_a_source_without_count_not_done_is_iterated(store: Store) -> None:
    source = _OnlyRecords(list(range(RECORDS)))
    assert not isinstance(source, CountingSource) and isinstance(IterableSource([]), CountingSource)
    job = _job(source)
    _mark(store, job, 0, _table_states())
    period = job.scheme.period_of(DAY)
    counted = not_done_counts(store, job, period)
    assert source.calls == 24  # one records() per slot
    reference = _Watched(range(RECORDS))
    assert counted == count_by_iterating(reference, store=store, job=JOB, scheme=job.scheme, period=period.key)
    assert counted == reference.count_not_done(store=store, job=JOB, scheme=job.scheme, period=period.key)


@pytest.mark.parametrize("assign", [Assign.MOD, Assign.HASH])
def test_a_table_in_the_stores_database_counts_in_sql_like_iterating(
    store: Store, store_url: str, assign: Assign
) -> None:
    create_users(store_url, list(range(RECORDS)))
    with SqlTableSource(store_url, "users") as source:
        job = SlotJob(
            name=JOB,
            scheme=SlotScheme(slots=24, assign=assign),
            source=source,
            handler=lambda r: None,
            max_attempts=MAX_ATTEMPTS,
        )
        assert source.shares_database_with(store)
        counted, iterated = _both(store, job)
        assert counted == iterated and sum(counted) == RECORDS  # nothing run yet
        _mark(store, job, 0, _table_states())
        now = store.clock.now()
        store.ledger.claims.take(
            JOB, job.scheme.period_of(DAY).key, ["1"], owner="run-1", until=now + timedelta(hours=1), now=now
        )
        counted, iterated = _both(store, job)
        assert counted == iterated and 0 < sum(counted) < RECORDS


_STATE = st.sampled_from(STATES)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    states=st.dictionaries(st.integers(0, 95), _STATE, max_size=96),
    ids=st.lists(st.integers(0, 95), min_size=1, max_size=96, unique=True),
    claimed=st.lists(st.integers(0, 95), max_size=4, unique=True),
    slots=st.sampled_from([1, 4, 24]),
)
def test_random_ledgers_count_like_iterating(
    store: Store, states: dict[int, str], ids: list[int], claimed: list[int], slots: int
) -> None:
    job = SlotJob(
        name=JOB,
        scheme=SlotScheme(slots=slots),
        source=_Watched(ids),
        handler=lambda r: None,
        max_attempts=MAX_ATTEMPTS,
    )
    period = job.scheme.period_of(DAY)
    for key in (period.key, job.scheme.period_after(period, -1).key):
        store.ledger.reset(JOB, key)
    store.ledger.reset("another-job", period.key)
    now = store.clock.now()
    store.ledger.claims.release("run-1", JOB, period.key, [str(r) for r in range(96)])
    # ledger rows only for records the source has, in their own slots (what ticks write) or none
    _mark(store, job, 0, {r: s for r, s in states.items() if r in set(ids)})
    store.ledger.claims.take(
        JOB, period.key, [str(r) for r in claimed], owner="run-1", until=now + timedelta(hours=1), now=now
    )
    counted, iterated = _both(store, job)
    assert counted == iterated
