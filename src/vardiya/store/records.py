"""The values the store hands out and takes in: states as Enums, rows as frozen values (dataclasses)."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass
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


class WorkItem:
    """A leased, retried, dead-lettered unit of work: a tick, an async call, a stream batch, a task.

    A frozen value with keyword-only fields, like the dataclasses beside it, but written out by hand:
    a claim builds one per item on the store's hottest path, and there a dataclass's field-by-field
    ``__init__`` (3 µs) and an eager ``json.loads`` of the payload (1.5 µs) cost more per item than the
    database does (benchmarks/README.md). So the fields live in one tuple, and a payload that comes
    from the database as JSON text is decoded when it is first read, once.
    """

    __slots__ = ("_values", "_payload_json")
    _values: tuple[Any, ...]
    _payload_json: str | None

    def __init__(
        self,
        *,
        id: int,
        kind: str,
        key: str,
        payload: Any,
        state: ItemState,
        attempts: int,
        max_attempts: int,
        run_after: datetime,
        lease_owner: str | None,
        lease_until: datetime | None,
        last_error: str | None,
        result: Any,
        created_at: datetime,
        updated_at: datetime,
    ) -> None:
        _set_values(self, (
            id, kind, key, payload, state, attempts, max_attempts, run_after, lease_owner, lease_until,
            last_error, result, created_at, updated_at,
        ))
        _set_payload_json(self, None)

    @property
    def id(self) -> int:
        return self._values[0]  # type: ignore[no-any-return]

    @property
    def kind(self) -> str:
        return self._values[1]  # type: ignore[no-any-return]

    @property
    def key(self) -> str:
        return self._values[2]  # type: ignore[no-any-return]

    @property
    def payload(self) -> Any:
        text = self._payload_json
        if text is None:
            return self._values[3]
        # Two threads decoding at once both get an equal value; the last one stays.
        values = self._values
        payload = json.loads(text)
        _set_values(self, (*values[:3], payload, *values[4:]))
        _set_payload_json(self, None)
        return payload

    @property
    def state(self) -> ItemState:
        return self._values[4]  # type: ignore[no-any-return]

    @property
    def attempts(self) -> int:
        return self._values[5]  # type: ignore[no-any-return]

    @property
    def max_attempts(self) -> int:
        return self._values[6]  # type: ignore[no-any-return]

    @property
    def run_after(self) -> datetime:
        return self._values[7]  # type: ignore[no-any-return]

    @property
    def lease_owner(self) -> str | None:
        return self._values[8]  # type: ignore[no-any-return]

    @property
    def lease_until(self) -> datetime | None:
        return self._values[9]  # type: ignore[no-any-return]

    @property
    def last_error(self) -> str | None:
        return self._values[10]  # type: ignore[no-any-return]

    @property
    def result(self) -> Any:
        return self._values[11]

    @property
    def created_at(self) -> datetime:
        return self._values[12]  # type: ignore[no-any-return]

    @property
    def updated_at(self) -> datetime:
        return self._values[13]  # type: ignore[no-any-return]

    @property
    def attempts_left(self) -> int:
        """How many more attempts the item may have after the current one."""
        return max(0, self.max_attempts - self.attempts)

    def _fields(self) -> tuple[Any, ...]:
        if self._payload_json is not None:
            self.payload  # noqa: B018 - decodes the payload
        return self._values

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not WorkItem:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(WORK_ITEM_FIELDS, self._fields()))
        return f"WorkItem({fields})"

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (work_item, (self._values, self._payload_json))


#: WorkItem's fields, in the order of ``work_item``'s ``values``.
WORK_ITEM_FIELDS = (
    "id", "kind", "key", "payload", "state", "attempts", "max_attempts", "run_after", "lease_owner",
    "lease_until", "last_error", "result", "created_at", "updated_at",
)

_new = object.__new__
_set_values = WorkItem._values.__set__  # type: ignore[attr-defined]
_set_payload_json = WorkItem._payload_json.__set__  # type: ignore[attr-defined]


def work_item(values: tuple[Any, ...], payload_json: str | None = None) -> WorkItem:
    """A WorkItem from its field values in ``WORK_ITEM_FIELDS`` order, for the store's own row readers.

    With ``payload_json`` (the payload as JSON text) the ``payload`` value is a placeholder, and the text
    is decoded when the payload is first read.
    """
    item = _new(WorkItem)
    _set_values(item, values)
    _set_payload_json(item, payload_json)
    return item


def new_work_item_parts() -> tuple[Callable[..., Any], Callable[..., None], Callable[..., None]]:
    """What ``work_item`` does, as three calls, for a loop that builds one item per claimed row.

    ``object.__new__``, then the setters of the values tuple and of the payload's JSON text.
    """
    return _new, _set_values, _set_payload_json


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
