"""The scheduler's durable progress: one row per schedule, advanced together with the items it fires.

``Schedules.advance`` is the one write the scheduler makes. In one transaction it locks the rows of the
schedules it is advancing (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already
serialises writers), lets the caller decide from what is stored (never from a cached copy), enqueues the
decided work items idempotently per (kind, key) and moves each cursor forward. Two schedulers deciding
at once therefore decide one after the other, and the second sees the first one's cursor: a tick is
enqueued once, and the catch-up policy is applied once, by whichever scheduler came first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

from .schema import schedules
from .streams import notify
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["Firing", "ScheduleState", "ScheduleStep", "Schedules"]


class Firing(Protocol):
    """What the store enqueues for a schedule's planned time (``schedule.plan.Firing`` is one): the
    store takes it by shape, so it never imports the scheduling layer above it."""

    @property
    def schedule(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def payload(self) -> dict[str, Any]: ...
    @property
    def run_after(self) -> datetime: ...
    @property
    def max_attempts(self) -> int: ...

_CHUNK = 500


@dataclass(frozen=True, kw_only=True)
class ScheduleState:
    """A schedule's row: planned through when, how many items it fired and ticks it passed by."""

    name: str
    planned_through: datetime | None = None
    fired: int = 0
    skipped: int = 0
    skipped_from: datetime | None = None
    skipped_to: datetime | None = None
    checked_at: datetime | None = None
    updated_by: str | None = None
    updated_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        def text(moment: datetime | None) -> str | None:
            return None if moment is None else moment.isoformat()

        return {
            "name": self.name, "planned_through": text(self.planned_through), "fired": self.fired,
            "skipped": self.skipped, "skipped_from": text(self.skipped_from), "skipped_to": text(self.skipped_to),
            "checked_at": text(self.checked_at), "updated_by": self.updated_by, "updated_at": text(self.updated_at),
        }


@dataclass(kw_only=True)
class ScheduleStep:
    """A decision for one schedule: plan through ``through``, enqueue ``firings``, pass by ``skipped``."""

    through: datetime | None = None
    firings: Sequence[Firing] = ()
    skipped: Sequence[datetime] = ()
    checked: bool = False
    #: Filled in by ``advance``: the firings that made a new item (the rest existed already).
    new: list[Firing] = field(default_factory=list)


def _state(row: Any) -> ScheduleState:
    return ScheduleState(**{name: row._mapping[name] for name in ScheduleState.__dataclass_fields__})


class Schedules:
    """The ``schedules`` table of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def all(self, *, prefix: str | None = None) -> list[ScheduleState]:
        query = sa.select(schedules).order_by(schedules.c.name)
        if prefix is not None:
            query = query.where(schedules.c.name.startswith(prefix, autoescape=True))
        with self._store.reading() as connection:
            return [_state(row) for row in connection.execute(query)]

    def get(self, name: str) -> ScheduleState | None:
        with self._store.reading() as connection:
            row = connection.execute(sa.select(schedules).where(schedules.c.name == name)).first()
        return None if row is None else _state(row)

    def advance(
        self,
        names: Sequence[str],
        decide: Callable[[str, ScheduleState | None], ScheduleStep | None],
        *,
        owner: str,
    ) -> dict[str, ScheduleStep]:
        """Lock ``names``, ``decide`` each from its stored state, write what was decided; returns the steps.

        A step with nothing to fire, skip or record writes nothing for its schedule.
        """
        store = self._store
        now = store.clock.now()
        steps: dict[str, ScheduleStep] = {}
        ordered = sorted(set(names))  # one lock order for every scheduler: no deadlock between them
        with store.transaction() as connection:
            stored: dict[str, ScheduleState] = {}
            for start in range(0, len(ordered), _CHUNK):
                chunk = ordered[start : start + _CHUNK]
                query = sa.select(schedules).where(schedules.c.name.in_(chunk)).order_by(schedules.c.name)
                if store.backend is Backend.POSTGRESQL:
                    # Rows that do not exist yet cannot be locked: create them first (a concurrent
                    # creator waits on the insert), then lock them all.
                    connection.execute(
                        store.dialect_insert(schedules).on_conflict_do_nothing(index_elements=["name"]),
                        [{"name": name, "fired": 0, "skipped": 0, "updated_at": now} for name in chunk],
                    )
                    query = query.with_for_update()
                for row in connection.execute(query):
                    state = _state(row)
                    if state.updated_by is not None or state.planned_through is not None or state.fired:
                        stored[state.name] = state
            rows: list[dict[str, Any]] = []
            items: list[tuple[str, str, Any, int, datetime]] = []
            by_item: dict[tuple[str, str], tuple[str, Firing]] = {}
            for name in ordered:
                step = decide(name, stored.get(name))
                if step is None or not (step.firings or step.skipped or step.checked or step.through):
                    continue
                steps[name] = step
                old = stored.get(name) or ScheduleState(name=name)
                through = old.planned_through
                if step.through is not None and (through is None or step.through > through):
                    through = step.through
                skipped = list(step.skipped)
                rows.append({
                    "name": name,
                    "planned_through": through,
                    "fired": old.fired,  # new items are added below, once counted
                    "skipped": old.skipped + len(skipped),
                    "skipped_from": min(skipped) if skipped else old.skipped_from,
                    "skipped_to": max(skipped) if skipped else old.skipped_to,
                    "checked_at": now if step.checked else old.checked_at,
                    "updated_by": owner,
                    "updated_at": now,
                })
                for firing in step.firings:
                    if (firing.kind, firing.key) in by_item:
                        continue
                    by_item[(firing.kind, firing.key)] = (name, firing)
                    items.append((firing.kind, firing.key, firing.payload, firing.max_attempts, firing.run_after))
            if items:
                made = store.items.enqueue_in(connection, items, now)
                fired: dict[str, int] = {}
                for kind, key, _item_id in made:
                    name, firing = by_item[(kind, key)]
                    steps[name].new.append(firing)
                    fired[name] = fired.get(name, 0) + 1
                for entry in rows:
                    entry["fired"] += fired.get(entry["name"], 0)
                if made:
                    notify(connection, store.backend, "schedule")
            if rows:
                insert = store.dialect_insert(schedules)
                upsert = insert.on_conflict_do_update(
                    index_elements=["name"],
                    set_={column: insert.excluded[column] for column in rows[0] if column != "name"},
                )
                connection.execute(upsert, rows)
        return steps
