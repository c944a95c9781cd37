"""The app the service tests run in real ``vardiya scheduler`` / ``vardiya worker`` processes.

Configured by environment variables, so every process of a test builds the same app:

- ``VT_SLOTS`` slots over ``VT_PERIOD_S`` seconds, ``VT_RECORDS`` records (ids 0..N-1, ``mod``), each
  taking ``VT_WORK_S`` seconds; ``VT_CATCH_UP`` periods of backlog, ``VT_BACKFILL`` records of it per
  tick; after downtime the scheduler fires ``VT_MAX_TICKS`` missed ticks, with ``VT_GRACE_S`` grace.
- ``VT_LANDING``: a directory; when set, two pipelines read it. ``sensed`` (static partitions p1, p2)
  starts a partition when ``sensed/{partition}.csv`` exists (a ``DataArrival`` sensor checked every
  0.2 s). ``scheduled`` (the day ``VT_DAY``) runs on ``0 * * * *``, which fires at once when the
  scheduler starts (the catch-up default fires the latest missed tick), before any data: an empty run.
  Outputs go to ``VT_LANDING/out``.
"""

from __future__ import annotations

import csv
import os
import time
from datetime import timedelta
from pathlib import Path

from vardiya import App
from vardiya.pipeline import Daily, Pipeline, Static, same
from vardiya.schedule import CatchUpPolicy, Cron, DataArrival
from vardiya.slots.scheme import SlotScheme
from vardiya.slots.sources import IterableSource


def _number(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


SLOTS = int(_number("VT_SLOTS", 12))
PERIOD_S = int(_number("VT_PERIOD_S", 12))
RECORDS = int(_number("VT_RECORDS", 240))
WORK_S = _number("VT_WORK_S", 0.0)

app = App("service-tests")


@app.slot_job(
    "rolling",
    scheme=SlotScheme(slots=SLOTS, period=timedelta(seconds=PERIOD_S)),
    source=IterableSource(range(RECORDS)),
    catch_up=int(_number("VT_CATCH_UP", 1)),
    backfill_limit=int(_number("VT_BACKFILL", 10_000)),
    deadline_fraction=1.0,
    # The windows are seconds long and these tests are about firing and recovery, not the window stop.
    deadline_grace=timedelta(seconds=PERIOD_S),
    # A killed worker's record claims must lapse within the period (as the worker's 2 s item lease
    # does), or the next ticks skip them as held and the records are left for `slots backfill`.
    claim_lease=timedelta(seconds=2),
    downtime=CatchUpPolicy(max_ticks=int(_number("VT_MAX_TICKS", 1)), grace=timedelta(seconds=_number("VT_GRACE_S", 300))),
)
def rolling(record: int) -> None:
    if WORK_S:
        time.sleep(WORK_S)


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


LANDING = os.environ.get("VT_LANDING")
if LANDING:
    landing = Path(LANDING)
    sensed = Pipeline("sensed")

    @sensed.stage(partitions=Static(keys=["p1", "p2"]))
    def ingest(context):  # type: ignore[no-untyped-def]
        return _rows(landing / "sensed" / f"{context.partition}.csv")

    @sensed.stage(partitions=Static(keys=["p1", "p2"]), depends_on={"ingest": same()})
    def clean(context):  # type: ignore[no-untyped-def]
        return [row for row in context.read("ingest") if row.get("value")]

    scheduled = Pipeline("scheduled")
    day = os.environ.get("VT_DAY", "2026-12-01")

    @scheduled.stage(name="ingest", partitions=Daily(start=day, end=day))
    def ingest_day(context):  # type: ignore[no-untyped-def]
        return _rows(landing / "scheduled" / f"{context.partition}.csv")

    app.add_pipeline(sensed, root=landing / "out", triggers=[DataArrival(path=str(landing / "sensed" / "{partition}.csv"), every=0.2)])
    app.add_pipeline(scheduled, root=landing / "out", triggers=[Cron(expr="0 * * * *", lag=0)])
