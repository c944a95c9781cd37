"""Balance and migration reports from ids alone, and reading ids from a file."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vardiya.errors import InvalidInput
from vardiya.slots import Assign, SlotScheme, balance, migration_plan, parse_ids

BALANCE_FIELDS = {
    "slots", "assign", "total", "mean", "min", "max", "spread", "max_over_min", "max_dev_pct",
    "min_dev_pct", "counts", "empty_slots", "warnings", "recommendation",
}
MIGRATE_FIELDS = {"total", "moved", "moved_pct", "effective_from", "max_gap", "min_gap"}


def test_contiguous_ids_differ_by_at_most_one_per_slot() -> None:
    report = balance(range(28_742), 24)
    assert report.total == 28_742
    assert report.mean == pytest.approx(1197.58, abs=0.005)
    assert report.spread == report.max - report.min <= 1
    assert (report.min, report.max) == (1197, 1198)
    assert report.empty_slots == () and report.warnings == ()
    assert report.recommendation.endswith("-> keep mod")
    assert "mod: max/min 1.00; hash: max/min" in report.recommendation


def test_the_source_figures_for_a_real_id_set() -> None:
    # 1,140 to 1,261 a slot around 1,197.58: +5.29 % / -4.81 %, the fullest 10.6 % above the emptiest.
    counts = [1140, 1261] + [1197] * 21 + [28_742 - 1140 - 1261 - 1197 * 21]
    ids = [slot + 24 * n for slot, count in enumerate(counts) for n in range(count)]
    report = balance(ids, 24)
    assert report.max_dev_pct == pytest.approx(5.29, abs=0.01)
    assert report.min_dev_pct == pytest.approx(-4.81, abs=0.01)
    assert report.max_over_min == pytest.approx(1.106, abs=0.001)
    assert report.recommendation.endswith("-> keep mod")


def test_only_even_ids_leave_the_odd_slots_empty() -> None:
    report = balance(range(0, 20_000, 2), 24)
    assert report.empty_slots == tuple(range(1, 24, 2))
    assert all(report.counts[slot] == 0 for slot in range(1, 24, 2))
    assert any("all ids are even" in warning and "1, 3, 5" in warning for warning in report.warnings)
    assert report.max_over_min is None
    assert report.recommendation.endswith("-> use hash")


def test_multiples_of_b_all_land_in_slot_zero() -> None:
    report = balance(range(0, 24 * 1000, 24), 24)
    assert report.counts[0] == 1000 and sum(report.counts[1:]) == 0
    assert any("multiples of 24" in warning and "slot 0" in warning for warning in report.warnings)


def test_a_common_factor_with_b_is_named() -> None:
    report = balance(range(1, 30_000, 3), 24)  # all congruent to 1 mod 3
    assert report.empty_slots == tuple(slot for slot in range(24) if slot % 3 != 1)
    assert any("congruent to 1 mod 3" in warning for warning in report.warnings)


def test_gaps_that_hit_one_residue_class() -> None:
    ids = [i for i in range(24_000) if not (i % 24 == 7 and i % 5)]  # 80 % of slot 7 deleted
    report = balance(ids, 24)
    assert report.counts[7] == 200
    assert any("gaps in the ids hit slot(s) 7" in warning for warning in report.warnings)
    assert not any("gaps" in warning for warning in balance(range(24_000), 24).warnings)


def test_hash_is_balanced_within_a_few_percent() -> None:
    report = balance([f"user-{n}" for n in range(240_000)], 24, "hash")
    assert report.assign is Assign.HASH
    assert report.max_dev_pct is not None and report.min_dev_pct is not None
    assert report.max_dev_pct < 4 and report.min_dev_pct > -4
    assert report.recommendation.startswith("mod: not possible (string ids)")
    assert report.recommendation.endswith("-> use hash")


def test_string_ids_under_mod_are_refused() -> None:
    with pytest.raises(InvalidInput, match="use --assign hash"):
        balance([1, 2, "user-3"], 24)


def test_json_document_has_the_cli_fields() -> None:
    document = balance(range(0, 100, 2), SlotScheme(slots=24, assign="hash")).to_json()
    assert set(document) == BALANCE_FIELDS
    assert document["assign"] == "hash" and len(document["counts"]) == 24  # type: ignore[arg-type]
    json.dumps(document, allow_nan=False)
    empty = balance([], 24).to_json()
    assert empty["total"] == 0 and empty["max_dev_pct"] is None
    json.dumps(empty, allow_nan=False)


@settings(max_examples=30, deadline=None)
@given(
    ids=st.lists(st.one_of(st.integers(-10**6, 10**6), st.text(max_size=8)), max_size=200),
    slots=st.integers(1, 50),
)
def test_counts_add_up_under_hash(ids: list[int | str], slots: int) -> None:
    report = balance(ids, slots, "hash")
    assert sum(report.counts) == report.total == len(ids)
    assert len(report.counts) == slots
    assert report.empty_slots == tuple(s for s, count in enumerate(report.counts) if count == 0)


def test_24_to_48_nested_is_a_refinement() -> None:
    ids = range(28_742)
    switch = datetime(2026, 12, 1, tzinfo=UTC)
    plan = migration_plan(ids, SlotScheme(slots=24), SlotScheme(slots=48, layout="nested"), switch)
    assert plan.total == 28_742
    assert plan.moved == sum(1 for i in ids if i % 48 >= 24)  # the second half-hour of their hour
    assert plan.moved_out == 0  # nobody leaves their hour
    assert plan.effective_from == "2026-12-01T00:00:00+00:00"
    assert (plan.min_gap, plan.max_gap) == (86_400.0, 86_400.0 + 1_800.0)
    assert set(plan.to_json()) >= MIGRATE_FIELDS


def test_24_to_48_sequential_moves_nearly_everyone_out_of_their_hour() -> None:
    ids = range(28_000)
    switch = datetime(2026, 12, 1, tzinfo=UTC)
    plan = migration_plan(ids, SlotScheme(slots=24), SlotScheme(slots=48), switch)
    # 95.8 % in the field notes: only ids whose hour stays (id % 24 == (id % 48) // 2) are kept.
    assert plan.moved_out == sum(1 for i in ids if i % 24 != (i % 48) // 2)
    assert plan.moved_out / plan.total == pytest.approx(0.958, abs=0.001)
    # from hour id % 24 of the day before to half-hour id % 48 of the switch day
    gaps = [86_400 + (i % 48) * 1800 - (i % 24) * 3600 for i in ids]
    assert (plan.min_gap, plan.max_gap) == (min(gaps), max(gaps)) == (45_000, 129_600)


def test_gaps_follow_the_run_times_of_a_change_that_brings_its_own() -> None:
    """The seed's step: 24 slots first run at :01 (then :31), 48 slots run at :01 of each half hour."""
    ids = range(2_400)
    switch = datetime(2026, 12, 2, tzinfo=UTC)
    at_starts = migration_plan(ids, SlotScheme(slots=24), SlotScheme(slots=48), switch)
    same = migration_plan(
        ids, SlotScheme(slots=24), SlotScheme(slots=48), switch,
        old_offset=timedelta(minutes=1), new_offset=timedelta(minutes=1),
    )
    assert (same.min_gap, same.max_gap) == (at_starts.min_gap, at_starts.max_gap)
    later = migration_plan(
        ids, SlotScheme(slots=24), SlotScheme(slots=48), switch,
        old_offset=timedelta(minutes=1), new_offset=timedelta(minutes=20),
    )
    assert (later.min_gap, later.max_gap) == (at_starts.min_gap + 19 * 60, at_starts.max_gap + 19 * 60)
    assert later.moved == at_starts.moved  # which window a record is in does not depend on run times
    with pytest.raises(InvalidInput, match="new run time 31 min is outside the 30 min slot of 48:"):
        migration_plan(ids, SlotScheme(slots=24), SlotScheme(slots=48), switch, new_offset=timedelta(minutes=31))


