"""What is paused, and manual runs queued unless paused (``store.controls``).

A pause is a row of ``paused`` keyed by (kind, name): ``vardiya pause`` writes it, ``vardiya resume``
deletes it. The store does not interpret it: every scheduler reads ``paused()`` before it decides a
schedule, and every worker leaves out the work-item kinds of what is paused when it claims. Keeping it
in the store (not in a process's memory) is what makes one command hold the whole fleet, across
restarts, as Airflow's ``is_paused`` does.

``queue_unless_paused`` is the manual trigger's write: in one transaction it checks that none of the
names that would hold the run is paused and enqueues its work item idempotently by (kind, key), so a
pause and a trigger racing each other cannot leave a run of a paused name queued, and a second trigger
of the same run finds the first one's item.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import InvalidInput
from ..limits import check_key
from .item_reads import by_key, item_from_row
from .records import WorkItem
from .schema import paused

if TYPE_CHECKING:
    from .api import Store

__all__ = ["ControlKind", "Controls", "Pause", "PauseChange", "Queued"]

#: The longest reason a pause keeps (the column's size).
REASON_MAX = 500


class ControlKind(enum.Enum):
    """What can be paused: each kind of thing an app registers."""

    SLOT_JOB = "slot_job"
    HANDLER = "handler"
    PERIODIC = "periodic"
    PIPELINE = "pipeline"
    TRIGGER = "trigger"


@dataclass(frozen=True, kw_only=True)
class Pause:
    """One paused thing: what, since when, and why (as the person who paused it said)."""

    kind: ControlKind
    name: str
    paused_at: datetime
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "name": self.name, "paused_at": self.paused_at.isoformat(), "reason": self.reason}


@dataclass(frozen=True, kw_only=True)
class PauseChange:
    """What ``pause`` or ``resume`` did: ``changed`` false when it was already so (a no-op)."""

    changed: bool
    pause: Pause | None


@dataclass(frozen=True, kw_only=True)
class Queued:
    """What ``queue_unless_paused`` did: ``item`` is the run's work item, new or already there;
    ``held_by`` the pause that refused it (then nothing was written and ``item`` is None)."""

    new: bool
    item: WorkItem | None = None
    held_by: Pause | None = None


def _pause(row: Any) -> Pause:
    mapping = row._mapping
    return Pause(
        kind=ControlKind(mapping["kind"]), name=mapping["name"], paused_at=mapping["paused_at"], reason=mapping["reason"]
    )


def _check_name(name: str) -> str:
    return check_key(name, "a name to pause or resume", 500)


class Controls:
    """The ``paused`` table of one store, and the manual trigger's enqueue."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def paused(self, kind: ControlKind | None = None) -> list[Pause]:
        """Everything paused (of ``kind``), by kind then name. One small read: services call it every loop."""
        query = sa.select(paused).order_by(paused.c.kind, paused.c.name)
        if kind is not None:
            query = query.where(paused.c.kind == kind.value)
        with self._store.reading() as connection:
            return [_pause(row) for row in connection.execute(query)]

    def get(self, kind: ControlKind, name: str) -> Pause | None:
        with self._store.reading() as connection:
            row = connection.execute(
                sa.select(paused).where(paused.c.kind == kind.value, paused.c.name == name)
            ).first()
        return None if row is None else _pause(row)

    def pause(self, kind: ControlKind, name: str, *, reason: str | None = None) -> PauseChange:
        """Pause (kind, name); pausing what is paused already changes nothing (its first reason is kept)."""
        _check_name(name)
        if reason is not None:
            if len(reason) > REASON_MAX:
                raise InvalidInput(f"a pause reason is at most {REASON_MAX} characters, got {len(reason)}")
            if "\x00" in reason:
                raise InvalidInput("a pause reason holds a NUL character (U+0000); remove it")
        now = self._store.clock.now()
        with self._store.transaction() as connection:
            inserted = connection.execute(
                self._store.dialect_insert(paused)
                .values(kind=kind.value, name=name, paused_at=now, reason=reason or None)
                .on_conflict_do_nothing(index_elements=["kind", "name"])
                .returning(paused.c.name)
            ).first() is not None
            row = connection.execute(sa.select(paused).where(paused.c.kind == kind.value, paused.c.name == name)).one()
        return PauseChange(changed=inserted, pause=_pause(row))

    def resume(self, kind: ControlKind, name: str) -> PauseChange:
        """Resume (kind, name); resuming what is not paused changes nothing. Returns the pause it ended."""
        _check_name(name)
        with self._store.transaction() as connection:
            row = connection.execute(
                sa.delete(paused).where(paused.c.kind == kind.value, paused.c.name == name).returning(*paused.c)
            ).first()
        return PauseChange(changed=row is not None, pause=None if row is None else _pause(row))

    def queue_unless_paused(
        self,
        holders: Sequence[tuple[ControlKind, str]],
        *,
        kind: str,
        key: str,
        payload: Any,
        max_attempts: int,
        run_after: datetime,
    ) -> Queued:
        """Enqueue the work item (kind, key) unless one of ``holders`` is paused, in one transaction.

        An item with the same (kind, key) already there is returned with ``new`` false: a manual run
        queued twice is one run.
        """
        store = self._store
        now = store.clock.now()
        with store.transaction() as connection:
            for holder_kind, name in holders:
                row = connection.execute(
                    sa.select(paused).where(paused.c.kind == holder_kind.value, paused.c.name == name)
                ).first()
                if row is not None:
                    return Queued(new=False, held_by=_pause(row))
            made = store.items.enqueue_in(connection, [(kind, key, payload, max_attempts, run_after)], now)
            item = item_from_row(connection.execute(by_key(store.backend, kind, key)).one())
        return Queued(new=bool(made), item=item)
