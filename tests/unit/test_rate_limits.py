"""The rate-limit spelling (``rules.rates.parse_rate_limit``) and the bucket's refill. Pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vardiya.app import App
from vardiya.errors import InvalidInput
from vardiya.rules.rates import RateLimit, parse_rate_limit, refill, token_due_in


@pytest.mark.parametrize(
    ("spelling", "count", "per_s"),
    [("100/s", 100, 1.0), ("30/m", 30, 60.0), ("500/h", 500, 3600.0), (" 7 / sec ", 7, 1.0),
     ("2/minute", 2, 60.0), ("1/hours", 1, 3600.0), ("5/M", 5, 60.0)],
)
def test_spellings(spelling: str, count: int, per_s: float) -> None:
    limit = parse_rate_limit(spelling)
    assert (limit.count, limit.per_s) == (count, per_s)
    assert limit.capacity == count and limit.per_second == pytest.approx(count / per_s)


@pytest.mark.parametrize(
    ("spelling", "says"),
    [("100", "cannot read"), ("100/d", "unknown unit 'd'"), ("0/s", "lets nothing run"), ("-1/s", "cannot read"),
     ("1.5/s", "cannot read"), ("/s", "cannot read"), ("", "cannot read"), ("10/s/x", "cannot read")],
)
def test_bad_spellings_say_how_to_spell_one(spelling: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says) as raised:
        parse_rate_limit(spelling)
    assert "'100/s'" in str(raised.value)


@pytest.mark.parametrize("value", [100, 1.5, None, ["100/s"], True])
def test_a_limit_is_a_string_or_a_rate_limit(value: object) -> None:
    with pytest.raises(InvalidInput, match="must be a string"):
        parse_rate_limit(value)


def test_a_rate_limit_value_checks_itself() -> None:
    assert parse_rate_limit(RateLimit(count=3, per_s=2, burst=1)).capacity == 1
    for bad in ({"count": 0, "per_s": 1}, {"count": 1, "per_s": 0}, {"count": 1, "per_s": 1, "burst": 0},
                {"count": True, "per_s": 1}, {"count": 1, "per_s": float("inf")}):
        with pytest.raises(InvalidInput):
            RateLimit(**bad)  # type: ignore[arg-type]
    assert RateLimit(count=100, per_s=1).spelling() == "100/s"
    assert RateLimit(count=10, per_s=60, burst=2).spelling() == "10/m (burst 2)"


def test_a_handler_refuses_a_bad_limit_or_queue_at_declaration() -> None:
    app = App("limits")
    with pytest.raises(InvalidInput, match=r"handler 'h'.*unknown unit"):
        app.handler("h", rate_limit="10/week")(lambda record, context: None)
    with pytest.raises(InvalidInput, match="queue of handler 'h'"):
        app.handler("h", queue="no spaces")(lambda record, context: None)
    app.handler("h", queue="reports", rate_limit="10/m")(lambda record, context: None)
    described = app.handlers["h"].describe()
    assert described["queue"] == "reports" and described["rate_limit"] == "10/m"
    assert app.handlers["h"].limit == RateLimit(count=10, per_s=60.0)


@given(
    tokens=st.floats(0, 1000), elapsed=st.floats(-100, 1e6), rate=st.floats(0.001, 1000), capacity=st.integers(1, 1000)
)
def test_refill_never_passes_the_capacity_nor_loses_tokens(tokens: float, elapsed: float, rate: float, capacity: int) -> None:
    tokens = min(tokens, capacity)
    after = refill(tokens, elapsed, rate, capacity)
    assert tokens <= after <= capacity
    if elapsed <= 0:
        assert after == tokens


def test_a_token_is_due_when_the_bucket_has_refilled_to_one() -> None:
    assert token_due_in(0.0, 2 / 60) == pytest.approx(30.0)  # "2/m", empty: a token every 30 s
    assert token_due_in(0.75, 4.0) == pytest.approx(0.0625)
    assert token_due_in(1.0, 4.0) == 0.0 and token_due_in(3.5, 4.0) == 0.0
    assert token_due_in(1.0 - 1e-12, 1.0) == 0.0  # the claim's own tolerance: it would take this token


@pytest.mark.parametrize("per_second", [0.0, -1.0])
def test_a_bucket_that_never_refills_is_refused(per_second: float) -> None:
    with pytest.raises(InvalidInput, match="refill rate"):
        token_due_in(0.0, per_second)


@given(tokens=st.floats(min_value=0, max_value=1, allow_nan=False), limit=st.builds(
    RateLimit, count=st.integers(1, 1000), per_s=st.sampled_from([1.0, 60.0, 3600.0])))
def test_after_the_wait_the_bucket_holds_a_whole_token(tokens: float, limit: RateLimit) -> None:
    wait = token_due_in(tokens, limit.per_second)
    assert wait >= 0
    assert refill(tokens, wait, limit.per_second, max(1, limit.capacity)) + 1e-9 >= 1.0
