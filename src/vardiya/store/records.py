"""The values the store hands out and takes in: states as Enums, rows as frozen dataclasses."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "DedupKey",
    "DedupOutcome",
    "ItemState",
    "LedgerEntry",
    "LedgerRow",
    "LedgerStatus",
    "WorkItem",
    "record_key",
]


class ItemState(str, enum.Enum):
    """Where a work item is in its life.

    ``failed`` means an attempt failed and a retry is scheduled at ``run_after``; ``dead`` means no
    attempt is left (or the failure was final): the item waits for a redrive or a purge.
    """

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"


#: States from which an item can be claimed once its ``run_after`` has come.
READY_STATES = (ItemState.PENDING, ItemState.FAILED)


class AttemptOutcome(str, enum.Enum):
    """How one attempt at a work item ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LEASE_EXPIRED = "lease_expired"


class LedgerStatus(str, enum.Enum):
    """The ledger's word on one (job, record, period)."""

    DONE = "done"
    FAILED = "failed"


class DedupOutcome(str, enum.Enum):
    """What became of the first invocation that carried a dedup key."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


def record_key(record: object) -> str:
    """The ledger's text form of a record id: decimal for integers, the string itself for strings."""
    if isinstance(record, bool):
        raise TypeError(f"record id {record!r} is a bool; use an int or a str")
    if isinstance(record, int):
        return str(record)
    if isinstance(record, str):
        return record
    raise TypeError(f"record id {record!r} is a {type(record).__name__}; use an int or a str")


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkItem:
    """A leased, retried, dead-lettered unit of work: a tick, an async call, a stream batch, a task."""

    id: int
    kind: str
    key: str
    payload: Any
    state: ItemState
    attempts: int
    max_attempts: int
    run_after: datetime
    lease_owner: str | None
    lease_until: datetime | None
    last_error: str | None
    result: Any
    created_at: datetime
    updated_at: datetime

    @property
    def attempts_left(self) -> int:
        """How many more attempts the item may have after the current one."""
        return max(0, self.max_attempts - self.attempts)


@dataclass(frozen=True, kw_only=True, slots=True)
class Attempt:
    """One attempt at a work item, as kept in its history."""

    item_id: int
    attempt: int
    owner: str | None
    started_at: datetime | None
    ended_at: datetime
    outcome: AttemptOutcome
    error: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class LedgerEntry:
    """One outcome to mark in the ledger for a record of a job's period."""

    record: int | str
    status: LedgerStatus
    attempts: int = 1
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: float = 0.0
    rows: int = 0
    bytes: int = 0
    error: str | None = None
    slot: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class LedgerRow:
    """The ledger's row for (job, record, period)."""

    job: str
    period: str
    record: str
    slot: int | None
    status: LedgerStatus
    attempts: int
    first_attempt_at: datetime | None
    last_attempt_at: datetime | None
    duration_ms: float
    rows: int
    bytes: int
    error: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class DedupKey:
    """A dedup key as stored: while it is live, a second invocation with it is a duplicate."""

    scope: str
    key: str
    first_seen: datetime
    expires_at: datetime
    outcome: DedupOutcome
    result: Any
    item_id: int | None
