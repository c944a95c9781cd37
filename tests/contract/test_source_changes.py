"""A slot's open records are read exactly, on both backends, whatever the ledger and the source hold.

The source's ids and the ledger's rows can disagree: a record taken out of the list keeps its ledger
rows, and one put in has none. Comparing how many rows a slot has settled with how many ids it has
would then let a settled row of a record that is gone stand in for one that was never done, and the
tick, the backlog, the not-done report and the backfill would all skip it without a word. These tests
change the list and the ledger under the sources (the in-memory one keeps its answers under the
ledger's change markers between calls) and check every answer against the ledger row by row.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from vardiya import App
from vardiya.clock import VirtualClock
from vardiya.service.status import status_report
from vardiya.slots import IterableSource, SlotScheme, run_tick
from vardiya.slots.closed import not_done_counts
from vardiya.store import LedgerEntry, LedgerStatus, Store
from vardiya.store.ledger_changes import UNSLOTTED
from vardiya.store.schema import ledger_changes

DAY = datetime(2026, 12, 1, tzinfo=UTC)
PERIOD = "2026-12-01"
SCHEME = SlotScheme(slots=2)  # id mod 2: odd ids in slot 1


def _open(source: IterableSource, store: Store, slot: int = 1, *, give_up_after: int | None = None) -> list[int]:
    return list(source.records(
        store=store, job="users", scheme=SCHEME, period=PERIOD, slot=slot, give_up_after=give_up_after, limit=None,
    ))


def _mark(store: Store, records: list[int], status: LedgerStatus = LedgerStatus.DONE, *, slot: int | None = 1) -> None:
    store.ledger.mark("users", PERIOD, [LedgerEntry(record=r, status=status, slot=slot) for r in records])


def test_a_record_that_replaced_a_settled_one_is_open_although_the_counts_match(store: Store) -> None:
    _mark(store, [1, 3, 5])
    assert _open(IterableSource([1, 3, 5]), store) == []
    # 5 left the list and 7 joined it: three ids, three settled rows, and 7 was never done
    replaced = IterableSource([1, 3, 7])
    assert _open(replaced, store) == [7]
    assert replaced.open_counts(store=store, job="users", scheme=SCHEME, period=PERIOD, give_up_after=None) == (0, 1)


def test_kept_answers_follow_every_ledger_write(store: Store) -> None:
    source = IterableSource([1, 3, 5, 7])
    assert _open(source, store) == [1, 3, 5, 7]  # nothing written yet
    _mark(store, [1, 3])
    assert _open(source, store) == [5, 7]
    _mark(store, [5], LedgerStatus.FAILED)
    assert _open(source, store) == [5, 7]
    assert _open(source, store, give_up_after=1) == [7]  # failed once: given up at 1 attempt
    _mark(store, [5, 7])
    assert _open(source, store) == []
    assert _open(source, store) == []  # the kept answer, same marker
    store.ledger.reset("users", PERIOD, [3])  # a deliberate rerun of one record
    assert _open(source, store) == [3]
    _mark(store, [3], slot=None)  # marked without a slot: it may be of any slot, and it is settled
    assert _open(source, store) == []
    store.ledger.reset("users", PERIOD)
    assert _open(source, store) == [1, 3, 5, 7]


def test_every_write_changes_the_markers_of_the_slots_it_wrote_and_only_those(store: Store) -> None:
    changes = store.ledger.changes
    assert changes.markers("users", PERIOD) == {}
    _mark(store, [1], slot=1)
    first = changes.markers("users", PERIOD)
    assert set(first) == {1}
    _mark(store, [2], slot=0)
    second = changes.markers("users", PERIOD)
    assert set(second) == {0, 1} and second[1] == first[1]
    _mark(store, [9], slot=None)
    third = changes.markers("users", PERIOD)
    assert set(third) == {0, 1, UNSLOTTED} and third[0] == second[0] and third[1] == first[1]
    store.ledger.reset("users", PERIOD, [2])
    after_reset = changes.markers("users", PERIOD)
    assert all(after_reset[slot] != third[slot] for slot in third)
    with store.reading() as connection:
        tokens = connection.execute(sa.select(ledger_changes.c.token)).scalars().all()
    assert all(0 <= token < 2**62 for token in tokens)


def test_held_claims_are_left_out_of_a_kept_answer(store: Store, clock: VirtualClock) -> None:
    source = IterableSource([1, 3, 5])
    assert _open(source, store) == [1, 3, 5]
    store.ledger.claims.take(
        "users", PERIOD, ["3"], owner="other-run", until=clock.now() + timedelta(minutes=5), now=clock.now()
    )
    assert _open(source, store) == [1, 5]
    assert source.open_counts(store=store, job="users", scheme=SCHEME, period=PERIOD, give_up_after=None) == (0, 2)
    clock.advance(timedelta(minutes=10))  # the lease ran out: 3 is free again
    assert _open(source, store) == [1, 3, 5]


def _report_app(ids: list[int]) -> App:
    app = App("changes")

    @app.slot_job("users", scheme=SCHEME, source=IterableSource(ids), catch_up=0)
    def handle(record: int, context) -> None:  # type: ignore[no-untyped-def]
        pass

    return app


def test_a_closed_period_with_a_replaced_record_is_not_healthy(store: Store, clock: VirtualClock) -> None:
    first = _report_app([1, 2, 3, 5])
    job = first.get_slot_job("users")
    run_tick(store, job, DAY.replace(hour=0, minute=1))  # slot 0
    run_tick(store, job, DAY.replace(hour=12, minute=1))  # slot 1
    period = SCHEME.period_for_key(PERIOD)
    assert not_done_counts(store, job, period) == (0, 0)
    clock.set(DAY + timedelta(days=1, hours=1))
    assert status_report(store, first)["not_done"] == []
    # the next deploy's list: 5 is gone, 7 is new; slot 1 still has three settled rows and three ids
    second = _report_app([1, 2, 3, 7])
    assert not_done_counts(store, second.get_slot_job("users"), period) == (0, 1)
    status = status_report(store, second)
    assert status["healthy"] is False
    assert status["not_done"][0]["period"] == PERIOD and status["not_done"][0]["slots"] == {"1": 1}


def test_a_store_upgraded_from_0013_has_a_marker_for_every_slot_its_ledger_holds(store: Store) -> None:
    from tests.support.migrations import at_revision

    _mark(store, [1, 3], slot=1)
    _mark(store, [2], slot=0)
    source = IterableSource([1, 2, 3, 5])
    assert _open(source, store) == [5]  # kept under slot 1's marker of before the downgrade
    with at_revision(store, "0013") as connection:
        assert "ledger_changes" not in sa.inspect(connection).get_table_names()
        # written by a vardiya of 0013, which sets no marker: 5 done, and one row without a slot
        connection.exec_driver_sql(
            "INSERT INTO ledger (job, period, record, slot, status, attempts, duration_ms, rows, bytes) "
            "VALUES ('users', '2026-12-01', '5', 1, 'done', 1, 0, 0, 0), "
            "('users', '2026-12-01', '9', NULL, 'done', 1, 0, 0, 0)"
        )
        connection.commit()
    markers = store.ledger.changes.markers("users", PERIOD)
    assert set(markers) == {0, 1, UNSLOTTED}
    assert _open(source, store) == []  # the upgrade's fresh marker does not match the kept answer


def test_a_period_s_figures_are_kept_only_while_its_markers_are_unchanged(store: Store) -> None:
    def figures() -> tuple[tuple[int, ...], tuple[int, ...]]:
        found = store.ledger.period_figures("users", PERIOD, 2)
        return tuple(len(each) for each in found.durations), found.failed

    assert figures() == ((0, 0), (0, 0))
    _mark(store, [1, 3])
    assert figures() == ((0, 2), (0, 0))
    first = store.ledger.period_figures("users", PERIOD, 2)
    assert store.ledger.period_figures("users", PERIOD, 2) is first  # kept: nothing changed
    _mark(store, [2], LedgerStatus.FAILED, slot=0)
    assert figures() == ((1, 2), (1, 0))
    store.ledger.reset("users", PERIOD, [3])
    assert figures() == ((1, 1), (1, 0))
    store.ledger.mark("users", "2026-12-02", [LedgerEntry(record=5, status=LedgerStatus.DONE, slot=1)])
    assert store.ledger.period_figures("users", PERIOD, 2) is store.ledger.period_figures("users", PERIOD, 2)
