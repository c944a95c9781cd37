"""A workload for the planner: records and how each one behaves, from a CSV or from past runs.

The CSV is ``record,outcome`` or ``record,outcome,duration_ms``, one record a line after the header:

- ``ok``: passes;
- ``transient``: fails its first processing and passes the second;
- ``poison``: never passes;
- ``duration_ms`` (optional, may be left empty on a line): the record's own processing time, instead
  of the profile's per-record time.

A record id is a whole number when it reads as one, else the text itself. ``from_store`` builds the
same from the history of a handler's past async calls and stream batches.
"""

from __future__ import annotations

import csv
import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..limits import check_key
from ..store.records import ItemState

if TYPE_CHECKING:
    from ..invoke.handlers import Handler
    from ..store.api import Store

__all__ = ["Outcome", "Workload", "WorkloadRecord", "from_store", "load_workload", "parse_workload"]

_HEADERS = (("record", "outcome"), ("record", "outcome", "duration_ms"))


class Outcome(str, enum.Enum):
    """How a record behaves when it is processed."""

    OK = "ok"
    """Passes."""
    TRANSIENT = "transient"
    """Fails its first processing and passes the second."""
    POISON = "poison"
    """Never passes."""


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """One record of a workload: its id, its outcome, and its own duration if it has one."""

    record: int | str
    outcome: Outcome
    duration_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class Workload:
    """The records to replay, in arrival order."""

    records: tuple[WorkloadRecord, ...]
    source: str = "workload"

    def __post_init__(self) -> None:
        if not self.records:
            raise InvalidInput(f"{self.source}: a workload needs at least one record")

    def __len__(self) -> int:
        return len(self.records)

    def counts(self) -> dict[str, int]:
        """How many records of each outcome, ``{"ok": …, "transient": …, "poison": …}``."""
        counts = {outcome.value: 0 for outcome in Outcome}
        for entry in self.records:
            counts[entry.outcome.value] += 1
        return counts

    def head(self, limit: int) -> Workload:
        """The first ``limit`` records (a quick look at a long night)."""
        return Workload(records=self.records[:limit], source=f"{self.source} (first {limit})")

    @classmethod
    def of(cls, outcomes: Mapping[Any, str | Outcome], *, source: str = "workload") -> Workload:
        """A workload from ``{record: outcome}``, in the mapping's order (for tests and scripts)."""
        return cls(
            records=tuple(WorkloadRecord(record, _outcome(value, source)) for record, value in outcomes.items()),
            source=source,
        )


def _outcome(value: object, where: str) -> Outcome:
    try:
        return Outcome(value)
    except ValueError:
        known = ", ".join(outcome.value for outcome in Outcome)
        raise InvalidInput(f"{where}: unknown outcome {value!r}; use one of: {known}") from None


