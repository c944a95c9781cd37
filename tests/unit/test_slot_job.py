"""A slot job's declaration: scheme changes with run times of their own, checked when the job is declared."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vardiya import App
from vardiya.errors import ConfigurationError
from vardiya.slots import IterableSource, SchemeChange, SlotJob, SlotScheme, planned_ticks

SWITCH = datetime(2026, 12, 2, tzinfo=UTC)
SEED_OFFSETS = (timedelta(minutes=1), timedelta(minutes=31))


def _seed_job(*changes: SchemeChange, **settings) -> SlotJob:  # type: ignore[no-untyped-def]
    """The seed's job: 24 slots, runs at :01 and :31 (spec/slots.md)."""
    return SlotJob(
        name="nightly_users", scheme=SlotScheme(slots=24), source=IterableSource(range(100)),
        handler=lambda record: None, runs_per_slot=2, offsets=SEED_OFFSETS, scheme_changes=changes, **settings,
    )


def test_the_seed_step_24_slots_twice_an_hour_to_48_slots_once_a_half_hour_can_be_declared() -> None:
    job = _seed_job(SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48), offsets=[timedelta(minutes=1)]))
    ticks = list(planned_ticks(job, SWITCH - timedelta(hours=1), SWITCH + timedelta(hours=1)))
    assert [f"{tick:%d %H:%M}" for tick in ticks] == ["01 23:01", "01 23:31", "02 00:01", "02 00:31"]
    after = job.runs_at(SWITCH)
    assert (after.scheme.slots, after.runs_per_slot, after.offsets) == (48, 1, (timedelta(minutes=1),))
    assert after.tick_interval == timedelta(minutes=30)
    before = job.runs_at(SWITCH - timedelta(seconds=1))
    assert (before.scheme.slots, before.runs_per_slot, before.offsets) == (24, 2, SEED_OFFSETS)
    # slot = hour * 2 + half: the 00:31 tick is slot 1 of the new scheme.
    assert after.scheme.locate(ticks[3]).slot == 1
    assert job.describe()["scheme_changes"] == [{
        "effective_from": "2026-12-02T00:00:00+00:00", "scheme": "48:86400s:mod:UTC:sequential",
        "runs_per_slot": 1, "offsets_s": [60.0],
    }]


def test_a_change_that_keeps_the_jobs_run_times_where_they_do_not_fit_is_refused_at_declaration() -> None:
    with pytest.raises(ConfigurationError) as caught:
        _seed_job(SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48)))
    message = str(caught.value)
    assert "'nightly_users'" in message
    assert "offset 31 min is outside the 30 min slot of the 48-slot scheme from 2026-12-02" in message


def test_app_registration_refuses_a_bad_change_so_it_never_reaches_the_scheduler() -> None:
    app = App("nightly")
    with pytest.raises(ConfigurationError, match="48-slot scheme from 2026-12-02"):
        app.slot_job(
            "nightly_users", scheme=SlotScheme(slots=24), source=IterableSource(range(10)), runs_per_slot=2,
            offsets=SEED_OFFSETS, scheme_changes=[SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48))],
        )(lambda record: None)
    assert app.slot_jobs == {}


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48), runs_per_slot=2, offsets=[timedelta(minutes=1)]),
         "runs_per_slot=2 but 1 offsets were given for the 48-slot scheme from 2026-12-02"),
        (SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48), runs_per_slot=0),
         "runs_per_slot of the 48-slot scheme from 2026-12-02 must be a whole number >= 1"),
        (SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=96), offsets=[timedelta(minutes=20)]),
         "offset 20 min is outside the 15 min slot of the 96-slot scheme from 2026-12-02"),
        (SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48), offsets=[timedelta(minutes=-1)]),
         "is outside the 30 min slot of the 48-slot scheme from 2026-12-02"),
    ],
    ids=["count", "zero-runs", "too-late", "negative"],
)
def test_bad_run_times_of_a_change_name_the_job_the_date_and_the_figure(change: SchemeChange, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match="'nightly_users'") as caught:
        _seed_job(change)
    assert fragment in str(caught.value)


