"""Handler configuration is checked at declaration: a bad setting never reaches a worker."""

from __future__ import annotations

from typing import Any

import pytest

from vardiya.app import App
from vardiya.errors import ConfigurationError, InvalidInput
from vardiya.invoke import FixedWait, RetryPolicy
from vardiya.invoke.handlers import Dedup, Handler, Model, payload_key


def _fn(record: Any, context: Any) -> None:
    return None


def test_a_batch_size_that_cannot_fit_the_time_limit_is_rejected_with_the_figure() -> None:
    with pytest.raises(ConfigurationError, match=r"batch_size 2500 needs up to 1000.25 s .* over the 900 s limit; the largest that fits is 2249"):
        Handler(name="v", fn=_fn, model="stream", batch_size=2500, per_record_s=0.4, per_call_overhead_s=0.25)


def test_a_batch_size_that_fits_is_accepted() -> None:
    handler = Handler(name="v", fn=_fn, model="stream", batch_size=2249, per_record_s=0.4, per_call_overhead_s=0.25)
    assert handler.batch_kind == "batch:v" and handler.call_kind == "call:v"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"model": "lambda"}, "unknown invocation model 'lambda'"),
        ({"policy": "split"}, "unknown failure policy 'split'"),
        ({"batch_size": 0}, "batch_size of handler 'v' must be a whole number of at least 1"),
        ({"time_limit_s": -1}, "time_limit_s of handler 'v' must be 0 or more"),
        ({"lanes": 0}, "lanes of handler 'v' must be a whole number of at least 1"),
        ({"retry": {"attempts": 3}}, "must be a RetryPolicy"),
    ],
)
def test_bad_settings_are_one_clear_error(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        Handler(name="v", fn=_fn, **settings)


def test_a_negative_wait_and_zero_attempts_are_rejected() -> None:
    with pytest.raises(InvalidInput, match="seconds"):
        RetryPolicy(max_attempts=3, wait=FixedWait(seconds=-1))
    with pytest.raises(InvalidInput, match="max_attempts"):
        RetryPolicy(max_attempts=0, wait=FixedWait(seconds=1))


def test_the_same_function_serves_every_model() -> None:
    app = App("a")
    app.handler("v", model="sync")(_fn)
    handler = app.get_handler("v")
    assert handler.with_model("stream", batch_size=10).model is Model.STREAM
    assert handler.with_model("async").fn is handler.fn is _fn


def test_an_unknown_handler_names_the_close_match() -> None:
    app = App("a")
    app.handler("validate")(_fn)
    with pytest.raises(ConfigurationError, match="unknown handler 'validat' \\(did you mean 'validate'\\?\\)"):
        app.get_handler("validat")


def test_dedup_keys_are_stable_and_given_keys_win() -> None:
    dedup = Dedup(window=60)
    assert dedup.key_of({"b": 1, "a": 2}) == dedup.key_of({"a": 2, "b": 1}) == payload_key({"a": 2, "b": 1})
    assert dedup.key_of({"a": 1}, "order-7") == "order-7"
    with pytest.raises(InvalidInput, match="dedup window"):
        Dedup(window=0)
