"""Records never done, on both backends: named once their period is beyond the backlog's reach.

The seed scenario of spec/slots.md with no backlog allowed: 24 hourly slots run at :01 and :31, the
app down from 03:00 to 04:00, so slot 3 ends the day with none of its records done. Once the day is
closed for good, the ledger report, ``status`` and the Prometheus gauge name them, and a backfill runs
exactly them, once.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import generate_latest

from vardiya import App
from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.service.metrics import ServiceMetrics
from vardiya.service.status import status_report
from vardiya.slots import IterableSource, SlotScheme, ledger_report, replay
from vardiya.slots.backfill import backfill
from vardiya.store import LedgerStatus, Store

DAY = datetime(2026, 12, 1, tzinfo=UTC)
RECORDS = 2_400  # 100 a slot
OUTAGE = (DAY + timedelta(hours=3), DAY + timedelta(hours=4))


def _app(calls: Counter[tuple[str, int]], **settings) -> App:  # type: ignore[no-untyped-def]
    app = App("seed")

    @app.slot_job(
        "nightly_users", scheme=SlotScheme(slots=24), source=IterableSource(range(1, RECORDS + 1)),
        runs_per_slot=2, offsets=[timedelta(minutes=1), timedelta(minutes=31)], **settings,
    )
    def refresh(user_id: int, context) -> None:  # type: ignore[no-untyped-def]
        calls[(context.period.key, user_id)] += 1

    return app


def _seed_day(store: Store, clock: VirtualClock, app: App) -> None:
    replay(store, app.get_slot_job("nightly_users"), DAY, DAY + timedelta(days=1), clock=clock, skip=[OUTAGE])


def test_slot_3_lost_to_the_outage_is_named_once_the_day_is_closed_and_backfilled_once(
    store: Store, clock: VirtualClock
) -> None:
    calls: Counter[tuple[str, int]] = Counter()
    app = _app(calls, backfill_limit=0)
    job = app.get_slot_job("nightly_users")
    _seed_day(store, clock, app)

    # Still inside the day: its last slot's ticks may still run, nothing is lost yet.
    clock.set(DAY + timedelta(hours=23, minutes=45))
    open_report = ledger_report(store, job, "2026-12-01")
    assert open_report.not_done == 100 and not open_report.closed
    assert not any("never done" in warning for warning in open_report.warnings)
    assert status_report(store, app)["not_done"] == []

    # The day is over and no tick's backlog reaches it: the 100 records of slot 3 are named.
    clock.set(DAY + timedelta(days=1, minutes=5))
    report = ledger_report(store, job, "2026-12-01")
    document = report.to_json()
    assert document["not_done"] == 100 and document["closed"] is True
    assert [entry["not_done"] for entry in document["slots"]] == [0, 0, 0, 100] + [0] * 20
    assert any("100 records of period 2026-12-01 were never done" in w and "slots 3 (100)" in w for w in report.warnings)
    status = status_report(store, app)
    assert status["healthy"] is False
    assert status["not_done"] == [{
        "job": "nightly_users", "period": "2026-12-01", "not_done": 100, "closed": True,
        "closes_at": "2026-12-02T00:00:00+00:00", "slots": {"3": 100},
    }]
    assert any("100 records of period 2026-12-01 never done" in reason for reason in status["reasons"])
    scraped = _scrape(store, app)
    assert 'vardiya_slot_not_done_records{job="nightly_users",period="2026-12-01"} 100.0' in scraped

    # A dry run counts per slot and writes nothing.
    before = store.ledger.counts("nightly_users", "2026-12-01")
    dry = backfill(store, job, "2026-12-01", dry_run=True).to_json()
    assert (dry["not_done"], dry["slots"], dry["done"]) == (100, [{"slot": 3, "not_done": 100}], 0)
    assert store.ledger.counts("nightly_users", "2026-12-01") == before and calls[("2026-12-01", 3)] == 0

    ran = backfill(store, job, "2026-12-01").to_json()
    assert (ran["done"], ran["failed"], ran["still_not_done"]) == (100, 0, 0)
    assert ran["slots"] == [{"slot": 3, "not_done": 100, "still_not_done": 0}]
    assert store.ledger.counts("nightly_users", "2026-12-01")[LedgerStatus.DONE] == RECORDS
    assert set(calls.values()) == {1} and len(calls) == RECORDS  # every record exactly once
    again = backfill(store, job, "2026-12-01").to_json()
    assert (again["not_done"], again["done"]) == (0, 0)
    assert set(calls.values()) == {1}
    assert status_report(store, app)["healthy"] is True
    assert "vardiya_slot_not_done_records{" not in _scrape(store, app)  # a gauge: back to no series


def _scrape(store: Store, app: App) -> str:
    """What a fresh ``/metrics`` endpoint of a service of ``app`` shows."""
    metrics = ServiceMetrics()
    metrics.watch(store, app)
    return generate_latest(metrics.registry).decode()


def test_records_older_than_the_backlog_can_reach_are_named(store: Store, clock: VirtualClock) -> None:
    """With a backlog of one earlier period, a day whose ticks all missed is lost once the next day ends."""
    calls: Counter[tuple[str, int]] = Counter()
    app = _app(calls, backfill_limit=50, catch_up=1, start=DAY)
    job = app.get_slot_job("nightly_users")
    # The app is down for the whole of 2026-12-01 and 2026-12-02 but the last tick of 12-02.
    replay(store, job, DAY + timedelta(days=1, hours=23, minutes=31), DAY + timedelta(days=2), clock=clock)
    clock.set(DAY + timedelta(days=1, hours=23, minutes=50))
    assert status_report(store, app)["not_done"] == []  # 12-01 is still within 12-02's ticks' reach
    clock.set(DAY + timedelta(days=2, minutes=1))
    lost = {entry["period"]: entry["not_done"] for entry in status_report(store, app)["not_done"]}
    # The one tick's backlog took 50 records of 12-01; the rest of the day is beyond reach now.
    assert lost == {"2026-12-01": RECORDS - 50}
    assert ledger_report(store, job, "2026-12-02").closed is False


def test_a_backfill_is_refused_for_an_open_period_and_a_bad_key(store: Store, clock: VirtualClock) -> None:
    calls: Counter[tuple[str, int]] = Counter()
    app = _app(calls, backfill_limit=0, start=DAY)
    job = app.get_slot_job("nightly_users")
    _seed_day(store, clock, app)
    with pytest.raises(InvalidInput, match="not closed: ticks can still take its records until 2026-12-02T00:00"):
        backfill(store, job, "2026-12-01")
    clock.set(DAY + timedelta(days=1))
    with pytest.raises(InvalidInput, match="not a period of this scheme"):
        backfill(store, job, "2026-12-01T03:00")
    with pytest.raises(InvalidInput, match="before job 'nightly_users' starts"):
        backfill(store, job, "2026-11-30")
    assert sum(calls.values()) == RECORDS - 100
