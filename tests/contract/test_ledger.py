"""The ledger: one row per (job, record, period), bulk marks, done is sticky, not-done as an anti-join."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.store import LedgerEntry, LedgerStatus, Store
from vardiya.store.schema import ledger

DONE = LedgerStatus.DONE
FAILED = LedgerStatus.FAILED


def _ledger_rows(store: Store) -> int:
    with store.engine.connect() as connection:
        return connection.execute(sa.select(sa.func.count()).select_from(ledger)).scalar_one()


def test_bulk_mark_creates_one_row_per_record(store: Store) -> None:
    entries = (LedgerEntry(record=record, status=DONE) for record in range(1, 5001))

    assert store.ledger.mark("billing", "2026-12-01", entries, chunk_size=1000) == 5000

    assert _ledger_rows(store) == 5000
    assert store.ledger.counts("billing", "2026-12-01") == {DONE: 5000, FAILED: 0}
    assert store.ledger.completed("billing", 1, "2026-12-01")
    assert store.ledger.completed("billing", 5000, "2026-12-01")
    assert not store.ledger.completed("billing", 5001, "2026-12-01")


def test_marking_again_adds_attempts_and_keeps_one_row(store: Store) -> None:
    records = range(1, 1201)
    store.ledger.mark("billing", "p1", (LedgerEntry(record=r, status=FAILED, error="x") for r in records))
    store.ledger.mark("billing", "p1", (LedgerEntry(record=r, status=FAILED, attempts=2) for r in records))
    store.ledger.mark("billing", "p1", (LedgerEntry(record=r, status=DONE) for r in range(1, 11)))

    assert _ledger_rows(store) == 1200
    assert store.ledger.get("billing", 5, "p1").attempts == 4
    assert store.ledger.get("billing", 500, "p1").attempts == 3
    assert store.ledger.counts("billing", "p1") == {DONE: 10, FAILED: 1190}


def test_one_row_per_job_record_and_period(store: Store) -> None:
    store.ledger.mark("billing", "p1", [LedgerEntry(record=7, status=DONE)])
    store.ledger.mark("billing", "p2", [LedgerEntry(record=7, status=FAILED)])
    store.ledger.mark("mailing", "p1", [LedgerEntry(record=7, status=FAILED)])

    assert _ledger_rows(store) == 3
    assert store.ledger.completed("billing", 7, "p1")
    assert not store.ledger.completed("billing", 7, "p2")
    assert not store.ledger.completed("mailing", 7, "p1")


def test_done_is_sticky(store: Store, clock: VirtualClock) -> None:
    t0 = clock.now()
    done = LedgerEntry(
        record="a", status=DONE, started_at=t0, finished_at=t0 + timedelta(seconds=2), duration_ms=2000.0, rows=10,
        bytes=400,
    )
    store.ledger.mark("job", "p", [done])
    later = t0 + timedelta(hours=1)
    store.ledger.mark(
        "job", "p", [LedgerEntry(record="a", status=FAILED, started_at=later, finished_at=later, error="raced")]
    )

    row = store.ledger.get("job", "a", "p")
    assert row.status is DONE
    assert row.attempts == 2
    assert (row.duration_ms, row.rows, row.bytes, row.error) == (2000.0, 10, 400, None)
    assert row.first_attempt_at == t0
    assert row.last_attempt_at == later
    assert store.ledger.completed("job", "a", "p")


def test_failed_then_done_is_done(store: Store, clock: VirtualClock) -> None:
    t0 = clock.now()
    store.ledger.mark("job", "p", [LedgerEntry(record=9, status=FAILED, started_at=t0, error="timeout")])
    t1 = t0 + timedelta(minutes=5)
    store.ledger.mark("job", "p", [LedgerEntry(record=9, status=DONE, started_at=t1, rows=3, duration_ms=12.5)])

    row = store.ledger.get("job", 9, "p")
    assert (row.status, row.attempts, row.error, row.rows, row.duration_ms) == (DONE, 2, None, 3, 12.5)
    assert (row.first_attempt_at, row.last_attempt_at) == (t0, t1)


def test_per_record_values_are_stored(store: Store, clock: VirtualClock) -> None:
    t0 = clock.now()
    entries = [
        LedgerEntry(
            record=1, status=DONE, attempts=2, started_at=t0, finished_at=t0 + timedelta(milliseconds=1500),
            duration_ms=1500.25, rows=42, bytes=2**40, slot=3,
        ),
        LedgerEntry(record="customer-ş", status=FAILED, started_at=t0, duration_ms=3.0, error="HTTP 503\nretry later"),
    ]
    store.ledger.mark("job", "p", entries)

    first = store.ledger.get("job", 1, "p")
    assert first.record == "1"
    assert (first.status, first.attempts, first.duration_ms, first.rows, first.bytes, first.slot) == (
        DONE, 2, 1500.25, 42, 2**40, 3,
    )
    assert (first.first_attempt_at, first.last_attempt_at) == (t0, t0 + timedelta(milliseconds=1500))
    second = store.ledger.get("job", "customer-ş", "p")
    assert (second.status, second.attempts, second.error, second.slot) == (FAILED, 1, "HTTP 503\nretry later", None)
    assert second.last_attempt_at == t0  # no finished_at: the start is the last attempt time
    assert [row.record for row in store.ledger.rows("job", "p")] == ["1", "customer-ş"]
    assert store.ledger.get("job", 2, "p") is None


def test_int_and_str_ids_share_the_decimal_key(store: Store) -> None:
    store.ledger.mark("job", "p", [LedgerEntry(record=42, status=DONE)])

    assert store.ledger.completed("job", "42", "p")
    assert store.ledger.done_among("job", "p", ["42", 42, 43]) == {"42"}
    with pytest.raises(InvalidInput, match="record must be an int or a str id, got True"):
        store.ledger.mark("job", "p", [LedgerEntry(record=True, status=DONE)])


def test_not_done_and_done_among_in_chunks_preserving_order(store: Store) -> None:
    store.ledger.mark("job", "p", (LedgerEntry(record=r, status=DONE) for r in range(0, 2500, 2)))
    store.ledger.mark("job", "p", (LedgerEntry(record=r, status=FAILED) for r in range(1, 2500, 6)))
    store.ledger.mark("job", "other-period", (LedgerEntry(record=r, status=DONE) for r in range(2500)))
    records = list(range(2499, -1, -1))  # descending, more than two lookup chunks

    not_done = list(store.ledger.not_done("job", "p", iter(records)))
    done = store.ledger.done_among("job", "p", records)

    assert not_done == [r for r in records if r % 2 == 1]
    assert done == {str(r) for r in range(0, 2500, 2)}
    names = ["b-1", "a-2", "c-3", "b-4"]
    store.ledger.mark("job", "s", [LedgerEntry(record="a-2", status=DONE), LedgerEntry(record="c-3", status=FAILED)])
    assert list(store.ledger.not_done("job", "s", names)) == ["b-1", "c-3", "b-4"]
    assert store.ledger.done_among("job", "s", names) == {"a-2"}
    assert list(store.ledger.not_done("job", "s", [])) == []


def test_not_done_clause_is_an_anti_join_on_an_integer_column(store: Store) -> None:
    candidates_metadata = sa.MetaData()
    candidates = sa.Table("candidates", candidates_metadata, sa.Column("id", sa.Integer, nullable=False))
    with store.engine.begin() as connection:
        candidates_metadata.create_all(connection)
    try:
        with store.engine.begin() as connection:
            connection.execute(candidates.insert(), [{"id": i} for i in range(1, 1001)])
        store.ledger.mark("job", "p", (LedgerEntry(record=r, status=DONE) for r in range(1, 401)))
        store.ledger.mark("job", "p", (LedgerEntry(record=r, status=FAILED) for r in range(401, 451)))
        store.ledger.mark("job", "other", (LedgerEntry(record=r, status=DONE) for r in range(401, 1001)))
        store.ledger.mark("other-job", "p", (LedgerEntry(record=r, status=DONE) for r in range(401, 1001)))

        def not_done(**options: int) -> sa.Select[tuple[int]]:
            clause = store.ledger.not_done_clause("job", "p", candidates.c.id, **options)
            return sa.select(candidates.c.id).where(clause).order_by(candidates.c.id)

        with store.engine.connect() as connection:
            ids = list(connection.execute(not_done()).scalars())
            sql = str(not_done().compile(connection))
            # failed once and given up after one attempt: settled, not selected
            given_up_after_1 = list(connection.execute(not_done(give_up_after=1)).scalars())
            given_up_after_2 = list(connection.execute(not_done(give_up_after=2)).scalars())
    finally:
        with store.engine.begin() as connection:
            candidates_metadata.drop_all(connection)

    # failed records (401..450) are not done: they are selected to run again
    assert ids == list(range(401, 1001))
    assert given_up_after_1 == list(range(451, 1001))
    assert given_up_after_2 == list(range(401, 1001))
    assert "NOT (EXISTS" in sql.upper() or "NOT EXISTS" in sql.upper()


def test_reset_forgets_outcomes(store: Store) -> None:
    store.ledger.mark("job", "p1", (LedgerEntry(record=r, status=DONE) for r in range(1, 2001)))
    store.ledger.mark("job", "p2", (LedgerEntry(record=r, status=DONE) for r in range(1, 11)))

    assert store.ledger.reset("job", "p1", range(1, 1501)) == 1500
    assert store.ledger.counts("job", "p1") == {DONE: 500, FAILED: 0}
    assert not store.ledger.completed("job", 1500, "p1")
    assert store.ledger.completed("job", 1501, "p1")
    assert store.ledger.reset("job", "p1") == 500
    assert store.ledger.counts("job", "p1") == {DONE: 0, FAILED: 0}
    assert store.ledger.counts("job", "p2") == {DONE: 10, FAILED: 0}
    assert store.ledger.reset("job", "p1") == 0


def test_periods(store: Store) -> None:
    for period in ["2026-12-02", "2026-11-30", "2026-12-01"]:
        store.ledger.mark("job", period, [LedgerEntry(record=1, status=DONE), LedgerEntry(record=2, status=FAILED)])
    store.ledger.mark("other", "2026-01-01", [LedgerEntry(record=1, status=DONE)])

    assert store.ledger.periods("job") == ["2026-11-30", "2026-12-01", "2026-12-02"]
    assert store.ledger.periods("other") == ["2026-01-01"]
    assert store.ledger.periods("nobody") == []
