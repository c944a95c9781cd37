"""Pipeline graphs: partition sets, mappings, expansion into stage@partition tasks, validation, order."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vardiya.errors import ConfigurationError, InvalidInput
from vardiya.pipeline import (
    Daily,
    Monthly,
    PartitionMapping,
    PartitionSet,
    Pipeline,
    Stage,
    Static,
    TaskGraph,
    Unpartitioned,
    all_partitions,
    build_graph,
    custom,
    offset,
    same,
    window,
)

YEAR = Monthly(start="2026-01", end="2026-12")
MONTHS = [f"2026-{month:02d}" for month in range(1, 13)]
STAGES = ["ingest", "clean", "consumption", "summary"]


def noop(*_: object) -> None:
    """A stage body: graph building never calls it."""


def meter_pipeline() -> Pipeline:
    """The spec's per-period meter pipeline: four stages over the twelve months of 2026."""
    pipeline = Pipeline("meters")

    @pipeline.stage(partitions=YEAR)
    def ingest() -> None: ...

    @pipeline.stage(partitions=YEAR, depends_on={"ingest": same()})
    def clean() -> None: ...

    @pipeline.stage(partitions=YEAR, depends_on={"clean": [same(), offset(-1)]})
    def consumption() -> None: ...

    @pipeline.stage(partitions=YEAR, depends_on={"consumption": same()})
    def summary() -> None: ...

    return pipeline


def two_stage(
    up: PartitionSet, down: PartitionSet, mappings: PartitionMapping | list[PartitionMapping]
) -> Pipeline:
    return Pipeline(
        "pair",
        [
            Stage(name="up", fn=noop, partitions=up),
            Stage(name="down", fn=noop, partitions=down, depends_on={"up": mappings}),
        ],
    )


# -- the meter pipeline -----------------------------------------------------------------------------


def test_meter_graph_has_48_tasks_and_47_edges() -> None:
    graph = build_graph(meter_pipeline())
    assert (len(graph), graph.edge_count) == (48, 47)
    assert graph.to_json() == {"stages": STAGES, "tasks": 48, "edges": 47, "order": graph.order}


def test_meter_edges_are_three_per_period_plus_eleven_cross_period() -> None:
    expected = set()
    for number, month in enumerate(MONTHS):
        expected |= {
            (f"ingest@{month}", f"clean@{month}"),
            (f"clean@{month}", f"consumption@{month}"),
            (f"consumption@{month}", f"summary@{month}"),
        }
        if number:
            expected.add((f"clean@{MONTHS[number - 1]}", f"consumption@{month}"))
    edges = list(build_graph(meter_pipeline()).edges())
    assert len(edges) == len(set(edges)) == 47
    assert set(edges) == expected


def test_first_month_has_no_previous_month_edge_and_that_is_not_an_error() -> None:
    graph = build_graph(meter_pipeline())
    assert graph.upstream("consumption@2026-01") == ["clean@2026-01"]
    assert graph.upstream("consumption@2026-02") == ["clean@2026-01", "clean@2026-02"]
    assert graph.downstream("clean@2026-12") == ["consumption@2026-12"]
    assert graph.stage_of("clean@2026-03").name == "clean"
    assert graph.partition_of("clean@2026-03") == "2026-03"


def test_order_ties_go_to_the_first_declared_stage_then_the_earlier_partition() -> None:
    graph = build_graph(meter_pipeline())
    assert graph.order == [f"{stage}@{month}" for stage in STAGES for month in MONTHS]


def test_same_partition_variant_drops_exactly_the_cross_period_edges() -> None:
    graph = build_graph(meter_pipeline())
    variant = graph.variant_without_cross_partition_edges()
    assert (len(variant), variant.edge_count, graph.edge_count) == (48, 36, 47)
    assert all(up.split("@")[1] == down.split("@")[1] for up, down in variant.edges())
    assert set(graph.edges()) - set(variant.edges()) == {
        (f"clean@{before}", f"consumption@{month}") for before, month in itertools.pairwise(MONTHS)
    }


# -- validation -------------------------------------------------------------------------------------


def test_a_cycle_is_an_error_that_names_it_task_by_task() -> None:
    pipeline = Pipeline(
        "loop",
        [
            Stage(name="a", fn=noop, partitions=YEAR, depends_on={"c": same()}),
            Stage(name="b", fn=noop, partitions=YEAR, depends_on={"a": same()}),
            Stage(name="c", fn=noop, partitions=YEAR, depends_on={"b": [same(), offset(-1)]}),
        ],
    )
    with pytest.raises(ConfigurationError, match="cycle") as raised:
        build_graph(pipeline)
    assert "a@2026-01 -> b@2026-01 -> c@2026-01 -> a@2026-01" in str(raised.value)
    assert "stages a -> b -> c -> a" in str(raised.value)


