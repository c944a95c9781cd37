"""Record claims and the slot-window stop, on both backends (issue 14, parts 1 and 2).

Two runs of one (job, period, slot) at once must never hand a record to the handler twice: the :01
run still going when the :31 run starts, two ``vardiya tick`` processes, two workers. And a run stops
starting records at the end of the window of the slot it was planned for (plus the job's grace), not
an hour after it happened to start.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from vardiya.clock import SystemClock, VirtualClock
from vardiya.errors import VardiyaError
from vardiya.slots import SlotScheme
from vardiya.slots.job import SlotJob, TickContext
from vardiya.slots.runner import Cut, TickReport, run_tick
from vardiya.slots.sources import IterableSource
from vardiya.store import LedgerEntry, LedgerStatus, Store, open_store

from ..support.migrations import at_revision

DAY = datetime(2026, 12, 1, tzinfo=UTC)
PERIOD = "2026-12-01"
IDS = list(range(1, 24 * 50 + 1))  # 50 records in each of 24 hourly slots
SLOT_15 = [i for i in IDS if i % 24 == 15]


def _job(handler, **settings) -> SlotJob:  # type: ignore[no-untyped-def]
    settings.setdefault("backfill_limit", 0)
    return SlotJob(name="job", scheme=SlotScheme(slots=24), source=IterableSource(IDS), handler=handler, **settings)


# -- the claims themselves -----------------------------------------------------------------------------


def test_a_claim_holds_records_against_other_owners_until_released_or_expired(store: Store) -> None:
    claims = store.ledger.claims
    now = DAY
    keys = [str(i) for i in range(10)]
    assert claims.take("job", PERIOD, keys[:6], owner="a", until=now + timedelta(minutes=1), now=now) == set(keys[:6])
    # b gets only what a does not hold
    assert claims.take("job", PERIOD, keys, owner="b", until=now + timedelta(minutes=1), now=now) == set(keys[6:])
    assert claims.held("job", PERIOD, now) == {**dict.fromkeys(keys[:6], "a"), **dict.fromkeys(keys[6:], "b")}
    # another period or job is another record
    assert claims.take("job", "2026-12-02", keys[:2], owner="b", until=now + timedelta(minutes=1), now=now) == set(keys[:2])
    # a lease that ran out means its run died: another owner takes the records over
    later = now + timedelta(minutes=1)
    assert claims.take("job", PERIOD, keys[:3], owner="c", until=later + timedelta(minutes=1), now=later) == set(keys[:3])
    # a heartbeat keeps what is still held; release frees it
    assert claims.renew("a", "job", PERIOD, keys[:6], later + timedelta(minutes=5)) == 3  # 0-2 are c's now
    assert claims.take("job", PERIOD, keys[3:6], owner="c", until=later + timedelta(minutes=1), now=later) == set()
    assert claims.release("a", "job", PERIOD, keys[:6]) == 3
    assert claims.take("job", PERIOD, keys[3:6], owner="c", until=later + timedelta(minutes=1), now=later) == set(keys[3:6])


def test_a_settled_record_is_never_claimed(store: Store) -> None:
    store.ledger.mark("job", PERIOD, [
        LedgerEntry(record=1, status=LedgerStatus.DONE),
        LedgerEntry(record=2, status=LedgerStatus.FAILED, attempts=3),
        LedgerEntry(record=3, status=LedgerStatus.FAILED, attempts=1),
    ])
    taken = store.ledger.claims.take(
        "job", PERIOD, ["1", "2", "3", "4"], owner="a", until=DAY + timedelta(minutes=1), now=DAY, give_up_after=3
    )
    assert taken == {"3", "4"}  # done and given up are settled; a failure with attempts left is not


def test_concurrent_claimers_never_take_one_record_twice(store_url: str) -> None:
    keys = [f"{i:05d}" for i in range(400)]
    owners = 4
    stores = [open_store(store_url, clock=VirtualClock(DAY)) for _ in range(owners)]
    start = threading.Barrier(owners)
    taken: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def claim(index: int) -> None:
        owner = f"owner-{index}"
        mine: list[str] = []
        try:
            start.wait(timeout=30)
            # each owner walks the keys in its own order, in chunks, as overlapping runs do
            order = keys[index * 100 :] + keys[: index * 100]
            for at in range(0, len(order), 50):
                mine += stores[index].ledger.claims.take(
                    "job", PERIOD, order[at : at + 50], owner=owner, until=DAY + timedelta(hours=1), now=DAY
                )
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            errors.append(error)
        taken[owner] = mine

    threads = [threading.Thread(target=claim, args=(index,)) for index in range(owners)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        for opened in stores:
            opened.close()
    assert errors == []
    counts = Counter(key for mine in taken.values() for key in mine)
    assert set(counts) == set(keys) and set(counts.values()) == {1}, "a key was claimed by two owners, or by none"


# -- two runs of one slot at once ----------------------------------------------------------------------


class SlowEffects:
    """A handler that waits a little per record and counts every call: the effects a sink would write."""

    def __init__(self, pause_s: float) -> None:
        self.pause_s = pause_s
        self.calls: Counter[int] = Counter()
        self.lock = threading.Lock()

    def __call__(self, record: int, context: TickContext) -> None:
        with self.lock:
            self.calls[record] += 1
        time.sleep(self.pause_s)


def test_two_runs_of_one_slot_at_once_hand_no_record_to_the_handler_twice(store_url: str) -> None:
    """The :01 run still going when the :31 run starts: every record of slot 15 once, shared between them."""
    effects = SlowEffects(pause_s=0.003)
    job = _job(effects, flush_every=5)
    clock = VirtualClock(DAY.replace(hour=15, minute=31))
    reports: dict[str, TickReport] = {}
    errors: list[BaseException] = []
    stores = [open_store(store_url, clock=clock) for _ in range(2)]

    def tick(name: str, opened: Store, planned: datetime) -> None:
        try:
            reports[name] = run_tick(opened, job, planned)
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            errors.append(error)

    first = threading.Thread(target=tick, args=("15:01", stores[0], DAY.replace(hour=15, minute=1)))
    second = threading.Thread(target=tick, args=("15:31", stores[1], DAY.replace(hour=15, minute=31)))
    try:
        first.start()
        deadline = time.monotonic() + 60
        while sum(effects.calls.values()) < 5 and time.monotonic() < deadline:
            time.sleep(0.001)
        second.start()
        first.join(timeout=120)
        second.join(timeout=120)
    finally:
        for opened in stores:
            opened.close()
    assert errors == []
    twice = sorted(record for record, count in effects.calls.items() if count > 1)
    assert twice == [], f"records handed to the handler twice: {twice}"
    assert sorted(effects.calls) == SLOT_15
    a, b = reports["15:01"], reports["15:31"]
    assert a.started + b.started == len(SLOT_15) and a.done + b.done == len(SLOT_15)
    with open_store(store_url) as check:
        assert check.ledger.count_done("job", PERIOD, slot=15) == len(SLOT_15)
        assert check.ledger.claims.held("job", PERIOD, datetime(2000, 1, 1, tzinfo=UTC)) == {}  # all released


def test_a_claim_outlives_its_lease_while_the_heartbeat_renews_it(store_url: str) -> None:
    """A chunk that runs for several leases keeps its records: another run takes none of them meanwhile."""
    lease = timedelta(seconds=0.6)
    inside = threading.Event()
    release = threading.Event()

    def slow(record: int) -> None:
        inside.set()
        release.wait(timeout=60)

    job = _job(slow, flush_every=50, claim_lease=lease)
    clock = SystemClock()
    planned = clock.now()
    with open_store(store_url, clock=clock) as store:
        box: dict[str, TickReport] = {}
        runner = threading.Thread(target=lambda: box.setdefault("r", run_tick(store, job, planned, within_window=False)))
        runner.start()
        try:
            assert inside.wait(timeout=60)
            claims = store.ledger.claims
            position = job.scheme.locate(planned)
            period = position.period.key
            slot_keys = [str(i) for i in IDS if i % 24 == position.slot]
            ends = time.monotonic() + 3 * lease.total_seconds()
            while time.monotonic() < ends:  # three leases long: only the heartbeat keeps the claim
                time.sleep(0.1)
                now = clock.now()
                assert claims.take("job", period, slot_keys, owner="other", until=now + lease, now=now) == set()
        finally:
            release.set()
            runner.join(timeout=120)
        assert box["r"].held == 0 and box["r"].done == len(slot_keys)


# -- the deadline ends with the slot's window ----------------------------------------------------------


class Minutes:
    """A handler whose every record takes one minute of the virtual clock."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.starts: list[datetime] = []

    def __call__(self, record: int) -> None:
        self.starts.append(self.clock.now())
        self.clock.advance(60)