def test_a_later_bad_change_is_found_too_every_scheme_in_force_is_checked() -> None:
    good = SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48), offsets=[timedelta(minutes=1)])
    bad = SchemeChange(effective_from=SWITCH + timedelta(days=5), scheme=SlotScheme(slots=96))
    with pytest.raises(ConfigurationError, match="offset 31 min is outside the 15 min slot of the 96-slot scheme from 2026-12-07") as caught:
        _seed_job(bad, good)
    assert "96-slot scheme from 2026-12-07" in str(caught.value)


def test_defaults_of_a_change_follow_the_job() -> None:
    # The job gave no offsets: its runs spread evenly over the window, so a change spreads them over its own.
    spread = SlotJob(
        name="spread", scheme=SlotScheme(slots=24), source=IterableSource(range(10)), handler=lambda r: None,
        runs_per_slot=2, scheme_changes=(SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48)),),
    )
    assert spread.runs_at(SWITCH).offsets == (timedelta(0), timedelta(minutes=15))
    # Offsets alone set the number of runs.
    counted = _seed_job(SchemeChange(
        effective_from=SWITCH, scheme=SlotScheme(slots=48), offsets=[timedelta(minutes=2), timedelta(minutes=20)],
    ))
    assert counted.runs_at(SWITCH).runs_per_slot == 2
    # Only the runs: spread over the new window.
    runs_only = _seed_job(SchemeChange(effective_from=SWITCH, scheme=SlotScheme(slots=48), runs_per_slot=3))
    assert runs_only.runs_at(SWITCH).offsets == (timedelta(0), timedelta(minutes=10), timedelta(minutes=20))


# -- the deadline: a duration or a fraction of the slot window, said one way ----------------------------

START = datetime(2026, 3, 1, 3, 1, tzinfo=UTC)


def _position(job: SlotJob):  # type: ignore[no-untyped-def]
    return job.scheme.locate(START)


@pytest.mark.parametrize(
    ("settings", "after"),
    [
        ({}, timedelta(hours=1)),  # the default: the whole window
        ({"deadline_fraction": 0.9}, timedelta(minutes=54)),
        ({"deadline_fraction": 1}, timedelta(hours=1)),
        ({"deadline": timedelta(minutes=40)}, timedelta(minutes=40)),
        ({"deadline": 1}, timedelta(seconds=1)),  # whole seconds are a duration, as they always were
    ],
)
def test_a_deadline_is_a_duration_or_a_fraction_of_the_window(settings: dict, after: timedelta) -> None:  # type: ignore[type-arg]
    job = _seed_job(**settings)
    assert job.deadline_at(_position(job), START) == START + after


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"deadline": 0.9}, "deadline=0.9 is ambiguous; write deadline_fraction=0.9"),
        ({"deadline": 1.0}, "write deadline_fraction=1.0 for a fraction of the slot window"),
        ({"deadline": timedelta(minutes=5), "deadline_fraction": 0.5}, "not both"),
        ({"deadline_fraction": 0}, "deadline_fraction must be in (0, 1]"),
        ({"deadline_fraction": 1.5}, "deadline_fraction must be in (0, 1]"),
        ({"deadline_fraction": True}, "deadline_fraction must be in (0, 1]"),
        ({"deadline": timedelta(0)}, "deadline must be longer than 0"),
        ({"deadline": -3}, "deadline must be longer than 0"),
    ],
)
def test_an_ambiguous_or_bad_deadline_is_refused_with_the_spelling_to_use(settings: dict, fragment: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigurationError, match="nightly_users") as raised:
        _seed_job(**settings)
    assert fragment in str(raised.value)


def test_a_deadline_that_is_not_a_duration_is_refused() -> None:
    from vardiya.errors import InvalidInput

    with pytest.raises(InvalidInput, match="deadline must be a timedelta or a number of seconds, got '5 min'"):
        _seed_job(deadline="5 min")


def test_the_app_decorator_takes_either_spelling_and_a_replace_can_swap_them() -> None:
    import dataclasses

    app = App("a")
    app.slot_job("j", scheme=SlotScheme(slots=24), source=IterableSource(range(3)), deadline_fraction=0.5)(
        lambda record: None
    )
    job = app.get_slot_job("j")
    assert job.deadline_at(_position(job), START) == START + timedelta(minutes=30)
    swapped = dataclasses.replace(job, deadline=timedelta(minutes=2), deadline_fraction=None)
    assert swapped.deadline_at(_position(swapped), START) == START + timedelta(minutes=2)
