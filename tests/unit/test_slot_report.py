"""Balance from the ledger: per-slot counts and durations, overruns and the warnings that explain them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vardiya.errors import InvalidInput
from vardiya.slots import SlotScheme
from vardiya.slots.job import SlotJob
from vardiya.slots.report import (
    LedgerSample,
    build_ledger_report,
    ledger_report,
    nearest_rank,
)
from vardiya.slots.sources import IterableSource
from vardiya.store import LedgerEntry, LedgerStatus, Store

HOUR = timedelta(hours=1)
SLOT_FIELDS = {"slot", "count", "rows", "bytes", "p50_ms", "p95_ms", "max_ms", "overrun"}
DONE, FAILED = LedgerStatus.DONE, LedgerStatus.FAILED


def _report(samples, slots: int = 4, interval: timedelta = HOUR):  # type: ignore[no-untyped-def]
    return build_ledger_report(samples, slots=slots, tick_interval=interval, period="2026-12-01", job="nightly")


def test_nearest_rank_is_a_measured_value() -> None:
    values = [float(v) for v in range(1, 11)]
    assert nearest_rank(values, 50) == 5.0  # rank ceil(0.5 * 10) = 5
    assert nearest_rank(values, 95) == 10.0  # rank ceil(9.5) = 10
    assert nearest_rank([float(v) for v in range(1, 21)], 95) == 19.0  # rank 19 of 20
    assert nearest_rank([7.5], 50) == nearest_rank([7.5], 95) == 7.5
    assert nearest_rank([], 95) == 0.0
    assert nearest_rank([1.0, 2.0, 3.0], 100) == 3.0
    with pytest.raises(InvalidInput):
        nearest_rank(values, 0)


def test_every_slot_is_present_and_figures_add_up() -> None:
    samples = [
        (0, 10.0, 1, 100, DONE, "4"),
        (0, 30.0, 2, 200, DONE, "8"),
        (0, 20.0, 0, 0, FAILED, "12"),
        (2, 5.0, 3, 50, "done", "2"),
    ]
    report = _report(samples)
    assert [load.slot for load in report.slots] == [0, 1, 2, 3]
    zero, empty, two, _ = report.slots
    assert (zero.count, zero.rows, zero.bytes, zero.failed) == (3, 3, 300, 1)
    assert (zero.p50_ms, zero.p95_ms, zero.max_ms, zero.total_ms) == (20.0, 30.0, 30.0, 60.0)
    assert (empty.count, empty.rows, empty.bytes, empty.p50_ms, empty.p95_ms, empty.max_ms) == (0, 0, 0, 0, 0, 0)
    assert (two.count, two.p95_ms) == (1, 5.0)
    assert report.total == 4 and report.failed == 1
    assert not any(load.overrun for load in report.slots)


def test_to_json_has_the_contract_fields() -> None:
    report = _report([LedgerSample(1, 12.5, 1, 10, DONE)])
    document = json.loads(json.dumps(report.to_json()))
    assert {"period", "slots", "warnings"} <= set(document)
    assert document["period"] == "2026-12-01"
    assert len(document["slots"]) == 4
    for entry in document["slots"]:
        assert set(entry) >= SLOT_FIELDS
    assert document["slots"][1]["p95_ms"] == 12.5
    assert isinstance(document["warnings"], list)


def test_a_slot_whose_total_time_exceeds_the_interval_overruns() -> None:
    interval = timedelta(minutes=30)  # e.g. 24 slots a day, two runs per slot
    heavy = [(1, 200_000.0, 0, 0, DONE)] * 10  # 2,000 s of work in a 1,800 s interval
    light = [(slot, 1_000.0, 0, 0, DONE) for slot in (0, 2, 3) for _ in range(10)]
    report = _report(heavy + light, interval=interval)
    assert report.overrun_slots == (1,)
    assert report.slots[1].max_ms == 200_000.0 < report.tick_interval_ms == 1_800_000.0
    overrun = [warning for warning in report.warnings if warning.startswith("slot 1 would overrun")]
    assert len(overrun) == 1 and "2,000.0 s" in overrun[0] and "1,800.0 s" in overrun[0]


def test_one_record_longer_than_the_interval_overruns() -> None:
    report = _report([(3, 3_600_001.0, 0, 0, DONE)])
    assert report.overrun_slots == (3,)
    exactly = _report([(3, 3_600_000.0, 0, 0, DONE)])
    assert exactly.overrun_slots == ()  # exceeding means more than the interval


def test_balanced_counts_with_unequal_cost_are_called_out() -> None:
    cheap = [(slot, 1000.0, 0, 0, DONE) for slot in (0, 1, 2) for _ in range(100)]
    dear = [(3, 1600.0, 0, 0, DONE)] * 105  # 5 % more records, 1.68 times the busy time
    report = _report(cheap + dear)
    imbalance = [w for w in report.warnings if w.startswith("counts balance load only if per-record cost is similar")]
    assert len(imbalance) == 1 and "heaviest slot 3" in imbalance[0]

    similar = _report(cheap + [(3, 1400.0, 0, 0, DONE)] * 100)  # 1.4 times: within 1.5
    assert not any("per-record cost" in w for w in similar.warnings)
    uneven = _report(cheap + [(3, 1600.0, 0, 0, DONE)] * 120)  # counts 20 % apart: the counts already say it
    assert not any("per-record cost" in w for w in uneven.warnings)


def test_failed_records_are_listed() -> None:
    samples = [(slot, 1.0, 0, 0, FAILED if n == 0 else DONE, f"{slot}-{n}") for slot in range(4) for n in range(3)]
    report = _report(samples)
    failed = [w for w in report.warnings if "still failed" in w]
    assert failed == [
        ("4 records are still failed in period 2026-12-01: records 0-0, 1-0, 2-0, 3-0; later ticks retry them "
         "up to max_attempts and the ledger holds their errors")
    ]
    assert report.failed_records == ("0-0", "1-0", "2-0", "3-0")
    many = _report([(0, 1.0, 0, 0, FAILED, str(n)) for n in range(20)])
    assert "records 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ...;" in many.warnings[-1]
    without_ids = _report([(2, 1.0, 0, 0, FAILED)])
    assert "in slots 2;" in without_ids.warnings[-1]


def test_rows_outside_the_scheme_and_an_empty_ledger_are_warned_about() -> None:
    report = _report([(None, 1.0, 0, 0, DONE), (9, 1.0, 0, 0, DONE), (1, 1.0, 0, 0, DONE)])
    assert report.unplaced == 2 and report.total == 1
    assert any(w.startswith("2 ledger rows of period 2026-12-01 have no slot in 0..3") for w in report.warnings)
    empty = _report([])
    assert [load.count for load in empty.slots] == [0, 0, 0, 0]
    assert empty.warnings == (
        ("the ledger has no records of job 'nightly' in period 2026-12-01; run its ticks first "
         "(vardiya tick or vardiya replay)"),
    )


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidInput):
        build_ledger_report([], slots=0, tick_interval=HOUR, period="p")
    with pytest.raises(InvalidInput):
        build_ledger_report([], slots=4, tick_interval=timedelta(0), period="p")
    with pytest.raises(InvalidInput, match="status"):
        _report([(0, 1.0, 0, 0, "skipped")])


samples_strategy = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.floats(0, 1e6, allow_nan=False),
        st.integers(0, 100),
        st.integers(0, 10_000),
        st.sampled_from([DONE, FAILED]),
    ),
    max_size=200,
)


@given(samples_strategy)
def test_figures_are_consistent_for_any_samples(samples: list[tuple[int, float, int, int, LedgerStatus]]) -> None:
    report = _report(samples, slots=6)
    assert report.total == len(samples)
    for load in report.slots:
        mine = [sample for sample in samples if sample[0] == load.slot]
        durations = sorted(sample[1] for sample in mine)
        assert load.count == len(mine)
        assert load.rows == sum(sample[2] for sample in mine)
        assert load.failed == sum(1 for sample in mine if sample[4] is FAILED)
        assert load.p50_ms <= load.p95_ms <= load.max_ms
        assert load.total_ms == pytest.approx(sum(durations))
        if durations:
            assert load.p95_ms in durations and load.max_ms == durations[-1]
        assert load.overrun == (load.total_ms > report.tick_interval_ms or load.max_ms > report.tick_interval_ms)


def _job(runs_per_slot: int = 1) -> SlotJob:
    return SlotJob(
        name="nightly",
        scheme=SlotScheme(slots=24),
        source=IterableSource(range(1, 241)),
        handler=lambda record: None,
        runs_per_slot=runs_per_slot,
    )


def _entry(record: int, slot: int, duration_ms: float, status: LedgerStatus = DONE) -> LedgerEntry:
    moment = datetime(2026, 12, 1, slot, tzinfo=UTC)
    return LedgerEntry(
        record=record, status=status, started_at=moment, finished_at=moment, duration_ms=duration_ms,
        rows=1, bytes=record, slot=slot, error="boom" if status is FAILED else None,
    )


def test_ledger_report_reads_one_period_of_the_store(store: Store) -> None:
    job = _job(runs_per_slot=2)
    entries = [_entry(record, record % 24, float(record)) for record in range(1, 241)]
    entries[4] = _entry(5, 5, 2_000_000.0, FAILED)  # longer than the 30 min tick interval
    store.ledger.mark("nightly", "2026-12-01", entries)
    store.ledger.mark("nightly", "2026-12-02", [_entry(1, 1, 1.0)])
    store.ledger.mark("other", "2026-12-01", [_entry(1, 1, 1.0)])

    report = ledger_report(store, job, "2026-12-01")
    assert report.job == "nightly" and report.scheme == job.scheme.fingerprint
    assert report.tick_interval_ms == 1_800_000.0
    assert [load.count for load in report.slots] == [10] * 24
    assert report.slots[7].total_ms == sum(float(r) for r in range(7, 241, 24))
    assert report.slots[7].bytes == sum(range(7, 241, 24))
    assert report.overrun_slots == (5,)
    assert report.failed_records == ("5",)
    expected = build_ledger_report(
        [(e.slot, e.duration_ms, e.rows, e.bytes, e.status) for e in entries],
        slots=24, tick_interval=timedelta(minutes=30), period="2026-12-01",
        not_done=[1 if slot == 5 else 0 for slot in range(24)],  # record 5 is still failed
    )
    assert report.slots == expected.slots
    assert report.not_done == 1 and report.closed is False  # the store's clock is inside the period


def test_not_done_records_of_a_closed_period_get_a_warning_naming_slots_and_the_fix() -> None:
    samples = [(slot, 1.0, 0, 0, "done") for slot in range(4)]
    counts = [0, 0, 0, 1_198]
    closed = build_ledger_report(
        samples, slots=4, tick_interval=timedelta(hours=1), period="2026-12-01", job="nightly_users",
        not_done=counts, closed=True, closes_at=datetime(2026, 12, 2, tzinfo=UTC),
    )
    assert [load.not_done for load in closed.slots] == counts and closed.to_json()["not_done"] == 1_198
    assert [load["not_done"] for load in closed.to_json()["slots"]] == counts
    [warning] = [w for w in closed.warnings if "never done" in w]
    assert warning.startswith("1,198 records of period 2026-12-01 were never done")
    assert "slots 3 (1,198)" in warning and "vardiya slots backfill nightly_users --period 2026-12-01" in warning
    still_open = build_ledger_report(
        samples, slots=4, tick_interval=timedelta(hours=1), period="2026-12-01", not_done=counts,
    )
    assert still_open.not_done == 1_198 and not any("never done" in w for w in still_open.warnings)
    with pytest.raises(InvalidInput, match="one count per slot"):
        build_ledger_report(samples, slots=4, tick_interval=timedelta(hours=1), period="p", not_done=[1])


def test_ledger_report_refuses_a_key_that_is_not_a_period(store: Store) -> None:
    with pytest.raises(InvalidInput, match="2026-12-01"):
        ledger_report(store, _job(), "December")


def test_busy_time_too_small_to_matter_is_not_called_an_imbalance() -> None:
    # Sub-millisecond records: timer noise, not load (the tick interval is an hour).
    samples = [(slot, 0.01 if slot else 0.05, 0, 0, DONE) for slot in range(4) for _ in range(100)]
    report = _report(samples)
    assert not [w for w in report.warnings if w.startswith("counts balance load")]
