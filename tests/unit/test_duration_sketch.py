"""``DurationSketch``: exact ranks while it keeps every value, within 0.5% after, in bounded memory."""

from __future__ import annotations

import math
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.metrics import percentile
from vardiya.invoke.sketch import RELATIVE_ERROR, DurationSketch
from vardiya.store.handler_figures import nearest_rank_position

durations = st.lists(
    st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1e7, allow_nan=False)), min_size=1, max_size=400
)


@given(durations)
def test_while_every_value_is_kept_every_rank_is_exact(values: list[float]) -> None:
    sketch = DurationSketch(exact_max=len(values))
    for value in values:
        sketch.add(value)
    assert sketch.exact
    assert sketch.value_at_rank(nearest_rank_position(len(values), 0.99)) == percentile(values, 0.99)
    assert sketch.count == len(values) and sketch.total == pytest.approx(math.fsum(values))


@settings(max_examples=60)
@given(durations, st.integers(min_value=1, max_value=40), st.sampled_from([0.5, 0.9, 0.99, 1.0]))
def test_once_bucketed_a_rank_is_within_the_relative_error(values: list[float], exact_max: int, share: float) -> None:
    sketch = DurationSketch(exact_max=exact_max)
    for value in values:
        sketch.add(value)
    assert sketch.exact == (len(values) <= exact_max)
    wanted = percentile(values, share)
    got = sketch.value_at_rank(nearest_rank_position(len(values), share))
    assert abs(got - wanted) <= RELATIVE_ERROR * wanted + 1e-12


def test_a_million_waits_keep_a_bounded_sketch_and_an_accurate_p99() -> None:
    rng = random.Random(19)
    sketch = DurationSketch()
    values = [rng.lognormvariate(1.0, 1.5) for _ in range(200_000)]
    for value in values:
        sketch.add(value)
    buckets, size = len(sketch._buckets), len(pickle.dumps(sketch))
    for value in values * 4:  # a million calls in all: the sketch does not grow (only its counts do)
        sketch.add(value)
    assert not sketch.exact and len(sketch._buckets) == buckets <= sketch.buckets_max
    assert len(pickle.dumps(sketch)) < 1.1 * size
    wanted = percentile(values * 5, 0.99)
    got = sketch.value_at_rank(nearest_rank_position(sketch.count, 0.99))
    assert abs(got - wanted) <= RELATIVE_ERROR * wanted
    assert sketch.value_at_rank(sketch.count) == max(values)


def test_values_spread_wider_than_the_buckets_merge_the_lowest_and_keep_the_top() -> None:
    sketch = DurationSketch(exact_max=0, buckets_max=50)
    values = [1.1**n for n in range(400)]  # far more distinct buckets than 50
    for value in values:
        sketch.add(value)
    assert len(sketch._buckets) <= 50
    wanted = percentile(values, 0.99)
    got = sketch.value_at_rank(nearest_rank_position(len(values), 0.99))
    assert abs(got - wanted) <= RELATIVE_ERROR * wanted


def test_an_empty_sketch_answers_zero() -> None:
    assert DurationSketch().value_at_rank(1) == 0.0


def test_the_invokers_sync_tally_is_bounded_and_its_p99_within_the_error() -> None:
    clock = VirtualClock()
    app = App("sync")
    app.handler("v", model="sync")(lambda record, context: clock.sleep(record / 1000.0))  # waits n ms
    invoker = Invoker(None, app, clock=clock)
    for n in range(1, 10_001):
        invoker.call("v", n)
    waits = invoker._tallies["v"].waits
    assert not waits.exact and len(waits._buckets) <= waits.buckets_max
    metrics = invoker.metrics("v")
    assert metrics.calls == 10_000
    assert metrics.completion_mean_ms == pytest.approx(sum(range(1, 10_001)) / 10_000)  # exact
    exact_p99 = 9_900.0  # the 9,900th of the waits 1..10,000 ms
    assert abs(metrics.completion_p99_ms - exact_p99) <= RELATIVE_ERROR * exact_p99