def test_a_stage_reading_its_own_partition_is_a_cycle() -> None:
    pipeline = Pipeline("self", [Stage(name="a", fn=noop, partitions=YEAR, depends_on={"a": same()})])
    with pytest.raises(ConfigurationError, match=r"a@2026-01 -> a@2026-01 \(stages a -> a\)"):
        build_graph(pipeline)


def test_a_cycle_that_only_a_custom_mapping_closes_is_found_at_task_level() -> None:
    def next_month(key: str, upstream: PartitionSet) -> list[str]:
        later = upstream.offset(key, 1)
        return [] if later is None else [later]

    pipeline = Pipeline(
        "ahead",
        [
            Stage(name="a", fn=noop, partitions=YEAR, depends_on={"b": custom(next_month)}),
            Stage(name="b", fn=noop, partitions=YEAR, depends_on={"a": offset(-1)}),
        ],
    )
    with pytest.raises(ConfigurationError, match=r"a@2026-01 -> b@2026-02 -> a@2026-01"):
        build_graph(pipeline)


def test_a_stage_cycle_that_does_not_close_at_task_level_is_a_valid_graph() -> None:
    # b reads the previous month of a, a the same month of b: a running balance split over two stages.
    pipeline = Pipeline(
        "balance",
        [
            Stage(name="a", fn=noop, partitions=YEAR, depends_on={"b": same()}),
            Stage(name="b", fn=noop, partitions=YEAR, depends_on={"a": offset(-1)}),
        ],
    )
    graph = build_graph(pipeline)
    assert graph.order == [task for month in MONTHS for task in (f"b@{month}", f"a@{month}")]
    single = build_graph(
        Pipeline("running", [Stage(name="r", fn=noop, partitions=YEAR, depends_on={"r": offset(-1)})])
    )
    assert single.edge_count == 11 and single.order == [f"r@{month}" for month in MONTHS]


def test_an_unknown_stage_is_an_error_naming_the_stage_and_the_unknown_name() -> None:
    pipeline = Pipeline(
        "typo",
        [
            Stage(name="clean", fn=noop, partitions=YEAR),
            Stage(name="consumption", fn=noop, partitions=YEAR, depends_on={"cleen": same()}),
        ],
    )
    with pytest.raises(ConfigurationError, match=r"'consumption' depends on 'cleen'.*did you mean 'clean'"):
        build_graph(pipeline)


def test_duplicate_stage_names_are_refused() -> None:
    pipeline = Pipeline("twice", [Stage(name="clean", fn=noop)])
    with pytest.raises(ConfigurationError, match="declares stage 'clean' twice"):
        pipeline.add(Stage(name="clean", fn=noop))
    with pytest.raises(ConfigurationError, match="twice"):

        @pipeline.stage
        def clean() -> None: ...

    with pytest.raises(ConfigurationError, match="twice"):
        Pipeline("again", [Stage(name="x", fn=noop), Stage(name="x", fn=noop)])


def test_a_pipeline_without_stages_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="no stages"):
        build_graph(Pipeline("empty"))


def test_a_custom_mapping_returning_a_key_outside_the_set_is_an_error() -> None:
    def following_year(key: str, upstream: PartitionSet) -> list[str]:
        return [f"2027-{key[5:]}"]

    with pytest.raises(ConfigurationError) as raised:
        build_graph(two_stage(YEAR, YEAR, custom(following_year)))
    message = str(raised.value)
    parts = ("'down'", "'2027-01'", "custom(", "following_year", "partition '2026-01'", "2026-01..2026-12")
    for part in parts:
        assert part in message


