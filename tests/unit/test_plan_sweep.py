"""The batch-size sweep of the example night: the valley, the picks, the size that cannot fit."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from vardiya.errors import InvalidInput
from vardiya.plan.profile import Profile
from vardiya.plan.replay import replay
from vardiya.plan.sweep import Sweep, recommend, sweep, sweep_chart_svg, write_sweep_chart
from vardiya.plan.workload import Workload, parse_workload

SIZES = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)




@pytest.fixture(scope="module")
def swept(night: Workload, profile: Profile) -> Sweep:
    return sweep(night, profile)


def test_one_row_per_size_of_the_profile_smallest_first(swept: Sweep) -> None:
    assert tuple(row.batch_size for row in swept.rows) == SIZES
    assert [row.batch_ms for row in swept.rows] == [250 + size * 400 for size in SIZES]


def test_cost_against_batch_size_is_a_valley(swept: Sweep) -> None:
    fitting = [row for row in swept.rows if row.fits_limit]
    costs = [row.cost for row in fitting]
    lowest = costs.index(min(costs))
    assert 0 < lowest < len(costs) - 1  # per-call overhead on the left, reprocessing on the right
    assert costs[:lowest + 1] == sorted(costs[:lowest + 1], reverse=True)
    assert costs[lowest:] == sorted(costs[lowest:])


def test_the_cheapest_size_is_not_the_fastest(swept: Sweep) -> None:
    assert (swept.cheapest, swept.fastest) == (10, 5)
    cheapest, fastest = swept.row(10), swept.row(5)
    assert cheapest.cost < fastest.cost and fastest.busy_ms < cheapest.busy_ms


def test_a_size_that_cannot_fit_the_limit_is_marked_and_never_recommended(swept: Sweep) -> None:
    too_big = swept.row(2500)
    assert too_big.batch_ms == 250 + 2500 * 400 > 900_000
    assert not too_big.fits_limit and too_big.timed_out == too_big.metrics.calls > 0
    assert all(row.fits_limit for row in swept.rows if row.batch_size != 2500)
    assert 2500 not in (swept.cheapest, swept.fastest)


def test_an_unfit_size_is_not_chosen_even_when_it_would_be_cheapest_and_fastest(profile: Profile) -> None:
    # every record passes, so nothing is reprocessed: the biggest batch is the cheapest and the fastest
    workload = parse_workload(["record,outcome"] + [f"{i},ok" for i in range(1, 5001)])
    roomy = dataclasses.replace(profile, time_limit_s=2_100)
    rows = [replay(workload, roomy, model="stream", batch_size=size) for size in (100, 2500, 5000)]
    assert recommend(rows) == (5000, 5000)
    strict = [dataclasses.replace(row, metrics=dataclasses.replace(row.metrics, fits_limit=row.batch_size != 5000))
              for row in rows]
    assert recommend(strict) == (2500, 2500)
    assert recommend([strict[2]]) == (None, None)


def test_co_failed_grows_with_the_batch_size_under_retry_batch(swept: Sweep) -> None:
    co_failed = [row.metrics.co_failed for row in swept.rows if row.fits_limit]
    assert co_failed[0] == 0 and co_failed == sorted(co_failed) and co_failed[-1] > 100 * co_failed[1]


def test_bisect_keeps_co_failed_at_zero_at_every_size(night: Workload, profile: Profile) -> None:
    result = sweep(night.head(4_000), profile, sizes=[10, 100, 1000], policy="bisect")
    assert [row.metrics.co_failed for row in result.rows] == [0, 0, 0]


def test_the_sweep_is_deterministic_and_its_json_has_the_cli_shape(night: Workload, profile: Profile) -> None:
    first = sweep(night.head(2_000), profile, sizes=[25, 5, 5]).to_json()
    assert json.dumps(first) == json.dumps(sweep(night.head(2_000), profile, sizes=[5, 25]).to_json())
    assert [row["batch_size"] for row in first["rows"]] == [5, 25]
    assert set(first) >= {"rows", "cheapest", "fastest"}
    assert set(first["rows"][0]) >= {
        "model", "batch_size", "policy", "calls", "processed", "extra", "dead_letter", "co_failed", "caller_wait_ms",
        "completion_mean_ms", "completion_p99_ms", "busy_ms", "cost", "fits_limit", "batch_ms",
    }
    with pytest.raises(InvalidInput, match="batch size must be a whole number of at least 1, got 0"):
        sweep(night.head(10), profile, sizes=[0])
    with pytest.raises(InvalidInput, match="at least one batch size"):
        sweep(night.head(10), profile, sizes=[])


def test_the_chart_has_a_bar_per_size_and_marks_the_one_that_cannot_fit(swept: Sweep, tmp_path: Path) -> None:
    svg = sweep_chart_svg(swept)
    assert "cheapest 10, fastest 5" in svg and "cannot fit the 900 s limit" in svg
    costs = re.findall(r'<g class="panel" data-series="cost".*?</g>', svg, flags=re.S)[0]
    bars = re.findall(r'<rect class="(bar[^"]*)" data-slot="(\d+)" data-value="([^"]+)"', costs)
    assert len(bars) == len(SIZES)
    assert [index for kind, index, _ in bars if "overrun" in kind] == [str(SIZES.index(2500))]
    assert float(bars[SIZES.index(10)][2]) == pytest.approx(swept.row(10).cost, rel=1e-5)
    written = write_sweep_chart(tmp_path / "sweep.svg", swept)
    assert written.read_text(encoding="utf-8") == svg
    with pytest.raises(InvalidInput, match=r"use a file name ending in .svg or .png"):
        write_sweep_chart(tmp_path / "sweep.gif", swept)