def test_mod_to_hash_switch_in_a_dst_zone_measures_real_time() -> None:
    # The switch period is New York's fall-back day: its slots after 02:00 start an hour later in UTC.
    old = SlotScheme(slots=24, tz="America/New_York")
    new = SlotScheme(slots=24, tz="America/New_York", assign="hash")
    switch = datetime(2026, 11, 1, tzinfo=new.zone)
    ids = list(range(2_400))
    plan = migration_plan(ids, old, new, switch)
    assert plan.effective_from == "2026-11-01T00:00:00-04:00"
    assert plan.moved == sum(1 for i in ids if old.slot_of(i) != new.slot_of(i))
    zone = new.zone
    gaps = [
        (datetime(2026, 11, 1, new.slot_of(i), tzinfo=zone).astimezone(UTC)
         - datetime(2026, 10, 31, old.slot_of(i), tzinfo=zone).astimezone(UTC)).total_seconds()
        for i in ids
    ]
    assert (plan.min_gap, plan.max_gap) == (min(gaps), max(gaps))
    # a record keeping slot 5 waits 25 real hours: the clocks fall back in between
    assert any(old.slot_of(i) == new.slot_of(i) == 5 for i in ids) and plan.max_gap >= 25 * 3600


def test_a_switch_must_be_at_a_period_boundary() -> None:
    with pytest.raises(InvalidInput, match=r"period boundary.*2026-12-02T00:00:00"):
        migration_plan([1], SlotScheme(slots=24), SlotScheme(slots=48), datetime(2026, 12, 1, 15, tzinfo=UTC))
    with pytest.raises(InvalidInput, match="no time zone"):
        migration_plan([1], SlotScheme(slots=24), SlotScheme(slots=48), datetime(2026, 12, 1))


def test_parse_ids() -> None:
    lines = ["42\n", "\n", "  -5 \n", "user-7\n", "007\n", "+3\n", "\r\n"]
    assert parse_ids(lines, "ids.txt") == [42, -5, "user-7", "007", "+3"]
    assert parse_ids(lines[:3], "ids.txt", require_int=True) == [42, -5]
    assert parse_ids(["007", "+3"], "ids.txt", require_int=True) == [7, 3]
    assert parse_ids("1\n2\n\n3", "stdin") == [1, 2, 3]


def test_parse_ids_names_the_bad_line() -> None:
    lines = [f"{n}\n" for n in range(16)] + ["abc\n"]
    with pytest.raises(InvalidInput) as caught:
        parse_ids(lines, "ids.txt", require_int=True)
    assert str(caught.value) == (
        "ids.txt line 17: 'abc' is not an integer id; use --assign hash for string ids"
    )


def test_parse_ids_keeps_the_text_a_database_would_hash() -> None:
    # "007" stays text: H("007") is what PostgreSQL computes from a text column holding 007.
    from vardiya.slots import stable_hash

    assert [stable_hash(i) for i in parse_ids(["007", "7"], "ids")] == [stable_hash("007"), stable_hash(7)]


def test_balance_takes_a_window_free_b() -> None:
    # balance needs no period: 7 slots are fine even though 7 does not divide a day.
    assert balance(range(70), 7).counts == (10,) * 7
    with pytest.raises(InvalidInput, match="positive"):
        balance(range(3), 0)
    with pytest.raises(InvalidInput, match="'mod' or 'hash'"):
        balance(range(3), 24, "random")