@pytest.mark.parametrize(
    ("function", "match"),
    [
        (lambda key, upstream: key, "returned '2026-01'; return a list"),
        (lambda key, upstream: [1], "returned 1, which is not a partition"),
        (lambda key, upstream: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_a_custom_mapping_that_misbehaves_is_a_configuration_error(
    function: Callable[[str, PartitionSet], Iterable[str]], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        build_graph(two_stage(YEAR, YEAR, custom(function)))


def test_a_custom_mapping_can_join_differently_partitioned_stages() -> None:
    quarters = Static(keys=["2026-Q1", "2026-Q2", "2026-Q3", "2026-Q4"])

    def months_of(quarter: str, upstream: PartitionSet) -> list[str]:
        last = 3 * int(quarter[-1])
        return list(upstream.range(f"2026-{last - 2:02d}", f"2026-{last:02d}"))

    graph = build_graph(two_stage(YEAR, quarters, custom(months_of)))
    assert graph.upstream("down@2026-Q2") == ["up@2026-04", "up@2026-05", "up@2026-06"]
    assert (len(graph), graph.edge_count) == (16, 12)


def test_same_between_differently_partitioned_stages_maps_by_key() -> None:
    wider = Monthly(start="2025-01", end="2026-12")
    half = Monthly(start="2026-01", end="2026-06")
    graph = build_graph(two_stage(wider, half, [same(), offset(-1)]))
    assert graph.upstream("down@2026-01") == ["up@2025-12", "up@2026-01"]
    with pytest.raises(ConfigurationError, match="partitioned differently") as raised:
        build_graph(two_stage(half, wider, same()))
    assert "'2025-01'" in str(raised.value) and "all_partitions()" in str(raised.value)
    with pytest.raises(ConfigurationError, match="partitioned differently"):
        build_graph(two_stage(YEAR, Daily(start="2026-01-01", end="2026-01-31"), window(-1, 0)))


def test_fan_in_to_an_unpartitioned_report() -> None:
    pipeline = meter_pipeline()
    pipeline.add(Stage(name="report", fn=noop, depends_on={"summary": all_partitions()}))
    graph = build_graph(pipeline)
    assert (len(graph), graph.edge_count) == (49, 59)
    assert graph.order[-1] == "report"
    assert graph.upstream("report") == [f"summary@{month}" for month in MONTHS]
    assert graph.variant_without_cross_partition_edges().edge_count == 36


def test_window_reads_the_partitions_it_spans_and_stops_at_the_first() -> None:
    days = Daily(start="2026-02-27", end="2026-03-02")
    graph = build_graph(two_stage(days, days, window(-2, 0)))
    assert graph.upstream("down@2026-03-01") == ["up@2026-02-27", "up@2026-02-28", "up@2026-03-01"]
    assert graph.upstream("down@2026-02-27") == ["up@2026-02-27"]


def test_building_twice_gives_the_same_graph() -> None:
    first, second = build_graph(meter_pipeline()), build_graph(meter_pipeline())
    assert first.order == second.order and list(first.edges()) == list(second.edges())
    assert repr(first) == "TaskGraph(pipeline='meters', stages=4, tasks=48, edges=47)"


# -- declarations -----------------------------------------------------------------------------------


def test_the_decorator_declares_a_stage_and_returns_the_function() -> None:
    pipeline = Pipeline("decorated")

    @pipeline.stage
    def load() -> str:
        return "loaded"

    @pipeline.stage(name="totals", partitions=YEAR, depends_on={"load": all_partitions()}, retries=2)
    def compute_totals() -> None: ...

    assert load() == "loaded"
    assert [stage.name for stage in pipeline.stages] == ["load", "totals"]
    totals = pipeline.stages[1]
    assert totals.fn is compute_totals and totals.retries == 2
    assert dict(totals.depends_on) == {"load": (all_partitions(),)}
    assert build_graph(pipeline).order[0] == "load"


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"name": "a@b"}, "stage name must be 1 to 190 ASCII letters"),
        ({"name": ""}, "stage name must be 1 to 190"),
        ({"name": "a b"}, "got 'a b'"),
        ({"name": "s" * 191}, r"got 'sss.*\(191 characters\)"),
        ({"fn": 3}, "fn must be callable"),
        ({"partitions": "monthly"}, "partition set"),
        ({"depends_on": ["clean"]}, "must map upstream stage names"),
        ({"depends_on": {"clean": []}}, "non-empty list"),
        ({"depends_on": {"clean": "same"}}, "give a mapping"),
        ({"retries": -1}, "retries must be an integer >= 0"),
        ({"retries": True}, "retries"),
        ({"retry_wait_s": -0.5}, "retry_wait_s"),
    ],
)
def test_a_bad_stage_declaration_is_refused(changes: dict[str, object], match: str) -> None:
    fields: dict[str, object] = {"name": "clean", "fn": noop, **changes}
    with pytest.raises(ConfigurationError, match=match):
        Stage(**fields)  # type: ignore[arg-type]


