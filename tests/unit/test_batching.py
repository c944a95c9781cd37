"""Stream batch rules: the time limit check, bisecting failing batches, reported partial failures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vardiya.errors import ConfigurationError, InvalidInput
from vardiya.invoke import (
    bisect,
    check_batch_size,
    largest_batch_that_fits,
    partial_failures,
    plan_bisect,
    worst_case_duration,
)

# the example profile: 400 ms per reading, 250 ms per call, 900 s per invocation
PROFILE = {"per_record_s": 0.4, "per_call_overhead_s": 0.25, "time_limit_s": 900}
BATCH_SIZES_OF_INTEREST = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500]


# the time limit


def test_the_example_profile_fits_up_to_2249_records() -> None:
    assert largest_batch_that_fits(**PROFILE) == 2249


@pytest.mark.parametrize("batch_size", [1, 2, 1000, 2248, 2249])
def test_a_batch_that_fits_returns_its_worst_case(batch_size: int) -> None:
    assert check_batch_size(batch_size, **PROFILE) == pytest.approx(0.25 + batch_size * 0.4)


def test_every_size_from_1_to_2249_is_accepted_and_2250_is_not() -> None:
    for batch_size in range(1, 2250):
        check_batch_size(batch_size, **PROFILE)
    with pytest.raises(ConfigurationError, match="the largest that fits is 2249"):
        check_batch_size(2250, **PROFILE)


def test_2500_is_rejected_with_the_figure() -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_batch_size(2500, **PROFILE)
    assert type(caught.value) is ConfigurationError  # a configuration that cannot work, not a bad value
    assert str(caught.value) == (
        "batch_size 2500 needs up to 1000.25 s per invocation (0.25 s overhead + 2500 × 0.4 s), "
        "over the 900 s limit; the largest that fits is 2249"
    )


def test_of_the_sizes_of_interest_only_2500_cannot_be_chosen() -> None:
    rejected = []
    for batch_size in BATCH_SIZES_OF_INTEREST:
        try:
            check_batch_size(batch_size, **PROFILE)
        except ConfigurationError:
            rejected.append(batch_size)
    assert rejected == [2500]


def test_a_batch_that_takes_exactly_the_limit_fits() -> None:
    assert largest_batch_that_fits(per_record_s=0.5, per_call_overhead_s=0, time_limit_s=10) == 20
    assert check_batch_size(20, per_record_s=0.5, per_call_overhead_s=0, time_limit_s=10) == 10


def test_an_overhead_over_the_limit_fits_nothing_and_says_so() -> None:
    settings_ = {"per_record_s": 0.4, "per_call_overhead_s": 900, "time_limit_s": 900}
    assert largest_batch_that_fits(**settings_) == 0
    with pytest.raises(ConfigurationError, match="no batch size fits; raise the time limit"):
        check_batch_size(1, **settings_)


@settings(max_examples=300, deadline=None)
@given(
    per_record_s=st.floats(min_value=1e-3, max_value=100),
    per_call_overhead_s=st.floats(min_value=0, max_value=100),
    time_limit_s=st.floats(min_value=1e-3, max_value=10_000),
)
def test_largest_batch_is_the_boundary_of_the_check(
    per_record_s: float, per_call_overhead_s: float, time_limit_s: float
) -> None:
    budget = {
        "per_record_s": per_record_s,
        "per_call_overhead_s": per_call_overhead_s,
        "time_limit_s": time_limit_s,
    }
    largest = largest_batch_that_fits(**budget)
    if largest >= 1:
        assert check_batch_size(largest, **budget) <= time_limit_s
    with pytest.raises(ConfigurationError):
        check_batch_size(largest + 1, **budget)


BAD_BUDGETS = [
    ({"batch_size": 0}, "batch_size must be a whole number of at least 1, got 0"),
    ({"batch_size": -3}, "batch_size must be a whole number of at least 1, got -3"),
    ({"batch_size": 2.0}, "batch_size must be a whole number of at least 1, got 2.0"),
    ({"batch_size": True}, "batch_size must be a whole number of at least 1, got True"),
    ({"per_record_s": 0}, "per_record_s must be more than 0 seconds, got 0"),
    ({"per_record_s": -0.4}, "per_record_s must be more than 0 seconds, got -0.4"),
    ({"per_call_overhead_s": -1}, "per_call_overhead_s must be 0 or more seconds, got -1"),
    ({"time_limit_s": 0}, "time_limit_s must be more than 0 seconds, got 0"),
    ({"time_limit_s": math.inf}, "time_limit_s must be a finite number of seconds, got inf"),
    ({"per_record_s": "0.4"}, "per_record_s must be a finite number of seconds, got '0.4'"),
]


@pytest.mark.parametrize(("override", "expected"), BAD_BUDGETS)
def test_a_bad_budget_is_invalid_input_with_a_one_line_message(
    override: dict[str, object], expected: str
) -> None:
    arguments: dict[str, object] = {"batch_size": 10, **PROFILE, **override}
    with pytest.raises(InvalidInput) as caught:
        check_batch_size(**arguments)  # type: ignore[arg-type]
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_worst_case_duration_is_overhead_plus_records() -> None:
    assert worst_case_duration(10, per_record_s=0.4, per_call_overhead_s=0.25) == pytest.approx(4.25)


# bisect


@pytest.mark.parametrize(
    ("batch", "halves"),
    [([1, 2], ([1], [2])), ([1, 2, 3], ([1, 2], [3])), (list(range(6)), ([0, 1, 2], [3, 4, 5]))],
)
def test_bisect_halves_in_order_and_the_first_half_takes_the_odd_record(
    batch: list[int], halves: tuple[list[int], list[int]]
) -> None:
    assert bisect(batch) == halves


@pytest.mark.parametrize("batch", [[], ["only"]])
def test_a_batch_below_two_records_cannot_be_bisected(batch: list[str]) -> None:
    with pytest.raises(InvalidInput, match="cannot be split"):
        bisect(batch)


def test_plan_bisect_on_a_healthy_batch_is_one_call() -> None:
    plan = plan_bisect(list(range(10)), lambda record: False)
    assert (plan.calls, plan.isolated_bad, plan.healthy_processed, plan.records_processed) == (
        1,
        (),
        tuple(range(10)),
        10,
    )


def test_plan_bisect_isolates_one_poison_record_of_eight() -> None:
    plan = plan_bisect(list(range(8)), lambda record: record == 5)
    # [0..7] fails; [0..3] ok, [4..7] fails; [4,5] fails, [6,7] ok; [4] ok, [5] poison
    assert plan.calls == 7
    assert plan.isolated_bad == (5,)
    assert plan.healthy_processed == (0, 1, 2, 3, 4, 6, 7)  # depth first, left first: batch order
    assert plan.records_processed == 8 + 4 + 4 + 2 + 2 + 1 + 1


def test_plan_bisect_rejects_an_empty_batch() -> None:
    with pytest.raises(InvalidInput, match="at least one record"):
        plan_bisect([], lambda record: True)


@st.composite
def batches_with_poison(draw: st.DrawFn) -> tuple[int, frozenset[int]]:
    size = draw(st.integers(min_value=1, max_value=500))
    poison = draw(st.frozensets(st.integers(min_value=0, max_value=size - 1), max_size=min(size, 40)))
    return size, poison


@settings(max_examples=300, deadline=None)
@given(batches_with_poison())
def test_bisect_dead_letters_every_poison_record_and_no_healthy_one(
    case: tuple[int, frozenset[int]],
) -> None:
    size, poison = case
    batch = list(range(size))
    plan = plan_bisect(batch, lambda record: record in poison)
    assert set(plan.isolated_bad) == poison and len(plan.isolated_bad) == len(poison)
    # every healthy record is processed by exactly one successful call: none co-failed, none twice
    assert list(plan.healthy_processed) == [record for record in batch if record not in poison]
    # each failing call has at most one failing ancestor per poison record on each level of the split
    depth = math.ceil(math.log2(size)) if size > 1 else 0
    assert plan.calls <= 1 + 2 * len(poison) * depth
    assert plan.records_processed >= size


# partial failures (report_failures)


def test_partial_failures_split_by_the_reported_ids_in_batch_order() -> None:
    assert partial_failures(["a", "b", "c", "d"], ["d", "b", "b"]) == (["b", "d"], ["a", "c"])


def test_partial_failures_with_records_that_carry_their_id() -> None:
    batch = [{"id": 1, "value": 10}, {"id": 2, "value": 20}]
    to_retry, succeeded = partial_failures(batch, {2}, id_of=lambda record: record["id"])
    assert (to_retry, succeeded) == ([batch[1]], [batch[0]])


def test_no_reported_failure_means_the_whole_batch_succeeded() -> None:
    assert partial_failures([1, 2, 3], []) == ([], [1, 2, 3])


def test_a_failed_id_outside_the_batch_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as caught:
        partial_failures(["a", "b"], ["b", "z"])
    assert "1 failed id(s) that are not in the batch: 'z'" in str(caught.value)


def test_many_unknown_ids_are_counted_not_all_listed() -> None:
    with pytest.raises(InvalidInput, match=r"12 failed id\(s\).* and 7 more"):
        partial_failures([0], list(range(1, 13)))


def test_an_id_shared_by_two_records_is_ambiguous() -> None:
    with pytest.raises(InvalidInput, match="names 2 records of the batch"):
        partial_failures(["a", "a", "b"], ["a"])


def test_failed_ids_given_as_one_string_are_rejected() -> None:
    with pytest.raises(InvalidInput, match="not one string"):
        partial_failures(["a", "b"], "ab")
