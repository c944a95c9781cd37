"""The meter-readings example: its data, its cleaning and its figures, without a store."""

from __future__ import annotations

import itertools
from collections import Counter

from vardiya.examples.meter_pipeline import (
    PERIODS,
    REGIONS,
    REQUIRED_FIELDS,
    SUBSCRIBERS,
    TYPES,
    clean_rows,
    consumption_rows,
    pipeline,
    pipeline_missing_edge,
    readings,
    subscribers,
    summary_rows,
)
from vardiya.pipeline import build_graph

MONTHS = [f"2026-{month:02d}" for month in range(1, 13)]


def test_the_graph_has_48_tasks_and_47_edges() -> None:
    graph = build_graph(pipeline)
    assert (len(graph), graph.edge_count) == (48, 47)
    assert graph.stage_names == ["ingest", "clean", "consumption", "summary"]
    assert graph.upstream("consumption@2026-07") == ["clean@2026-06", "clean@2026-07"]
    assert graph.upstream("consumption@2026-01") == ["clean@2026-01"]


def test_the_missing_edge_variant_lacks_exactly_the_eleven_cross_period_edges() -> None:
    graph = build_graph(pipeline_missing_edge)
    assert (len(graph), graph.edge_count) == (48, 36)
    assert set(build_graph(pipeline).edges()) - set(graph.edges()) == {
        (f"clean@{before}", f"consumption@{after}") for before, after in itertools.pairwise(MONTHS)
    }


def test_subscribers_are_a001_to_a200_each_with_a_region_type_and_start_index() -> None:
    people = subscribers()
    assert [person["subscriber"] for person in people] == [f"A{number:03d}" for number in range(1, 201)]
    assert len(people) == SUBSCRIBERS
    assert {person["region"] for person in people} == set(REGIONS) and len(REGIONS) == 5
    assert {person["type"] for person in people} == set(TYPES) and len(TYPES) == 2
    assert all(isinstance(person["start_index"], int) and person["start_index"] > 0 for person in people)


def test_data_come_from_the_seed_alone() -> None:
    assert readings("2026-04") == readings("2026-04")
    assert subscribers(7) == subscribers(7)
    assert readings("2026-04", seed=7) != readings("2026-04")
    assert subscribers(7) != subscribers()


def test_ingest_holds_bad_rows_that_clean_drops() -> None:
    for period in PERIODS:
        delivered = readings(period)
        missing = [row for row in delivered if any(row.get(name) is None for name in REQUIRED_FIELDS)]
        complete = [row for row in delivered if row not in missing]
        repeats = Counter((row["subscriber"], row["period"]) for row in complete)
        assert missing, period
        assert any(count > 1 for count in repeats.values()), period
        cleaned = clean_rows(delivered)
        assert len(cleaned) == SUBSCRIBERS
        assert [row["subscriber"] for row in cleaned] == [f"A{number:03d}" for number in range(1, 201)]
        assert all(row["period"] == period for row in cleaned)


def test_every_index_grows_every_month() -> None:
    start = {person["subscriber"]: person["start_index"] for person in subscribers()}
    previous = dict(start)
    for period in PERIODS:
        for row in clean_rows(readings(period)):
            assert row["index"] > previous[row["subscriber"]]
            previous[row["subscriber"]] = row["index"]


def test_consumption_over_the_year_is_2200_rows_and_the_first_period_has_none() -> None:
    cleaned = {period: clean_rows(readings(period)) for period in PERIODS}
    per_period = {
        period: consumption_rows(cleaned[period], cleaned[before]) if before else []
        for before, period in zip([None, *MONTHS], MONTHS, strict=False)
    }
    assert per_period["2026-01"] == []
    assert sum(map(len, per_period.values())) == 2_200
    row = per_period["2026-07"][0]
    assert row["consumption"] == row["index"] - row["previous_index"] > 0


def test_summary_is_per_region_and_type() -> None:
    current, previous = clean_rows(readings("2026-03")), clean_rows(readings("2026-02"))
    consumption = consumption_rows(current, previous)
    summary = summary_rows(consumption)
    assert {(row["region"], row["type"]) for row in summary} <= {(r, t) for r in REGIONS for t in TYPES}
    assert sum(row["subscribers"] for row in summary) == SUBSCRIBERS
    assert sum(row["consumption"] for row in summary) == sum(row["consumption"] for row in consumption)
    assert summary == sorted(summary, key=lambda row: (row["region"], row["type"]))
