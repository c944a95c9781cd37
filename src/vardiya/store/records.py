"""The values the store hands out and takes in: states as Enums, rows as frozen values (dataclasses)."""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterable
from dataclasses import FrozenInstanceError, dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any

from ..errors import InvalidInput
from ..limits import check_key
from ..rules.dedup import DedupOutcome
from .types import from_micros

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
    database does (benchmarks/README.md). So the fields live in two tuples, laid out as a claim reads
    them: a claimed item is its database row (``CLAIM_ROW_FIELDS``) and a tail the whole claim shares
    (``CLAIM_TAIL_FIELDS``), with no per-field work. A payload that comes from the database as JSON text
    is decoded when it is first read, once; a time that comes as SQLite's integer of microseconds
    (``run_after``, ``created_at``) is converted when read.

    Every field refuses assignment and deletion (``FrozenInstanceError``), and slots leave no room for
    other attributes. There is no ``__setattr__`` override, which would slow every store of the private
    slots below: a claim sets them once per item.
    """

    __slots__ = ("_id", "_payload", "_tail", "_values")
    _id: int
    _values: tuple[Any, ...]
    _tail: tuple[Any, ...]
    _payload: Any

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
        self._id = id
        self._values = (id, kind, key, payload, attempts, max_attempts, run_after, created_at, last_error)
        self._tail = (state, lease_owner, lease_until, result, updated_at, kind)
        self._payload = payload

    # The field read most: a slot of its own, read without a Python call.
    id = property(attrgetter("_id"), doc="The item's id.")

    # The indexes below are those of CLAIM_ROW_FIELDS (``_values``) and CLAIM_TAIL_FIELDS (``_tail``),
    # as literals: the fastest read.

    @property
    def kind(self) -> str:
        kind = self._values[1]
        return self._tail[5] if kind is None else kind

    @property
    def key(self) -> str:
        return self._values[2]

    @property
    def payload(self) -> Any:
        payload = self._payload
        if payload is _UNDECODED:
            payload = self._values[3]
            # A JSON column has NUMERIC affinity in SQLite: a bare number comes back as a number, not text.
            if payload.__class__ is str:
                payload = json.loads(payload)
            # Two threads decoding at once both get an equal value; the last one stays.
            self._payload = payload
        return payload

    @property
    def state(self) -> ItemState:
        return self._tail[0]

    @property
    def attempts(self) -> int:
        return self._values[4]

    @property
    def max_attempts(self) -> int:
        return self._values[5]

    @property
    def run_after(self) -> datetime:
        value = self._values[6]
        return _time_of_micros(value) if value.__class__ is int else value

    @property
    def lease_owner(self) -> str | None:
        return self._tail[1]

    @property
    def lease_until(self) -> datetime | None:
        return self._tail[2]

    @property
    def last_error(self) -> str | None:
        return self._values[8]

    @property
    def result(self) -> Any:
        return self._tail[3]

    @property
    def created_at(self) -> datetime:
        values = self._values
        value = values[7]
        if value is None:
            value = values[6]
        return _time_of_micros(value) if value.__class__ is int else value

    @property
    def updated_at(self) -> datetime:
        return self._tail[4]

    @property
    def attempts_left(self) -> int:
        """How many more attempts the item may have after the current one."""
        return max(0, self.max_attempts - self.attempts)

    def _fields(self) -> tuple[Any, ...]:
        """The field values in ``WORK_ITEM_FIELDS`` order, payload decoded and times converted."""
        payload = self.payload
        values, tail = self._values, self._tail
        return (
            values[0], self.kind, values[2], payload, tail[0], values[4], values[5], self.run_after,
            tail[1], tail[2], values[8], tail[3], self.created_at, tail[4],
        )

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not WorkItem:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(WORK_ITEM_FIELDS, self._fields(), strict=True))
        return f"WorkItem({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (work_item, (self._fields(),))


#: WorkItem's fields, in the order of ``work_item``'s ``values`` (and of its repr).
WORK_ITEM_FIELDS = (
    "id", "kind", "key", "payload", "state", "attempts", "max_attempts", "run_after", "lease_owner",
    "lease_until", "last_error", "result", "created_at", "updated_at",
)


def _frozen(name: str, readable: property) -> property:
    """``readable`` refusing assignment and deletion, as a frozen dataclass's field does."""

    def assign(_item: WorkItem, _value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def delete(_item: WorkItem) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    return property(readable.fget, assign, delete, readable.__doc__)


for _name in (*WORK_ITEM_FIELDS, "attempts_left"):
    setattr(WorkItem, _name, _frozen(_name, getattr(WorkItem, _name)))
del _name

#: The columns of a claim's row, in this order, with ``attempts`` as the claim leaves it (counted).
#: ``payload`` is JSON text or a number; ``run_after`` and ``created_at`` may be SQLite's integers of
#: microseconds. Two columns are None when they hold what costs nothing to know (a NULL is the driver's
#: cheapest value to hand over; both columns are NOT NULL): ``kind`` when it is the tail's, and
#: ``created_at`` when it equals ``run_after``.
CLAIM_ROW_FIELDS = ("id", "kind", "key", "payload", "attempts", "max_attempts", "run_after", "created_at", "last_error")
#: What a claim sets, the same for all its items, and the kind a None ``kind`` of a row stands for.
CLAIM_TAIL_FIELDS = ("state", "lease_owner", "lease_until", "result", "updated_at", "kind")

_new = object.__new__
#: ``_payload`` of an item whose payload is still the JSON text (or SQLite's number) in its row.
_UNDECODED: Any = object()

_TIMES: dict[int, datetime] = {}
_TIMES_KEPT = 4096


def _time_of_micros(value: int) -> datetime:
    """SQLite's integer time as a datetime; items claimed together share their times, so few are made."""
    found = _TIMES.get(value)
    if found is None:
        if len(_TIMES) >= _TIMES_KEPT:
            _TIMES.clear()
        found = _TIMES[value] = from_micros(value)
    return found


def work_item(values: tuple[Any, ...], payload_json: str | None = None) -> WorkItem:
    """A WorkItem from its field values in ``WORK_ITEM_FIELDS`` order, for the store's own row readers.

    With ``payload_json`` (the payload as JSON text) the ``payload`` value is a placeholder, and the text
    is decoded when the payload is first read.
    """
    (item_id, kind, key, payload, state, attempts, max_attempts, run_after, lease_owner, lease_until,
     last_error, result, created_at, updated_at) = values
    item = _new(WorkItem)
    item._id = item_id
    item._values = (
        item_id, kind, key, payload if payload_json is None else payload_json, attempts, max_attempts,
        run_after, created_at, last_error,
    )
    item._tail = (state, lease_owner, lease_until, result, updated_at, kind)
    item._payload = payload if payload_json is None else _UNDECODED
    return item


def claim_tail(owner: str, until: datetime, now: datetime, kind: str | None = None) -> tuple[Any, ...]:
    """The ``CLAIM_TAIL_FIELDS`` of a claim by ``owner`` at ``now``, leased until ``until``.

    ``kind``: what a row's None ``kind`` stands for.
    """
    return (ItemState.RUNNING, owner, until, None, now, kind)


def claimed_items(rows: Iterable[tuple[Any, ...]], tail: tuple[Any, ...]) -> list[WorkItem]:
    """WorkItems from a claim's rows (``CLAIM_ROW_FIELDS``, in claim order, the payload as the JSON
    text, or the number, the database returned) and its ``claim_tail``."""
    # This loop runs once per claimed item: each item is its row and the shared tail, nothing more (its
    # payload is decoded, and SQLite's integer times converted, when they are first read).
    items: list[WorkItem] = []
    append = items.append
    new = _new
    undecoded = _UNDECODED
    for row in rows:
        item = new(WorkItem)
        item._id = row[0]
        item._values = row
        item._tail = tail
        item._payload = undecoded
        append(item)
    return items


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
    """One outcome to mark in the ledger for a record of a job's period.

    Checked when it is made, as the other values are: a record id that is an int or a key
    (``limits.check_key``), a ``LedgerStatus`` (or its value, ``"done"``), counts that are whole numbers
    of 0 or more, aware times, a finite duration. A bad one is an ``InvalidInput`` naming the field.
    """

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

    def __post_init__(self) -> None:
        record = self.record
        if isinstance(record, bool) or not isinstance(record, int | str):
            raise InvalidInput(f"a ledger entry's record must be an int or a str id, got {record!r}")
        if isinstance(record, str):
            check_key(record, "a ledger entry's record id")
        if self.status.__class__ is not LedgerStatus:
            try:
                object.__setattr__(self, "status", LedgerStatus(self.status))
            except ValueError:
                known = ", ".join(status.value for status in LedgerStatus)
                raise InvalidInput(
                    f"a ledger entry's status must be one of: {known} (or LedgerStatus), got {self.status!r}"
                ) from None
        for name in ("attempts", "rows", "bytes", "slot"):
            value = getattr(self, name)
            if value is None and name == "slot":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInput(f"a ledger entry's {name} must be a whole number of 0 or more, got {value!r}")
        duration = self.duration_ms
        if isinstance(duration, bool) or not isinstance(duration, int | float) or not math.isfinite(duration) or duration < 0:
            raise InvalidInput(f"a ledger entry's duration_ms must be a finite number of 0 or more, got {duration!r}")
        for name in ("started_at", "finished_at"):
            moment = getattr(self, name)
            if moment is not None and (
                not isinstance(moment, datetime) or moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None
            ):
                raise InvalidInput(f"a ledger entry's {name} must be an aware datetime or None, got {moment!r}")
        if self.error is not None and not isinstance(self.error, str):
            raise InvalidInput(f"a ledger entry's error must be text or None, got {self.error!r}")


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