def _record_id(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def load_workload(path: str | Path) -> Workload:
    """Read a workload CSV; every error names the file and the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidInput(f"cannot read the workload {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        line = error.object[: error.start].count(b"\n") + 1
        raise InvalidInput(
            f"{path}, line {line}: byte {error.object[error.start]:#04x} is not UTF-8 text; "
            "save the workload as a UTF-8 CSV of record,outcome[,duration_ms]"
        ) from None
    return parse_workload(text.splitlines(), source=str(path))


def parse_workload(lines: Iterable[str], *, source: str = "workload") -> Workload:
    """Parse the lines of a workload CSV (header first); a record id is a key (``limits.check_key``)."""
    try:
        return _parse(csv.reader(lines), source)
    except csv.Error as error:
        # the reader's own errors (a field over its limit, a NUL byte): name the line it was on
        raise InvalidInput(f"{source}, line {rows_read(error)}: not a workload CSV line ({error})") from None


def rows_read(error: csv.Error) -> int:
    """The line a csv.Error was raised on (the reader's count, attached by ``_parse``)."""
    return getattr(error, "vardiya_line", 0)


def _parse(rows: Any, source: str) -> Workload:
    try:
        header = tuple(name.strip() for name in next(rows, []))
    except csv.Error as error:
        error.vardiya_line = 1  # type: ignore[attr-defined]
        raise
    if header not in _HEADERS:
        raise InvalidInput(
            f"{source}, line 1: expected the header 'record,outcome' or 'record,outcome,duration_ms', "
            f"got {','.join(header)!r}"
        )
    columns = len(header)
    known = ", ".join(outcome.value for outcome in Outcome)
    seen: set[int | str] = set()
    records: list[WorkloadRecord] = []
    for line, row in _numbered(rows):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) not in (2, columns):
            raise InvalidInput(f"{source}, line {line}: expected {','.join(header)}, got {','.join(row)!r}")
        record_text = row[0].strip()
        if not record_text:
            raise InvalidInput(f"{source}, line {line}: the record id is empty")
        check_key(record_text, f"{source}, line {line}: a record id")
        record = _record_id(record_text)
        outcome_text = row[1].strip()
        try:
            outcome = Outcome(outcome_text)
        except ValueError:
            raise InvalidInput(
                f"{source}, line {line}: unknown outcome {outcome_text!r} for record {record}; use one of: {known}"
            ) from None
        duration = _duration(row[2].strip(), source, line) if len(row) == 3 and row[2].strip() else None
        if record in seen:
            raise InvalidInput(f"{source}, line {line}: record {record} appears twice")
        seen.add(record)
        records.append(WorkloadRecord(record, outcome, duration))
    return Workload(records=tuple(records), source=source)


def _numbered(rows: Any) -> Any:
    """(line, row) from line 2 on; a csv.Error leaves with the line it was raised on."""
    line = 1
    while True:
        line += 1
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as error:
            error.vardiya_line = line  # type: ignore[attr-defined]
            raise
        yield line, row


def _duration(text: str, source: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(f"{source}, line {line}: duration_ms {text!r} is not a number of 0 or more milliseconds")
    return value


def from_store(store: Store, handler: Handler) -> Workload:
    """A workload from the finished async calls and stream batches of ``handler`` in the store.

    An async call that succeeded on its first attempt is ``ok``, on a later one ``transient``; a dead
    one is ``poison``. A stream batch that succeeded on its first attempt makes its records ``ok``; one
    that succeeded later makes the records it still held at its last attempt ``transient`` (under
    ``retry_batch`` that is every record of the batch, so healthy records retried with it count as
    transient too); a dead batch makes the records its last attempt failed ``poison`` and the others
    ``ok`` (a transient one had passed by then). Records a batch finished before its last attempt are left out: the store keeps only their
    timing, not which records they were. Unfinished items are left out too. A record is named by the
    handler's ``id_of`` (a payload's ``id`` field by default); records appear in the order they arrived.
    """
    rows = store.items.finished([handler.call_kind, handler.batch_kind])
    outcomes: dict[int | str, Outcome] = {}
    for row in rows:
        dead = row.state == ItemState.DEAD
        payload = row.payload or {}
        if row.kind == handler.call_kind:
            record = payload.get("record") if isinstance(payload, dict) else payload
            outcome = Outcome.POISON if dead else Outcome.OK if row.attempts == 1 else Outcome.TRANSIENT
            outcomes.setdefault(_identity(handler, record), outcome)
            continue
        failed = {int(offset) for offset in ((row.result or {}).get("errors") or {})} if dead else set()
        for offset, _key, record, _arrived, _seen, _dedup in payload.get("records", ()):
            if dead:
                outcome = Outcome.POISON if offset in failed else Outcome.OK
            else:
                outcome = Outcome.OK if row.attempts == 1 else Outcome.TRANSIENT
            outcomes.setdefault(_identity(handler, record), outcome)
    if not outcomes:
        raise InvalidInput(
            f"handler {handler.name!r} has no finished async calls or stream batches in the store; "
            "run it first, or give a workload CSV"
        )
    return Workload(
        records=tuple(WorkloadRecord(record, outcome) for record, outcome in outcomes.items()),
        source=f"history of {handler.name}",
    )


def _identity(handler: Handler, record: Any) -> int | str:
    identity = handler.id_of(record)
    if isinstance(identity, bool) or not isinstance(identity, int | str):
        return str(identity)
    return identity
