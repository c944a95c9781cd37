"""The ledger report from the store's per-slot figures equals the report over every sample, on both backends.

``ledger_report`` reads ``Ledger.period_figures`` (counts grouped in SQL, the failed records named by
an indexed LIMIT, one scan of the durations, rows and bytes); ``build_ledger_report`` over
``Ledger.samples`` is the way it was computed before, row by row. Both must give the same
``vardiya slots report --json`` document for the same store: the same percentiles (nearest rank),
the same exactly rounded totals, the same failed records, unplaced rows and warnings.
"""

from __future__ import annotations

import math
from contextlib import closing
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vardiya.errors import InvalidInput
from vardiya.slots import IterableSource, SlotJob, SlotScheme
from vardiya.slots.closed import not_done
from vardiya.slots.report import build_ledger_report, ledger_report, nearest_rank
from vardiya.store import LedgerEntry, LedgerStatus, Store

JOB = "reported"
DAY = datetime(2026, 11, 20, tzinfo=UTC)
SLOTS = 6


def _job() -> SlotJob:
    return SlotJob(name=JOB, scheme=SlotScheme(slots=SLOTS), source=IterableSource(range(120)), handler=lambda r: None)


def _streamed(store: Store, job: SlotJob, period_key: str) -> dict[str, Any]:
    """The report as ``ledger_report`` computed it before: every sample of the period, in Python."""
    period = job.scheme.period_for_key(period_key)
    runs = job.runs_at(period.start)
    missing = not_done(store, job, period, store.clock.now())
    with closing(store.ledger.samples(job.name, period.key)) as samples:
        return build_ledger_report(
            samples,
            slots=runs.scheme.slots,
            tick_interval=runs.tick_interval,
            period=period.key,
            job=job.name,
            scheme=runs.scheme.fingerprint,
            not_done=missing.counts,
            closes_at=missing.closes_at,
            closed=missing.closed,
        ).to_json()


def _mark(store: Store, period: str, rows: list[tuple[int, int | None, bool, float, int, int]]) -> None:
    store.ledger.mark(
        JOB,
        period,
        [
            LedgerEntry(
                record=record,
                slot=slot,
                status=LedgerStatus.FAILED if failed else LedgerStatus.DONE,
                duration_ms=duration,
                rows=count,
                bytes=size,
                error="boom" if failed else None,
            )
            for record, slot, failed, duration, count, size in rows
        ],
    )


def _period(store: Store) -> str:
    return _job().scheme.period_of(DAY).key


def test_a_period_with_every_kind_of_row_reports_the_same_both_ways(store: Store) -> None:
    job, period = _job(), _period(store)
    rows = []
    for record in range(100):
        slot: int | None = record % SLOTS
        if record in (13, 14):
            slot = None  # unplaced: no slot
        elif record == 15:
            slot = SLOTS + 3  # unplaced: a slot the scheme does not have
        # distinct, awkward durations: their float sum depends on the order, fsum's does not
        duration = (record * 0.1 + 1e-9 * record**3) if record % 5 else 1e6 / (record + 1)
        rows.append((record, slot, record % 7 == 0, duration, record % 4, record * 11))
    _mark(store, period, rows)
    report = ledger_report(store, job, period)
    assert report.to_json() == _streamed(store, job, period)
    assert report.unplaced == 3 and report.failed > 0 and report.failed_records
    # the definitions still hold: slot 1's p95 is the nearest rank of its sorted durations, its total fsum's
    ones = sorted(d for r, s, _f, d, _c, _b in rows if s == 1)
    load = report.slots[1]
    assert load.p95_ms == nearest_rank(ones, 95) and load.p50_ms == nearest_rank(ones, 50)
    assert load.total_ms == math.fsum(ones) and load.max_ms == ones[-1] and load.count == len(ones)


def test_an_empty_period_and_more_than_twelve_failed_records_report_the_same_both_ways(store: Store) -> None:
    job, period = _job(), _period(store)
    assert ledger_report(store, job, period).to_json() == _streamed(store, job, period)
    _mark(store, period, [(record, record % SLOTS, True, 2.5, 0, 0) for record in range(40)])
    report = ledger_report(store, job, period)
    assert report.to_json() == _streamed(store, job, period)
    assert len(report.failed_records) == 12 and report.failed == 40


def test_an_unknown_status_is_refused_both_ways(store: Store) -> None:
    job, period = _job(), _period(store)
    _mark(store, period, [(1, 1, False, 1.0, 0, 0)])
    with store.transaction() as connection:  # what no writer of the store does: a status it does not know
        connection.execute(sa.text("UPDATE ledger SET status = 'lost' WHERE job = :job"), {"job": JOB})
    # (the samples' way raises too, from its server cursor on PostgreSQL, which then warns on exit)
    with pytest.raises((InvalidInput, LookupError)):
        ledger_report(store, job, period)


_ROW = st.tuples(
    st.one_of(st.none(), st.integers(0, SLOTS + 1)),  # None, SLOTS and SLOTS + 1 are unplaced
    st.booleans(),
    st.one_of(st.floats(0, 1e7, allow_nan=False, allow_infinity=False), st.sampled_from([0.0, 0.1, 3.5])),
    st.integers(0, 10**6),
    st.integers(0, 10**9),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_ROW, max_size=80))
def test_random_periods_report_the_same_both_ways(store: Store, rows: list[tuple[Any, ...]]) -> None:
    job, period = _job(), _period(store)
    store.ledger.reset(JOB, period)
    _mark(store, period, [(record, *row) for record, row in enumerate(rows)])
    assert ledger_report(store, job, period).to_json() == _streamed(store, job, period)


def test_the_report_reads_no_sample(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    job, period = _job(), _period(store)
    _mark(store, period, [(record, record % SLOTS, False, 1.0, 1, 1) for record in range(30)])

    def refuse(*_args: object) -> None:
        raise AssertionError("ledger_report streamed the samples")

    monkeypatch.setattr(type(store.ledger), "samples", refuse)
    assert ledger_report(store, job, period).total == 30
