"""Slot arithmetic: id -> slot -> window, planned time -> (period, slot), ticks, across DST in four zones."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vardiya.errors import InvalidInput
from vardiya.slots import Assign, Layout, Period, SlotScheme, parse_scheme

HOUR = timedelta(hours=1)
ZONES = ["UTC", "Europe/Istanbul", "America/New_York", "Australia/Lord_Howe"]
SPRING_FORWARD = {"America/New_York": date(2026, 3, 8), "Australia/Lord_Howe": date(2026, 10, 4)}
FALL_BACK = {"America/New_York": date(2026, 11, 1), "Australia/Lord_Howe": date(2026, 4, 5)}
TRANSITIONS = sorted(set(SPRING_FORWARD.values()) | set(FALL_BACK.values()))
# (B, period): B=7 cannot split a day into whole seconds, so it gets periods of its own; 10 x 1 min
# over ten minutes and 4 quarter-hours of an hour are sub-day wall-time periods.
SHAPES = [
    (1, timedelta(days=1)),
    (24, timedelta(days=1)),
    (48, timedelta(days=1)),
    (7, timedelta(minutes=7)),
    (7, timedelta(seconds=70)),
    (10, timedelta(minutes=10)),
    (4, timedelta(hours=1)),
]


def utc(moment: datetime) -> datetime:
    """In UTC, so that comparing and subtracting is by real time (same-zone datetimes use wall time)."""
    return moment.astimezone(UTC)


def real(start: datetime, end: datetime) -> timedelta:
    return utc(end) - utc(start)


def wall_exists(zone: ZoneInfo, wall: datetime) -> bool:
    """Independent of the code under test: does this local wall time occur at all?"""
    back = wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    return back == wall


def wall_occurrences(zone: ZoneInfo, wall: datetime) -> int:
    instants = {wall.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1)}
    return sum(1 for u in instants if u.astimezone(zone).replace(tzinfo=None) == wall)


@st.composite
def schemes(draw: st.DrawFn) -> SlotScheme:
    slots, period = draw(st.sampled_from(SHAPES))
    layout = draw(st.sampled_from(list(Layout))) if period >= timedelta(hours=1) else Layout.SEQUENTIAL
    if layout is Layout.NESTED and slots % (period // timedelta(hours=1)):
        layout = Layout.SEQUENTIAL  # 1 slot over a day cannot nest 24 hours
    assign, zone = draw(st.sampled_from(list(Assign))), draw(st.sampled_from(ZONES))
    return SlotScheme(slots=slots, period=period, assign=assign, tz=zone, layout=layout)


def around_transitions(draw: st.DrawFn, scheme: SlotScheme) -> datetime:
    """A local moment shortly before a DST transition day (or the transition hour, for short periods)."""
    day = draw(st.sampled_from(TRANSITIONS))
    if scheme.period >= timedelta(days=1):
        day -= timedelta(days=draw(st.integers(0, 2)))
        return datetime.combine(day, time(), tzinfo=scheme.zone)
    minutes = draw(st.integers(0, 4 * 60))  # covers the 01:00-03:00 local transitions
    return datetime.combine(day, time(), tzinfo=scheme.zone) + timedelta(minutes=minutes)


def periods_from(scheme: SlotScheme, moment: datetime, count: int) -> list[Period]:
    first = scheme.period_of(moment)
    return [scheme.period_after(first, n) for n in range(count)]


def check_period(scheme: SlotScheme, period: Period) -> None:
    windows = [scheme.window(period, slot) for slot in range(scheme.slots)]
    # (a) every slot has exactly one wall-time window, and together they are the B windows
    offsets = sorted(scheme.window_offset(slot) for slot in range(scheme.slots))
    assert offsets == [i * scheme.window_length for i in range(scheme.slots)]
    # (b) in time order the windows tile the period without overlap
    ordered = sorted(windows, key=lambda window: scheme.window_offset(window.slot))
    assert utc(ordered[0].start) == utc(period.start) and utc(ordered[-1].end) == utc(period.end)
    for earlier, later in pairwise(ordered):
        assert utc(earlier.end) == utc(later.start)
    # (c) a window's first and last instants locate back to its slot and period
    for window in windows:
        assert window.exists == (utc(window.start) < utc(window.end))
        if window.exists:
            for moment in (utc(window.start), utc(window.end) - timedelta(microseconds=1)):
                position = scheme.locate(moment)
                assert (position.slot, position.period) == (window.slot, period)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_windows_tile_every_period_across_dst(data: st.DataObject) -> None:
    scheme = data.draw(schemes())
    for period in periods_from(scheme, around_transitions(data.draw, scheme), 5):
        check_period(scheme, period)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize(("slots", "layout"), [(24, "sequential"), (48, "nested")])
def test_consecutive_days_through_both_dst_seasons(zone: str, slots: int, layout: str) -> None:
    scheme = SlotScheme(slots=slots, tz=zone, layout=layout)
    # Real lengths of the days in each season: New York springs forward in March and falls back in
    # November; Lord Howe (southern hemisphere, 30-minute shift) the other way round.
    seasons = {
        ("2026-03-01", "2026-04-10"): {"America/New_York": {23, 24}, "Australia/Lord_Howe": {24, 24.5}},
        ("2026-09-27", "2026-11-05"): {"America/New_York": {24, 25}, "Australia/Lord_Howe": {23.5, 24}},
    }
    for (first, last), expected in seasons.items():
        period = scheme.period_for_key(first)
        hours = set()
        while period.key <= last:
            check_period(scheme, period)
            hours.add(real(period.start, period.end) / timedelta(hours=1))
            period = scheme.period_of(period.end)
        assert hours == expected.get(zone, {24})


@pytest.mark.parametrize("zone", sorted(SPRING_FORWARD))
@pytest.mark.parametrize(
    ("slots", "layout"), [(1, "sequential"), (24, "sequential"), (48, "sequential"), (48, "nested")]
)
def test_spring_forward_loses_exactly_the_missing_slots(zone: str, slots: int, layout: str) -> None:
    scheme = SlotScheme(slots=slots, tz=zone, layout=layout)
    period = scheme.period_for_key(SPRING_FORWARD[zone].isoformat())
    gap = timedelta(days=1) - real(period.start, period.end)
    assert gap in {timedelta(hours=1), timedelta(minutes=30)}
    midnight = datetime.combine(SPRING_FORWARD[zone], time())
    missing = set()
    for slot in range(slots):
        wall = midnight + scheme.window_offset(slot)
        last_second = wall + scheme.window_length - timedelta(seconds=1)
        if not wall_exists(scheme.zone, wall) and not wall_exists(scheme.zone, last_second):
            missing.add(slot)
    assert {slot for slot in range(slots) if not scheme.window(period, slot).exists} == missing
    assert len(missing) == gap // scheme.window_length
    ticks = [tick.slot for tick in scheme.planned_times(period.start, period.end)]
    assert sorted(ticks) == sorted(set(range(slots)) - missing)


@pytest.mark.parametrize("zone", sorted(FALL_BACK))
@pytest.mark.parametrize(
    ("slots", "layout"), [(1, "sequential"), (24, "sequential"), (48, "nested"), (48, "sequential")]
)
@pytest.mark.parametrize("offset", [timedelta(0), timedelta(minutes=1)])
def test_fall_back_fires_the_repeated_slot_twice(
    zone: str, slots: int, layout: str, offset: timedelta
) -> None:
    scheme = SlotScheme(slots=slots, tz=zone, layout=layout)
    period = scheme.period_for_key(FALL_BACK[zone].isoformat())
    repeat = real(period.start, period.end) - timedelta(days=1)
    assert repeat in {timedelta(hours=1), timedelta(minutes=30)}
    midnight = datetime.combine(FALL_BACK[zone], time())
    ticks = list(scheme.planned_times(period.start, period.end, [offset]))
    assert [utc(tick.planned_time) for tick in ticks] == sorted(utc(tick.planned_time) for tick in ticks)
    for slot in range(slots):
        expected = wall_occurrences(scheme.zone, midnight + scheme.window_offset(slot) + offset)
        assert [tick.slot for tick in ticks].count(slot) == expected
    twice = [slot for slot in range(slots) if [tick.slot for tick in ticks].count(slot) == 2]
    assert len(twice) == repeat // scheme.window_length


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_ticks_plus_backlog_cover_every_slot_exactly_once_per_period(data: st.DataObject) -> None:
    """Fire the planned ticks in order; each runs its own slot, then every earlier due slot not done."""
    scheme = data.draw(schemes())
    start = scheme.period_of(around_transitions(data.draw, scheme))
    periods = periods_from(scheme, start.start, 4)
    due = sorted(
        (utc(scheme.window(p, slot).start), p.key, slot) for p in periods for slot in range(scheme.slots)
    )
    ticks = list(scheme.planned_times(periods[0].start, periods[-1].end))
    done: dict[tuple[str, int], str] = {}
    compensation = 0
    cursor = 0
    for tick in ticks:
        assert scheme.locate(tick.planned_time).slot == tick.slot
        own = (tick.period.key, tick.slot)
        if own in done:
            compensation += 1  # a second run in the same slot and period: finds nothing left to do
        else:
            done[own] = "tick"
        while cursor < len(due) and due[cursor][0] <= utc(tick.planned_time):
            done.setdefault(due[cursor][1:], "backlog")
            cursor += 1
    all_slots = {(period.key, slot) for period in periods for slot in range(scheme.slots)}
    windows = {(p.key, s): scheme.window(p, s) for p in periods for s in range(scheme.slots)}
    # Everything whose window exists ran in its own tick; lost windows ran in the next tick's backlog,
    # except a lost window at the very end of the range, which the next period's first tick would take.
    # (After a fall back the range also holds second-occurrence ticks of the period before the first.)
    ran = {key: how for key, how in done.items() if key in all_slots}
    assert {key for key, how in ran.items() if how == "tick"} == {k for k, w in windows.items() if w.exists}
    unreached = {k for k in all_slots if utc(windows[k].start) >= utc(ticks[-1].planned_time)}
    assert set(ran) | unreached == all_slots
    repeated = len(ticks) - len({(tick.period.key, tick.slot) for tick in ticks})
    assert compensation == repeated


@given(st.integers(), st.sampled_from(list(Assign)))
def test_nested_48_keeps_every_record_in_its_hour(record_id: int, assign: Assign) -> None:
    hourly = SlotScheme(slots=24, assign=assign, tz="Europe/Istanbul")
    nested = SlotScheme(slots=48, assign=assign, tz="Europe/Istanbul", layout="nested")
    assert nested.slot_of(record_id) % 24 == hourly.slot_of(record_id)
    period = nested.period_for_key("2026-12-01")
    old = hourly.window(period, hourly.slot_of(record_id))
    new = nested.window(period, nested.slot_of(record_id))
    assert utc(old.start) <= utc(new.start) < utc(new.end) <= utc(old.end)
    if assign is Assign.MOD:
        assert (record_id % 48) % 24 == record_id % 24 == hourly.slot_of(record_id)


@given(st.integers(), st.sampled_from([1, 7, 24, 48]))
def test_mod_is_floor_modulo(record_id: int, slots: int) -> None:
    slot = SlotScheme(slots=slots, period=timedelta(minutes=7 * 48)).slot_of(record_id)
    assert 0 <= slot < slots and (record_id - slot) % slots == 0


def test_planned_time_decides_the_slot_not_the_clock() -> None:
    scheme = SlotScheme(slots=24, tz="Europe/Istanbul")
    assert scheme.locate(datetime(2026, 12, 1, 14, 59, 59, tzinfo=scheme.zone)).slot == 14
    assert scheme.locate(datetime(2026, 12, 1, 15, 0, tzinfo=scheme.zone)).slot == 15
    position = scheme.locate(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))  # 15:00 in Istanbul
    assert (position.slot, position.period.key) == (15, "2026-12-01")
    assert position.window.start == datetime(2026, 12, 1, 15, tzinfo=scheme.zone)
    assert position.window.end == datetime(2026, 12, 1, 16, tzinfo=scheme.zone)


def test_48_sequential_slots_are_half_hours() -> None:
    scheme = SlotScheme(slots=48)
    for minute in range(0, 24 * 60, 7):
        moment = datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=minute)
        assert scheme.locate(moment).slot == moment.hour * 2 + (moment.minute >= 30)


def test_nested_layout_puts_slot_s_in_hour_s_mod_24() -> None:
    scheme = SlotScheme(slots=48, layout="nested")
    assert scheme.coarse == 24
    period = scheme.period_for_key("2026-12-01")
    assert scheme.window(period, 5).start == datetime(2026, 12, 1, 5, 0, tzinfo=UTC)
    assert scheme.window(period, 29).start == datetime(2026, 12, 1, 5, 30, tzinfo=UTC)


def test_repeated_hour_maps_both_occurrences_to_one_slot() -> None:
    scheme = SlotScheme(slots=24, tz="America/New_York")
    first = scheme.locate(datetime(2026, 11, 1, 5, 30, tzinfo=UTC))  # 01:30 EDT
    second = scheme.locate(datetime(2026, 11, 1, 6, 30, tzinfo=UTC))  # 01:30 EST
    assert first == second and first.slot == 1
    # utc(): an ambiguous local time never compares equal to another zone's datetime (PEP 495)
    assert utc(first.window.start) == datetime(2026, 11, 1, 5, tzinfo=UTC)
    assert utc(first.window.end) == datetime(2026, 11, 1, 7, tzinfo=UTC)
    ticks = scheme.planned_times(datetime(2026, 11, 1, 4, tzinfo=UTC), datetime(2026, 11, 1, 8, tzinfo=UTC),
                                 [timedelta(minutes=1), timedelta(minutes=31)])
    assert [(t.planned_time.astimezone(UTC).strftime("%H:%M"), t.slot) for t in ticks] == [
        ("04:01", 0), ("04:31", 0),
        ("05:01", 1), ("05:31", 1), ("06:01", 1), ("06:31", 1),  # 01:01 and 01:31 EDT, then EST
        ("07:01", 2), ("07:31", 2),
    ]


def test_spring_forward_and_the_half_hour_gap_of_lord_howe() -> None:
    new_york = SlotScheme(slots=24, tz="America/New_York")
    lost = new_york.window(new_york.period_for_key("2026-03-08"), 2)
    assert not lost.exists and utc(lost.start) == utc(lost.end) == datetime(2026, 3, 8, 7, tzinfo=UTC)
    lord_howe = SlotScheme(slots=24, tz="Australia/Lord_Howe")
    cut = lord_howe.window(lord_howe.period_for_key("2026-10-04"), 2)  # 02:00-02:30 does not exist
    assert cut.exists and real(cut.start, cut.end) == timedelta(minutes=30)
    an_hour_before = utc(cut.start) - timedelta(hours=1)
    ticks = list(lord_howe.planned_times(an_hour_before, cut.end, [timedelta(minutes=1)]))
    assert [(t.slot, t.planned_time.strftime("%H:%M")) for t in ticks] == [(1, "01:01"), (2, "02:30")]


def test_one_tick_per_slot_on_an_ordinary_day_with_two_offsets() -> None:
    scheme = SlotScheme(slots=24)
    ticks = list(scheme.planned_times(datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC),
                                      [timedelta(minutes=31), timedelta(minutes=1)]))
    assert len(ticks) == 48
    assert [t.slot for t in ticks] == [slot for slot in range(24) for _ in range(2)]
    assert ticks[1].planned_time == datetime(2026, 12, 1, 0, 31, tzinfo=UTC)


def test_period_keys() -> None:
    moment = datetime(2026, 12, 1, 10, 37, 5, tzinfo=UTC)
    assert SlotScheme(slots=24).period_of(moment).key == "2026-12-01"
    assert SlotScheme(slots=10, period=timedelta(minutes=30)).period_of(moment).key == "2026-12-01T10:30"
    assert SlotScheme(slots=10, period=timedelta(seconds=10)).period_of(moment).key == "2026-12-01T10:37:00"
    weekly = SlotScheme(slots=7, period=timedelta(days=7), tz="Europe/Istanbul").period_of(moment)
    assert weekly.key == "2026-11-26T00:00:00Z" and weekly.start.utcoffset() == timedelta(hours=3)
    for scheme in (SlotScheme(slots=7, period=timedelta(seconds=70)), SlotScheme(slots=4, period=HOUR)):
        period = scheme.period_of(moment)
        assert scheme.period_for_key(period.key) == period
    with pytest.raises(InvalidInput, match="2026-12-01"):
        SlotScheme(slots=24).period_for_key("yesterday")


def test_a_naive_time_is_rejected() -> None:
    scheme = SlotScheme(slots=24)
    with pytest.raises(InvalidInput, match="no time zone"):
        scheme.locate(datetime(2026, 12, 1, 15))
    with pytest.raises(InvalidInput, match="no time zone"):
        list(scheme.planned_times(datetime(2026, 12, 1), datetime(2026, 12, 2, tzinfo=UTC)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slots": 0}, "positive integer"),
        ({"slots": -24}, "positive integer"),
        ({"slots": True}, "positive integer"),
        ({"slots": 7}, r"slots=7 does not divide a period of 1 day \(86400 s\).*such as 6 or 8"),
        ({"slots": 24, "period": timedelta(seconds=1.5)}, "whole number of seconds"),
        ({"slots": 24, "tz": "Mars/Olympus"}, "Europe/Istanbul"),
        ({"slots": 24, "assign": "random"}, "'mod' or 'hash'"),
        ({"slots": 24, "layout": "zigzag"}, "'sequential' or 'nested'"),
        ({"slots": 48, "layout": "nested", "coarse": 5}, "coarse=5 does not divide slots=48"),
        ({"slots": 10, "period": timedelta(minutes=10), "layout": "nested"}, "pass coarse="),
        ({"slots": 24, "coarse": 12}, "only applies to layout='nested'"),
    ],
)
def test_bad_schemes_say_how_to_fix_them(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        SlotScheme(**kwargs)  # type: ignore[arg-type]


def test_a_string_id_under_mod_suggests_hash() -> None:
    with pytest.raises(InvalidInput, match="assign='hash'"):
        SlotScheme(slots=24).slot_of("user-7")
    with pytest.raises(InvalidInput, match="int"):
        SlotScheme(slots=24).slot_of(True)
    assert SlotScheme(slots=24, assign="hash").slot_of("user-7") == 7


def test_bad_offsets_and_slots_are_rejected() -> None:
    scheme = SlotScheme(slots=24)
    day = datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(InvalidInput, match="within a slot window"):
        list(scheme.planned_times(day, day + timedelta(days=1), [timedelta(hours=1)]))
    with pytest.raises(InvalidInput, match="out of range"):
        scheme.window(scheme.period_of(day), 24)
    with pytest.raises(InvalidInput, match="does not belong"):
        scheme.window(SlotScheme(slots=24, tz="Europe/Istanbul").period_of(day), 3)


def test_fingerprint_changes_with_every_part_of_the_scheme() -> None:
    base = SlotScheme(slots=48, layout="nested")
    same = SlotScheme(slots=48, period=timedelta(hours=24), layout=Layout.NESTED, coarse=24)
    assert base.fingerprint == same.fingerprint
    variants = [
        SlotScheme(slots=24, layout="nested"),
        SlotScheme(slots=48, period=timedelta(hours=12), layout="nested", coarse=24),
        SlotScheme(slots=48, assign="hash", layout="nested"),
        SlotScheme(slots=48, tz="Europe/Istanbul", layout="nested"),
        SlotScheme(slots=48),
        SlotScheme(slots=48, layout="nested", coarse=12),
    ]
    prints = {base.fingerprint} | {variant.fingerprint for variant in variants}
    assert len(prints) == len(variants) + 1
    assert "hash-v1" in SlotScheme(slots=24, assign="hash").fingerprint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24", SlotScheme(slots=24)),
        ("48:nested", SlotScheme(slots=48, layout="nested")),
        ("24:hash", SlotScheme(slots=24, assign="hash")),
        ("48:hash:nested", SlotScheme(slots=48, assign="hash", layout="nested")),
        (" 48 : NESTED : hash ", SlotScheme(slots=48, assign="hash", layout="nested")),
    ],
)
def test_parse_scheme(text: str, expected: SlotScheme) -> None:
    assert parse_scheme(text) == expected


@pytest.mark.parametrize("junk", ["", "abc", "24:hash:mod", "24:nested:nested", "24:fast", "²4", "-24", "7"])
def test_parse_scheme_rejects_junk(junk: str) -> None:
    with pytest.raises(InvalidInput):
        parse_scheme(junk)


def test_parse_scheme_takes_period_and_zone() -> None:
    scheme = parse_scheme("10", period=timedelta(minutes=10), tz="Europe/Istanbul")
    assert (scheme.slots, scheme.window_length, scheme.tz) == (10, timedelta(minutes=1), "Europe/Istanbul")
