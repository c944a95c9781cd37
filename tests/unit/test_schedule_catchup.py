"""The catch-up policy as a pure decision: which missed ticks fire after downtime, which are passed by."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vardiya.errors import ConfigurationError
from vardiya.schedule import CatchUpPolicy, decide

T0 = datetime(2026, 12, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def hours(*numbers: int) -> list[datetime]:
    return [T0 + HOUR * number for number in numbers]


def test_the_default_fires_only_the_latest_missed_tick() -> None:
    due = hours(1, 2, 3, 4, 5)
    decision = decide(due, live_from=T0 + HOUR * 5 + timedelta(minutes=30), now=T0 + HOUR * 5 + timedelta(minutes=30),
                      policy=CatchUpPolicy(grace=timedelta(0)))
    assert decision.fire == tuple(hours(5))
    assert decision.skipped == tuple(hours(1, 2, 3, 4))
    assert decision.through == T0 + HOUR * 5


def test_ticks_that_came_due_while_running_all_fire() -> None:
    """A scheduler that started before them noticed them late (load, a forward clock step): none is missed."""
    due = hours(1, 2, 3)
    decision = decide(due, live_from=T0, now=T0 + HOUR * 3, policy=CatchUpPolicy(max_ticks=0, grace=timedelta(0)))
    assert decision.fire == tuple(due)
    assert decision.skipped == ()


def test_grace_keeps_a_quick_restart_from_skipping() -> None:
    due = hours(1, 2)
    restart = T0 + HOUR * 2 + timedelta(minutes=2)
    # hour 1 is 62 minutes before the restart: missed (and passed by); hour 2 is within grace: on time
    decision = decide(due, live_from=restart, now=restart, policy=CatchUpPolicy(max_ticks=0, grace=timedelta(minutes=5)))
    assert decision.fire == tuple(hours(2))
    assert decision.skipped == tuple(hours(1))


def test_max_ticks_and_max_age_bound_the_catch_up() -> None:
    due = hours(*range(1, 11))
    now = T0 + HOUR * 10 + timedelta(minutes=1)
    policy = CatchUpPolicy(max_ticks=3, max_age=timedelta(hours=2, minutes=30), grace=timedelta(0))
    decision = decide(due, live_from=now, now=now, policy=policy)
    # only hours 8, 9, 10 are younger than 2.5 h, and at most 3 fire
    assert decision.fire == tuple(hours(8, 9, 10))
    assert len(decision.skipped) == 7
    older = CatchUpPolicy(max_ticks=3, max_age=timedelta(minutes=90), grace=timedelta(0))
    assert decide(due, live_from=now, now=now, policy=older).fire == tuple(hours(9, 10))


def test_nothing_due_decides_nothing() -> None:
    decision = decide([], live_from=T0, now=T0, policy=CatchUpPolicy())
    assert decision.empty and decision.through is None


@given(
    count=st.integers(0, 60),
    max_ticks=st.integers(0, 10),
    live_offset=st.integers(0, 70),
    grace=st.integers(0, 5),
    max_age=st.one_of(st.none(), st.integers(0, 80)),
)
def test_every_due_tick_is_fired_or_skipped_exactly_once(
    count: int, max_ticks: int, live_offset: int, grace: int, max_age: int | None
) -> None:
    due = hours(*range(1, count + 1))
    live_from = T0 + HOUR * live_offset
    now = max([live_from, *due])
    policy = CatchUpPolicy(
        max_ticks=max_ticks, grace=HOUR * grace, max_age=None if max_age is None else HOUR * max_age
    )
    decision = decide(due, live_from=live_from, now=now, policy=policy)
    assert sorted(decision.fire + decision.skipped) == due
    assert not set(decision.fire) & set(decision.skipped)
    missed = [tick for tick in due if tick <= live_from - policy.grace]
    assert len([tick for tick in decision.fire if tick in missed]) <= max_ticks
    assert all(tick in decision.fire for tick in due if tick not in missed)


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"max_ticks": -1}, "max_ticks"),
        ({"max_ticks": True}, "max_ticks"),
        ({"max_age": timedelta(seconds=-1)}, "max_age"),
        ({"grace": 5}, "grace"),
    ],
)
def test_bad_policies_are_refused_with_what_to_give(settings: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        CatchUpPolicy(**settings)  # type: ignore[arg-type]