def test_mapping_factories_check_their_arguments_and_describe_themselves() -> None:
    assert [str(mapping) for mapping in (same(), offset(-1), window(-3, 0), all_partitions())] == [
        "same()",
        "offset(-1)",
        "window(-3, 0)",
        "all_partitions()",
    ]
    with pytest.raises(ConfigurationError, match=r"window\(0, -1\) is empty"):
        window(0, -1)
    with pytest.raises(ConfigurationError, match="integer"):
        offset(True)
    with pytest.raises(ConfigurationError, match="needs a function"):
        custom("fn")  # type: ignore[arg-type]


# -- partition sets ---------------------------------------------------------------------------------


def test_monthly_counts_months_across_years() -> None:
    months = Monthly(start="2025-11", end="2026-02")
    assert months.keys == ("2025-11", "2025-12", "2026-01", "2026-02")
    assert months.index("2026-01") == 2
    assert months.offset("2025-12", 1) == "2026-01"
    assert months.offset("2025-11", -1) is None and months.offset("2026-02", 1) is None
    assert months.range("2025-12", "2026-01") == ("2025-12", "2026-01")
    assert months.select("2025-12..2026-02") == ("2025-12", "2026-01", "2026-02")
    assert months.select("2026-01") == ("2026-01",)
    assert len(YEAR) == 12 and "2026-07" in YEAR and "2027-01" not in YEAR


def test_daily_is_iso_dates_including_leap_days() -> None:
    days = Daily(start="2028-02-27", end="2028-03-01")
    assert days.keys == ("2028-02-27", "2028-02-28", "2028-02-29", "2028-03-01")
    assert Daily(start=date(2026, 1, 1), end="2026-01-02").start == "2026-01-01"  # type: ignore[arg-type]
    assert len(Daily(start="2026-01-01", end="2026-12-31")) == 365