def test_a_late_run_stops_at_the_end_of_its_slot_window(store: Store, clock: VirtualClock) -> None:
    """A 03:31 run that starts at 03:55 stops at 04:00, not about 04:49; the rest goes to the backlog."""
    handler = Minutes(clock)
    job = _job(handler, backfill_limit=1_000)
    clock.set(DAY.replace(hour=3, minute=55))
    report = run_tick(store, job, DAY.replace(hour=3, minute=31))
    assert report.slot == 3 and report.cut is Cut.WINDOW
    assert report.stop_at == DAY.replace(hour=4)
    assert report.started == 5 and max(handler.starts) < DAY.replace(hour=4)
    # the next tick (slot 4) takes the rest of slot 3 from its backlog
    clock.set(DAY.replace(hour=4, minute=1))
    handler.clock = VirtualClock(DAY)  # the next tick's records take no time
    later = run_tick(store, job, DAY.replace(hour=4, minute=1))
    assert later.backlog == 3 * 50 + 50 - 5 and later.backlog_slots[-1] == (PERIOD, 3)  # slots 0-2, then 3
    assert store.ledger.count_done("job", PERIOD, slot=3) == 50


def test_the_deadline_grace_extends_the_window_and_the_budget_still_counts_from_the_start(
    store: Store, clock: VirtualClock
) -> None:
    handler = Minutes(clock)
    job = _job(handler, deadline_grace=timedelta(minutes=10), deadline=timedelta(minutes=20))
    clock.set(DAY.replace(hour=3, minute=55))
    report = run_tick(store, job, DAY.replace(hour=3, minute=31))
    assert (report.cut, report.stop_at, report.started) == (Cut.WINDOW, DAY.replace(hour=4, minute=10), 15)
    clock.set(DAY.replace(hour=5, minute=1))
    on_time = run_tick(store, job, DAY.replace(hour=5, minute=1))
    assert (on_time.cut, on_time.stop_at, on_time.started) == (Cut.DEADLINE, DAY.replace(hour=5, minute=21), 20)


