"""The meter-readings example: 200 subscribers, 12 monthly periods, four stages, 48 tasks and 47 edges.

Subscribers A001..A200 each have a region (one of 5), a type (one of 2) and a starting meter index;
every period each subscriber has one reading, and the index grows every month. All of it comes from
one seed (``random.Random(seed)``, never the global generator), so every run sees the same data.

    ingest       the period's readings, as a meter system delivers them: a few rows miss a required
                 field, and a few readings arrive twice
    clean        drops the rows missing a required field, then the duplicates by (subscriber, period)
    consumption  this period's index minus the previous period's, per subscriber; reads clean of the
                 same period and of the previous one (``depends_on={"clean": [same(), offset(-1)]}``).
                 The first period has no predecessor and yields no rows: by definition, not by error
    summary      consumption per region and type

Over the twelve periods consumption yields 11 x 200 = 2,200 rows. ``pipeline_missing_edge`` is the
same pipeline with consumption declaring only ``same()`` while its code still reads the previous
period: it sorts and runs, and only the IO layer's lineage check notices (strict mode fails it).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from ..pipeline import Monthly, Pipeline, TaskContext, offset, same

__all__ = [
    "PERIODS",
    "REGIONS",
    "REQUIRED_FIELDS",
    "SEED",
    "SUBSCRIBERS",
    "TYPES",
    "build_pipeline",
    "clean_rows",
    "consumption_rows",
    "pipeline",
    "pipeline_missing_edge",
    "readings",
    "subscribers",
    "summary_rows",
]

SEED = 2026
SUBSCRIBERS = 200
REGIONS = ("north", "south", "east", "west", "central")
TYPES = ("residential", "commercial")
PERIODS = Monthly(start="2026-01", end="2026-12")
REQUIRED_FIELDS = ("subscriber", "period", "index")
#: Monthly consumption in kWh, by subscriber type.
USAGE = {"residential": (150, 450), "commercial": (800, 2_500)}
#: Bad rows per period: readings missing a required field, and readings delivered twice.
MISSING_FIELD_ROWS = 3
DUPLICATE_ROWS = 4


@lru_cache(maxsize=8)
def _subscribers(seed: int) -> tuple[tuple[str, str, str, int], ...]:
    generator = random.Random(seed)
    return tuple(
        (f"A{number:03d}", generator.choice(REGIONS), generator.choice(TYPES), generator.randint(1_000, 90_000))
        for number in range(1, SUBSCRIBERS + 1)
    )


def subscribers(seed: int = SEED) -> list[dict[str, Any]]:
    """The 200 subscribers: ``{subscriber, region, type, start_index}``."""
    return [
        {"subscriber": subscriber, "region": region, "type": kind, "start_index": start}
        for subscriber, region, kind, start in _subscribers(seed)
    ]


@lru_cache(maxsize=8)
def _indexes(seed: int) -> tuple[tuple[int, ...], ...]:
    """Every subscriber's meter index at each period, growing every month."""
    generator = random.Random(f"{seed}:usage")
    indexes = []
    for _subscriber, _region, kind, start in _subscribers(seed):
        low, high = USAGE[kind]
        index, row = start, []
        for _period in PERIODS:
            index += generator.randint(low, high)
            row.append(index)
        indexes.append(tuple(row))
    return tuple(indexes)


def readings(period: str, seed: int = SEED) -> list[dict[str, Any]]:
    """The period's readings as delivered: one per subscriber, plus a few bad rows for clean to drop."""
    position = PERIODS.index(period)
    rows: list[dict[str, Any]] = [
        {"subscriber": subscriber, "period": period, "index": indexes[position], "region": region, "type": kind}
        for (subscriber, region, kind, _start), indexes in zip(_subscribers(seed), _indexes(seed), strict=True)
    ]
    generator = random.Random(f"{seed}:{period}:bad rows")
    good = list(rows)
    for missing in (generator.choice(REQUIRED_FIELDS) for _ in range(MISSING_FIELD_ROWS)):
        broken = dict(generator.choice(good))
        if generator.random() < 0.5:
            del broken[missing]
        else:
            broken[missing] = None
        rows.insert(generator.randrange(len(rows) + 1), broken)
    for _ in range(DUPLICATE_ROWS):
        rows.insert(generator.randrange(len(rows) + 1), dict(generator.choice(good)))
    return rows


def clean_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop rows missing a required field, then duplicates by (subscriber, period), keeping the first."""
    seen: set[tuple[Any, Any]] = set()
    kept: list[dict[str, Any]] = []
    for row in rows:
        if any(row.get(name) is None for name in REQUIRED_FIELDS):
            continue
        key = (row["subscriber"], row["period"])
        if key in seen:
            continue
        seen.add(key)
        kept.append(row)
    return sorted(kept, key=lambda row: row["subscriber"])


def consumption_rows(current: Sequence[dict[str, Any]], previous: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """This period's index minus the previous period's, per subscriber present in both."""
    before = {row["subscriber"]: row["index"] for row in previous}
    return [
        {
            "subscriber": row["subscriber"],
            "period": row["period"],
            "region": row["region"],
            "type": row["type"],
            "previous_index": before[row["subscriber"]],
            "index": row["index"],
            "consumption": row["index"] - before[row["subscriber"]],
        }
        for row in current
        if row["subscriber"] in before
    ]


def summary_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consumption per (region, type): subscribers and total kWh, in region then type order."""
    totals: dict[tuple[str, str], list[int]] = {}
    period = None
    for row in rows:
        period = row["period"]
        total = totals.setdefault((row["region"], row["type"]), [0, 0])
        total[0] += 1
        total[1] += row["consumption"]
    return [
        {"period": period, "region": region, "type": kind, "subscribers": count, "consumption": consumption}
        for (region, kind), (count, consumption) in sorted(totals.items())
    ]


def build_pipeline(*, seed: int = SEED, missing_edge: bool = False, name: str | None = None) -> Pipeline:
    """The meter pipeline over ``PERIODS``; ``missing_edge`` leaves out consumption's offset(-1) edge."""
    built = Pipeline(name or ("meters_missing_edge" if missing_edge else "meters"))

    @built.stage(partitions=PERIODS)
    def ingest(context: TaskContext) -> list[dict[str, Any]]:
        return readings(context.partition, seed)

    @built.stage(partitions=PERIODS, depends_on={"ingest": same()})
    def clean(context: TaskContext) -> list[dict[str, Any]]:
        return clean_rows(context.read("ingest"))

    @built.stage(partitions=PERIODS, depends_on={"clean": same() if missing_edge else [same(), offset(-1)]})
    def consumption(context: TaskContext) -> list[dict[str, Any]]:
        previous = context.partition_at(-1)
        if previous is None:
            return []  # the first period has no predecessor
        return consumption_rows(context.read("clean"), context.read("clean", previous))

    @built.stage(partitions=PERIODS, depends_on={"consumption": same()})
    def summary(context: TaskContext) -> list[dict[str, Any]]:
        return summary_rows(context.read("consumption"))

    return built


pipeline = build_pipeline()
pipeline_missing_edge = build_pipeline(missing_edge=True)
