"""Sensors: the triggers that look for something (a partition's data, an upstream's success).

A sensor is checked every ``every`` seconds by the scheduler. It considers the partitions it has not
started yet (for day and month partitions, only those whose period has begun) and fires each one whose
condition holds, once: the work item's key is the trigger and the partition, so a partition is started
once however many schedulers sense it. A check that errs (a database that is down, a path it may not
read) counts as "not yet" and is logged; the next check tries again.
"""

from __future__ import annotations

import glob
import logging
import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from ..connectors.arrival import ArrivalQuery
from ..pipeline.graph import task_name
from ..schedule.plan import Firing, pipeline_kind
from ..schedule.triggers import DataArrival, Upstream, partition_window
from ..store.pipeline_reads import PipelineReads

if TYPE_CHECKING:
    from ..schedule.pipelines import ScheduledPipeline
    from ..store.api import Store

__all__ = ["Sensor"]

log = logging.getLogger("vardiya.scheduler")
_UTC = ZoneInfo("UTC")


class Sensor:
    """One ``DataArrival`` or ``Upstream`` trigger of one pipeline, as the scheduler checks it."""

    def __init__(self, store: Store, entry: ScheduledPipeline, trigger: DataArrival | Upstream) -> None:
        assert trigger.name is not None
        self.store = store
        self.entry = entry
        self.trigger = trigger
        self.name = f"pipeline:{entry.name}:{trigger.name}"
        self.kind = pipeline_kind(entry.name)
        self.partitions = entry.partitions_of(trigger)
        self.every = timedelta(seconds=float(trigger.every))
        self.next_check: datetime | None = None
        self._started: set[str] | None = None
        self._arrival: ArrivalQuery | None = None

    def due(self, now: datetime) -> bool:
        return self.next_check is None or now >= self.next_check

    def check(self, now: datetime) -> list[Firing]:
        """The firings for partitions whose condition holds now (and that were not started before)."""
        self.next_check = now + self.every
        started = self._started_partitions()
        candidates = [key for key in self.partitions if key not in started and self._begun(key, now)]
        if not candidates:
            return []
        present = self._present(candidates)
        firings = []
        for key in candidates:
            if key in present:
                payload = {
                    "pipeline": self.entry.name, "trigger": self.trigger.name, "partition": key,
                    "planned_at": now.astimezone(UTC).isoformat(),
                }
                firings.append(Firing(self.name, self.kind, f"{self.trigger.name}:{key}", payload, now, self.entry.max_attempts))
        return firings

    def fired(self, firings: list[Firing]) -> None:
        """Remember what was enqueued (by this scheduler or, as the store said, another)."""
        if self._started is not None:
            self._started.update(str(firing.payload["partition"]) for firing in firings)

    def close(self) -> None:
        if self._arrival is not None:
            self._arrival.close()

    # -- internals ----------------------------------------------------------------------------------

    def _started_partitions(self) -> set[str]:
        if self._started is None:
            prefix = f"{self.trigger.name}:"
            keys = self.store.items.keys_with_prefix(self.kind, prefix)
            self._started = {key[len(prefix):] for key in keys}
        return self._started

    def _begun(self, key: str, now: datetime) -> bool:
        window = partition_window(self.partitions, key, _UTC)
        return window is None or window[0] <= now

    def _present(self, keys: list[str]) -> set[str]:
        trigger = self.trigger
        try:
            if isinstance(trigger, Upstream):
                return self._upstream_done(keys, trigger)
            if trigger.path is not None:
                return {key for key in keys if _path_present(trigger.path.format(partition=key))}
            return self._rows_present(keys, trigger)
        except Exception as error:  # noqa: BLE001 - a failing check is "not yet", logged, retried
            log.warning(
                "sensor %s of pipeline %s could not check: %s", trigger.name, self.entry.name, error,
                extra={"pipeline": self.entry.name, "trigger": trigger.name},
            )
            return set()

    def _upstream_done(self, keys: list[str], trigger: Upstream) -> set[str]:
        names = {task_name(trigger.stage, key): key for key in keys}
        done = PipelineReads(self.store, trigger.pipeline).succeeded_among(names)
        return {names[task] for task in done}

    def _rows_present(self, keys: list[str], trigger: DataArrival) -> set[str]:
        if self._arrival is None:
            self._arrival = ArrivalQuery(str(trigger.db), str(trigger.sql))
        return self._arrival.present(keys)


def _path_present(pattern: str) -> bool:
    if glob.has_magic(pattern):
        return any(True for _ in glob.iglob(pattern, recursive=True))
    return os.path.exists(pattern)