def test_a_run_that_starts_after_its_window_starts_nothing_and_says_so(store: Store, clock: VirtualClock) -> None:
    handler = Minutes(clock)
    job = _job(handler)
    clock.set(DAY.replace(hour=4, minute=5))
    report = run_tick(store, job, DAY.replace(hour=3, minute=31))
    assert (report.started, report.done, report.cut) == (0, 0, Cut.WINDOW)
    assert handler.starts == []
    assert report.to_json()["cut"] == "window"
    # a deliberate run of the past slot, by hand
    by_hand = run_tick(store, job, DAY.replace(hour=3, minute=31), within_window=False)
    assert (by_hand.started, by_hand.done, by_hand.cut) == (50, 50, None)


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"deadline_grace": timedelta(seconds=-1)}, "deadline_grace must not be negative"),
        ({"claim_lease": timedelta(0)}, "claim_lease must be longer than 0"),
        ({"claim_lease": "1 min"}, "claim_lease must be a timedelta"),
    ],
)
def test_bad_claim_and_grace_settings_are_refused(settings: dict, fragment: str) -> None:
    with pytest.raises(VardiyaError, match=fragment):
        _job(lambda record: None, **settings)


# -- a store at migration 0007 -------------------------------------------------------------------------


def test_a_store_at_0007_upgraded_keeps_working(store: Store) -> None:
    with at_revision(store, "0007") as connection:
        tables = set(connection.dialect.get_table_names(connection))
        assert "ledger_claims" not in tables and "ledger" in tables
        connection.exec_driver_sql(
            "INSERT INTO ledger (job, period, record, slot, status, attempts, duration_ms, rows, bytes) "
            "VALUES ('job', '2026-12-01', '15', 15, 'done', 1, 0, 0, 0)"
        )
        connection.commit()
    # upgraded to head again by at_revision: the old row is kept and a tick runs with claims
    calls: list[int] = []
    report = run_tick(store, _job(calls.append), DAY.replace(hour=15, minute=1))
    assert report.already_done == 1 and report.started == len(SLOT_15) - 1 and 15 not in calls
    assert store.ledger.count_done("job", PERIOD, slot=15) == len(SLOT_15)
