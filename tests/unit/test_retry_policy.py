"""Retry decisions: waits, jitter, giving up, the caller's sync retries, and parsing the settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vardiya.invoke
from vardiya.errors import InvalidInput
from vardiya.invoke import (
    JITTER_VERSION,
    CallerRetry,
    ExponentialWait,
    FixedWait,
    Jitter,
    RetryDecision,
    RetryPolicy,
    batching,
    jitter_fraction,
    retry,
)

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
EXPONENTIAL = ExponentialWait(initial=60, cap=600)


def policy(**overrides: object) -> RetryPolicy:
    values: dict[str, object] = {"max_attempts": 3, "wait": EXPONENTIAL} | overrides
    return RetryPolicy(**values)  # type: ignore[arg-type]


def test_invoke_exports_are_sorted_and_exist() -> None:
    for module in (vardiya.invoke, retry, batching):
        assert list(module.__all__) == sorted(module.__all__), module.__name__
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)


# waits


def test_exponential_waits_double_until_the_cap() -> None:
    retries = policy(max_attempts=8)
    assert retries.waits() == (60, 120, 240, 480, 600, 600, 600)


def test_exponential_wait_with_its_own_multiplier() -> None:
    wait = ExponentialWait(initial=1, multiplier=3, cap=20)
    assert [wait.base(n) for n in range(1, 5)] == [1, 3, 9, 20]


def test_exponential_wait_on_a_very_late_attempt_stays_at_the_cap() -> None:
    # 2 ** 5000 is beyond float range: the wait must still be the cap, not an OverflowError
    assert EXPONENTIAL.base(5001) == 600


def test_fixed_waits_are_all_the_same() -> None:
    retries = policy(max_attempts=4, wait=FixedWait(seconds=60))
    assert retries.waits() == (60, 60, 60)


def test_the_example_profile_retries_60_s_apart() -> None:
    retries = RetryPolicy.from_mapping({"attempts": 3, "wait_s": 60})
    first = retries.decide(1, NOW, "reading-17")
    second = retries.decide(2, first.at or NOW, "reading-17")
    third = retries.decide(3, second.at or NOW, "reading-17")
    assert (first.at, second.at) == (NOW + timedelta(seconds=60), NOW + timedelta(seconds=120))
    assert third.retry is False


# decisions


def test_a_failed_attempt_with_attempts_left_retries_after_the_wait() -> None:
    decision = policy().decide(2, NOW, "item-1")
    assert decision == RetryDecision(
        retry=True, at=NOW + timedelta(seconds=120), wait_s=120.0, attempt=2, reason=decision.reason
    )
    assert decision.next_attempt == 3
    assert "attempt 2 of 3 failed" in decision.reason and "attempt 3 at" in decision.reason


def test_the_decision_after_the_last_attempt_is_to_give_up_with_a_reason() -> None:
    decision = policy().decide(3, NOW, "item-1")
    assert (decision.retry, decision.at, decision.wait_s, decision.attempt) == (False, None, 0.0, 3)
    assert decision.next_attempt is None
    assert decision.reason == "attempt 3 of 3 failed; no attempts left: dead letter"


def test_max_attempts_one_never_retries() -> None:
    retries = policy(max_attempts=1)
    assert retries.waits() == ()
    assert retries.decide(1, NOW).retry is False


def test_an_attempt_beyond_max_attempts_gives_up_and_says_so() -> None:
    # a worker crash counts as an attempt, so the engine can report attempt 4 of a 3-attempt policy
    decision = policy().decide(4, NOW)
    assert decision.retry is False
    assert "beyond max_attempts=3" in decision.reason


def test_decide_keeps_the_instant_of_an_offset_datetime() -> None:
    istanbul = NOW.astimezone(timezone(timedelta(hours=3)))
    decision = policy().decide(1, istanbul)
    assert decision.at == NOW + timedelta(seconds=60)
    assert decision.at is not None and decision.at.utcoffset() == timedelta(0)


def test_decide_rejects_a_naive_time() -> None:
    with pytest.raises(InvalidInput, match="no time zone"):
        policy().decide(1, datetime(2026, 12, 1, 3, 0))


# jitter


def test_jitter_fraction_is_pinned() -> None:
    # changing the derivation moves every replayed wait: it must be a deliberate JITTER_VERSION bump
    assert JITTER_VERSION == 1
    assert jitter_fraction("r1", 1) == 0.4728915285846522
    assert jitter_fraction("r2", 2) == 0.31298679086701087


@settings(max_examples=200, deadline=None)
@given(key=st.text(max_size=30), attempt=st.integers(min_value=1, max_value=10**9))
def test_jitter_fraction_is_in_the_half_open_unit_interval(key: str, attempt: int) -> None:
    assert 0 <= jitter_fraction(key, attempt) < 1


def test_jitter_is_reproducible_for_the_same_key_and_attempt() -> None:
    first = policy(jitter=Jitter.FULL).decide(2, NOW, "reading-42")
    again = policy(jitter=Jitter.FULL).decide(2, NOW, "reading-42")
    assert first == again


def test_jitter_differs_across_keys_and_attempts() -> None:
    retries = policy(jitter=Jitter.FULL, wait=FixedWait(seconds=60))
    across_keys = {retries.wait_after(1, f"reading-{n}") for n in range(200)}
    across_attempts = {retries.wait_after(n, "reading-0") for n in range(1, 200)}
    assert len(across_keys) == 200
    assert len(across_attempts) == 199


def test_full_jitter_spreads_over_the_whole_wait() -> None:
    retries = policy(jitter=Jitter.FULL, wait=FixedWait(seconds=60))
    waits = [retries.wait_after(1, f"reading-{n}") for n in range(2000)]
    assert all(0 <= wait <= 60 for wait in waits)
    assert min(waits) < 6 and max(waits) > 54  # it uses the range, not a corner of it


def test_equal_jitter_stays_in_the_upper_half() -> None:
    retries = policy(jitter="equal", wait=FixedWait(seconds=60))
    waits = [retries.wait_after(1, f"reading-{n}") for n in range(2000)]
    assert all(30 <= wait <= 60 for wait in waits)
    assert min(waits) < 33 and max(waits) > 57


def test_jitter_ratio_narrows_the_band() -> None:
    retries = policy(jitter=Jitter.FULL, jitter_ratio=0.1, wait=FixedWait(seconds=100))
    waits = [retries.wait_after(1, f"reading-{n}") for n in range(500)]
    assert all(90 <= wait <= 100 for wait in waits)


def test_no_jitter_ignores_the_key() -> None:
    retries = policy()
    assert {retries.wait_after(1, f"reading-{n}") for n in range(50)} == {60}


@settings(max_examples=200, deadline=None)
@given(
    initial=st.floats(min_value=0, max_value=1e6),
    extra=st.floats(min_value=0, max_value=1e6),
    multiplier=st.floats(min_value=1, max_value=100),
    jitter=st.sampled_from(list(Jitter)),
    ratio=st.floats(min_value=0, max_value=1),
    attempt=st.integers(min_value=1, max_value=10_000),
    key=st.text(max_size=20),
)
def test_a_wait_is_never_negative_nor_above_the_cap(
    initial: float, extra: float, multiplier: float, jitter: Jitter, ratio: float, attempt: int, key: str
) -> None:
    wait = ExponentialWait(initial=initial, multiplier=multiplier, cap=initial + extra)
    retries = RetryPolicy(max_attempts=attempt + 1, wait=wait, jitter=jitter, jitter_ratio=ratio)
    base = wait.base(attempt)
    waited = retries.wait_after(attempt, key)
    share = {Jitter.NONE: 0.0, Jitter.FULL: ratio, Jitter.EQUAL: ratio / 2}[jitter]
    assert 0 <= waited <= base <= wait.cap
    assert waited >= base * (1 - share) - 1e-9 * base


@settings(max_examples=200, deadline=None)
@given(
    max_attempts=st.integers(min_value=1, max_value=50),
    beyond=st.integers(min_value=0, max_value=1000),
    jitter=st.sampled_from(list(Jitter)),
)
def test_attempts_from_max_on_never_retry(max_attempts: int, beyond: int, jitter: Jitter) -> None:
    retries = RetryPolicy(max_attempts=max_attempts, wait=FixedWait(seconds=5), jitter=jitter)
    decision = retries.decide(max_attempts + beyond, NOW, "item")
    assert decision.retry is False and decision.at is None
    assert decision.reason


@settings(max_examples=200, deadline=None)
@given(max_attempts=st.integers(min_value=2, max_value=50), data=st.data())
def test_attempts_below_max_always_retry_in_the_future(max_attempts: int, data: st.DataObject) -> None:
    attempt = data.draw(st.integers(min_value=1, max_value=max_attempts - 1))
    retries = RetryPolicy(max_attempts=max_attempts, wait=EXPONENTIAL, jitter=Jitter.FULL)
    decision = retries.decide(attempt, NOW, "item")
    assert decision.retry is True and decision.at is not None
    assert decision.at >= NOW and decision.next_attempt == attempt + 1


# the caller's retries (sync model)


def test_caller_retry_default_is_one_retry_200_ms_later() -> None:
    caller = CallerRetry()
    assert caller.max_calls == 2
    assert caller.delay_after(1) == 0.2
    assert caller.delay_after(2) is None


def test_caller_retry_of_zero_calls_once() -> None:
    assert CallerRetry(count=0).delay_after(1) is None


def test_caller_retry_from_mapping() -> None:
    assert CallerRetry.from_mapping({"count": 2, "delay_s": 1}) == CallerRetry(count=2, delay_s=1.0)


# parsing settings


def test_from_mapping_reads_the_documented_example() -> None:
    parsed = RetryPolicy.from_mapping(
        {"attempts": 3, "wait_s": 60, "backoff": "exponential", "cap_s": 600, "jitter": "full"}
    )
    assert parsed == RetryPolicy(max_attempts=3, wait=EXPONENTIAL, jitter=Jitter.FULL)


def test_from_mapping_defaults_to_three_fixed_attempts_without_jitter() -> None:
    assert RetryPolicy.from_mapping({"wait_s": 60}) == RetryPolicy(wait=FixedWait(seconds=60))


@settings(max_examples=100, deadline=None)
@given(
    max_attempts=st.integers(min_value=1, max_value=100),
    wait=st.one_of(
        st.builds(FixedWait, seconds=st.floats(min_value=0, max_value=1e6)),
        st.builds(
            lambda initial, extra, multiplier: ExponentialWait(
                initial=initial, multiplier=multiplier, cap=initial + extra
            ),
            st.floats(min_value=0, max_value=1e6),
            st.floats(min_value=0, max_value=1e6),
            st.floats(min_value=1, max_value=10),
        ),
    ),
    jitter=st.sampled_from(list(Jitter)),
    ratio=st.floats(min_value=0, max_value=1),
)
def test_to_mapping_round_trips(
    max_attempts: int, wait: FixedWait | ExponentialWait, jitter: Jitter, ratio: float
) -> None:
    original = RetryPolicy(max_attempts=max_attempts, wait=wait, jitter=jitter, jitter_ratio=ratio)
    assert RetryPolicy.from_mapping(original.to_mapping()) == original


def test_an_unknown_key_is_named_with_the_known_ones() -> None:
    with pytest.raises(InvalidInput) as caught:
        RetryPolicy.from_mapping({"atempts": 3, "wait_s": 60})
    message = str(caught.value)
    assert "'atempts'" in message and "did you mean 'attempts'" in message
    assert "attempts, backoff, cap_s, jitter, jitter_ratio, multiplier, wait_s" in message


BAD_POLICIES = [
    (lambda: policy(max_attempts=0), "max_attempts must be a whole number of at least 1, got 0"),
    (lambda: policy(max_attempts=-2), "max_attempts must be a whole number of at least 1, got -2"),
    (lambda: policy(max_attempts=2.5), "max_attempts must be a whole number of at least 1, got 2.5"),
    (lambda: policy(max_attempts="3"), "max_attempts must be a whole number of at least 1, got '3'"),
    (lambda: policy(max_attempts=True), "max_attempts must be a whole number of at least 1, got True"),
    (lambda: FixedWait(seconds=-1), "a wait cannot be negative: seconds=-1"),
    (lambda: FixedWait(seconds=float("nan")), "seconds must be a finite number of seconds"),
    (lambda: FixedWait(seconds="60"), "seconds must be a finite number of seconds"),
    (lambda: ExponentialWait(initial=-5, cap=10), "a wait cannot be negative: initial=-5"),
    (lambda: ExponentialWait(initial=5, cap=-10), "a wait cannot be negative: cap=-10"),
    (lambda: ExponentialWait(initial=60, cap=30), "cap of an exponential wait cannot be below its initial"),
    (lambda: ExponentialWait(initial=60, multiplier=0.5, cap=600), "multiplier of an exponential wait"),
    (lambda: policy(wait=60), "wait must be a FixedWait or an ExponentialWait"),
    (
        lambda: policy(jitter="sometimes"),
        "jitter 'sometimes' is not known; use one of 'none', 'full', 'equal'",
    ),
    (lambda: policy(jitter_ratio=1.5), "jitter_ratio must be a number from 0 to 1, got 1.5"),
    (lambda: policy(jitter_ratio=float("nan")), "jitter_ratio must be a number from 0 to 1"),
    (lambda: policy().decide(0, NOW), "attempt must be a whole number of at least 1, got 0"),
    (lambda: policy().decide(1, "2026-12-01"), "now must be a datetime"),
    (lambda: policy(jitter=Jitter.FULL).wait_after(1, key=7), "a jitter key must be a string"),
    (lambda: CallerRetry(count=-1), "count must be a whole number of at least 0, got -1"),
    (lambda: CallerRetry(delay_s=-0.2), "a wait cannot be negative: delay_s=-0.2"),
    (lambda: CallerRetry().delay_after(0), "call must be a whole number of at least 1, got 0"),
    (
        lambda: CallerRetry.from_mapping({"retries": 1}),
        "unknown caller retry setting 'retries'; known settings: count, delay_s",
    ),
    (lambda: RetryPolicy.from_mapping([("wait_s", 60)]), "retry settings must be a table"),
    (lambda: RetryPolicy.from_mapping({"attempts": 3}), "retry settings need wait_s"),
    (lambda: RetryPolicy.from_mapping({"wait_s": -60}), "a wait cannot be negative: wait_s=-60"),
    (
        lambda: RetryPolicy.from_mapping({"wait_s": 60, "cap_s": 600}),
        "cap_s applies only to backoff = 'exponential'",
    ),
    (lambda: RetryPolicy.from_mapping({"wait_s": 60, "backoff": "exponential"}), "needs cap_s"),
    (
        lambda: RetryPolicy.from_mapping({"wait_s": 60, "backoff": "linear"}),
        "backoff 'linear' is not known",
    ),
    (
        lambda: RetryPolicy.from_mapping({"wait_s": 60, "backoff": "exponential", "cap_s": -1}),
        "a wait cannot be negative: cap_s=-1",
    ),
    (
        lambda: RetryPolicy.from_mapping({"wait_s": 60, "attempts": 0}),
        "max_attempts must be a whole number",
    ),
]


@pytest.mark.parametrize(("build", "expected"), BAD_POLICIES)
def test_every_bad_input_is_invalid_input_with_a_one_line_message(build: object, expected: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        build()  # type: ignore[operator]
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