def test_static_and_unpartitioned_sets() -> None:
    regions = Static(keys=["north", "south", "east"])
    assert regions.keys == ("north", "south", "east") and regions.offset("south", -1) == "north"
    assert regions.label == "Static (north, south, east)"
    one = Unpartitioned()
    assert one.keys == ("",) and one.index("") == 0 and one.range("", "") == ("",)
    assert one.offset("", -1) is None and one.select("") == ("",)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Monthly(start="2026-13", end="2026-12"), "start='2026-13' is not a month"),
        (lambda: Monthly(start="2026-1", end="2026-12"), "YYYY-MM"),
        (lambda: Monthly(start="2026-06", end="2026-01"), "ends before it starts"),
        (lambda: Daily(start="20260101", end="2026-01-02"), "is not a date"),
        (lambda: Daily(start="2026-02-30", end="2026-03-02"), "YYYY-MM-DD"),
        (lambda: Daily(start="2026-01-02", end="2026-01-01"), "ends before it starts"),
        (lambda: Static(keys=[]), "no partitions"),
        (lambda: Static(keys="north"), "list of keys"),
        (lambda: Static(keys=["a", "a"]), "given twice"),
        (lambda: Static(keys=["a@b"]), "without '@'"),
        (lambda: Static(keys=[""]), "non-empty"),
    ],
)
def test_a_bad_partition_set_is_invalid_input(make: Callable[[], PartitionSet], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        make()


def test_a_key_outside_the_set_is_an_error_naming_the_set_and_the_valid_range() -> None:
    outside = r"'2027-01' is not in Monthly 2026-01..2026-12; use a key in 2026-01..2026-12"
    with pytest.raises(InvalidInput, match=outside):
        YEAR.range("2026-06", "2027-01")
    with pytest.raises(InvalidInput, match="runs backwards"):
        YEAR.select("2026-06..2026-03")
    with pytest.raises(InvalidInput, match="not in Static"):
        Static(keys=["north"]).index("west")
    with pytest.raises(InvalidInput, match="Unpartitioned"):
        Unpartitioned().index("2026-01")


# -- properties over random DAG-shaped pipelines ------------------------------------------------------


def prefix(key: str, upstream: PartitionSet) -> list[str]:
    """A custom mapping: every upstream partition up to the same key (a running total)."""
    return list(upstream.keys[: upstream.index(key) + 1])


@st.composite
def random_pipelines(draw: st.DrawFn) -> Pipeline:
    """1..7 stages over one monthly set or unpartitioned, each reading earlier stages (and maybe itself)."""
    months = Monthly(start="2026-01", end=f"2026-{draw(st.integers(1, 7)):02d}")
    partitioned: list[bool] = []
    pipeline = Pipeline("random")
    for number in range(draw(st.integers(1, 7))):
        here = draw(st.booleans()) if number else True
        depends_on: dict[str, list[PartitionMapping]] = {}
        for upstream in draw(st.sets(st.integers(0, number - 1), max_size=3)) if number else ():
            if here and partitioned[upstream]:
                choices = st.sampled_from(
                    [same(), offset(-1), offset(-2), window(-2, 0), window(-1, 1), all_partitions(), custom(prefix)]
                )
            elif partitioned[upstream] or here:
                choices = st.just(all_partitions())
            else:
                choices = st.sampled_from([same(), all_partitions()])
            depends_on[f"s{upstream}"] = draw(st.lists(choices, min_size=1, max_size=2))
        if here and draw(st.booleans()):
            depends_on[f"s{number}"] = [draw(st.sampled_from([offset(-1), window(-2, -1)]))]
        partitions = months if here else Unpartitioned()
        pipeline.add(Stage(name=f"s{number}", fn=noop, partitions=partitions, depends_on=depends_on))
        partitioned.append(here)
    return pipeline


def named(stage: str, key: str) -> str:
    return f"{stage}@{key}" if key else stage


def expected_edges(pipeline: Pipeline) -> set[tuple[str, str]]:
    """The edges the declarations describe, worked out by key arithmetic instead of ``resolve``."""
    by_name = {stage.name: stage for stage in pipeline.stages}
    edges = set()
    for stage in pipeline.stages:
        keys = stage.partitions.keys
        for upstream_name, mappings in stage.depends_on.items():
            upstream_keys = by_name[upstream_name].partitions.keys
            for mapping in mappings:
                for position, key in enumerate(keys):
                    if mapping == all_partitions():
                        reads = list(upstream_keys)
                    elif mapping.function is prefix:
                        reads = list(upstream_keys[: upstream_keys.index(key) + 1])
                    else:
                        spots = range(position + mapping.first, position + mapping.last + 1)
                        reads = [upstream_keys[spot] for spot in spots if 0 <= spot < len(upstream_keys)]
                    edges |= {(named(upstream_name, up), named(stage.name, key)) for up in reads}
    return edges


@settings(max_examples=200)
@given(random_pipelines())
def test_random_pipelines_expand_to_the_declared_edges_in_the_smallest_topological_order(
    pipeline: Pipeline,
) -> None:
    graph = build_graph(pipeline)
    edges = set(graph.edges())
    assert edges == expected_edges(pipeline) and len(edges) == graph.edge_count
    place = {task: number for number, task in enumerate(graph.order)}
    assert sorted(place) == sorted(graph.names)
    assert all(place[up] < place[down] for up, down in edges)
    assert graph.order == smallest_topological_order(graph)


def smallest_topological_order(graph: TaskGraph) -> list[str]:
    """The order the tie rule asks for, by brute force: always the first-declared ready task."""
    upstream = {task: set(graph.upstream(task)) for task in graph.names}
    placed: list[str] = []
    while len(placed) < len(graph.names):
        done = set(placed)
        placed.append(next(task for task in graph.names if task not in done and upstream[task] <= done))
    return placed


def test_the_pipeline_package_exports_a_sorted_all() -> None:
    import vardiya.pipeline

    assert list(vardiya.pipeline.__all__) == sorted(vardiya.pipeline.__all__)
    assert all(hasattr(vardiya.pipeline, name) for name in vardiya.pipeline.__all__)


def test_what_is_derived_from_a_graph_is_built_once_per_key_and_kept() -> None:
    graph = build_graph(meter_pipeline())
    built: list[str] = []

    def count(name: str) -> Callable[[TaskGraph], list[int]]:
        def build(whole: TaskGraph) -> list[int]:
            built.append(name)
            return [len(whole)]
        return build

    first = graph.derived("a", count("a"))
    assert graph.derived("a", count("a again")) is first  # kept: the second build never runs
    assert graph.derived("b", count("b")) == first and graph.derived("b", count("b")) is not first
    assert built == ["a", "b"]
    assert build_graph(meter_pipeline()).derived("a", count("a, another graph")) == first
    assert built == ["a", "b", "a, another graph"]  # kept with its graph, not shared between graphs


def test_ids_name_every_task_by_its_position() -> None:
    graph = build_graph(meter_pipeline())
    assert dict(graph.ids) == {name: task for task, name in enumerate(graph.names)}
    assert all(graph.task_id(name) == task for name, task in graph.ids.items())
