"""The dead-letter store: list, show, redrive and purge dead async calls and stream batches.

A dead letter is a work item of kind ``call:H`` or ``batch:H`` in state ``dead``: its payload (the
record, or the batch's records), its attempt history, its handler calls, and its dedup keys, which do
not expire while it is dead.

Redrive makes dead items ready again with fresh attempts. ``rate`` spaces them out (item k becomes
ready k / rate seconds from now) so a redrive of thousands does not flood the handler's downstream.
The dedup keys the items hold get a fresh window, so records of a dead batch that had in fact
succeeded are skipped, not processed again, however late the redrive comes. The report says how many
records that saves: those whose keys had outlived their window and would, in the usual design where a
key expires after its window whatever happened, have been processed a second time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..store.records import DedupOutcome, ItemState
from .handlers import BATCH_PREFIX, CALL_PREFIX

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["DeadLetter", "RedriveReport", "check_redrive", "dead_letters", "purge", "redrive", "show"]


@dataclass(frozen=True, kw_only=True)
class DeadLetter:
    """One dead async call or stream batch."""

    id: int
    handler: str
    model: str
    records: int
    co_failed: int
    attempts: int
    error: str | None
    created_at: datetime
    dead_since: datetime

    def to_json(self) -> dict[str, Any]:
        # Field by field, not ``dataclasses.asdict``: its deep copy of every value was 80 % of
        # listing 1,000 dead letters (``vardiya dlq list --json``, the dashboard's handlers page).
        return {
            "id": self.id, "handler": self.handler, "model": self.model, "records": self.records,
            "co_failed": self.co_failed, "attempts": self.attempts, "error": self.error,
            "created_at": self.created_at.isoformat(), "dead_since": self.dead_since.isoformat(),
        }


def _is_invocation(kind: str) -> bool:
    return kind.startswith((CALL_PREFIX, BATCH_PREFIX))


def _letter(row: Any) -> DeadLetter:
    batch = row.kind.startswith(BATCH_PREFIX)
    payload = row.payload or {}
    result = row.result or {}
    return DeadLetter(
        id=row.id,
        handler=row.kind.split(":", 1)[1],
        model="stream" if batch else "async",
        records=len(payload.get("records", ())) if batch else 1,
        co_failed=int(result.get("co_failed", 0)) if batch else 0,
        attempts=row.attempts,
        error=row.last_error,
        created_at=row.created_at,
        dead_since=row.updated_at,
    )


def _check_age(older_than_s: float | None) -> None:
    if older_than_s is not None and (isinstance(older_than_s, bool) or older_than_s < 0):
        raise InvalidInput(f"--older-than must be 0 or more, got {older_than_s!r}")


def dead_letters(
    store: Store,
    *,
    handler: str | None = None,
    older_than_s: float | None = None,
    error: str | None = None,
    ids: Sequence[int] | None = None,
    limit: int | None = None,
) -> list[DeadLetter]:
    """Dead letters, oldest first, by handler, age (dead for longer than ``older_than_s``) and error text."""
    _check_age(older_than_s)
    rows = store.invocations.dead_items(
        kinds=None if handler is None else [CALL_PREFIX + handler, BATCH_PREFIX + handler],
        prefixes=(CALL_PREFIX, BATCH_PREFIX),
        dead_by=None if older_than_s is None else store.clock.now() - timedelta(seconds=older_than_s),
        error=error,
        ids=ids,
        limit=limit,
    )
    return [_letter(row) for row in rows]


def show(store: Store, item_id: int) -> dict[str, Any]:
    """Everything about one dead letter: payload, attempts, handler calls, dedup keys."""
    item = store.items.get(item_id)
    if item is None or not _is_invocation(item.kind):
        raise InvalidInput(f"no dead letter has id {item_id}; `vardiya dlq list` shows the ids")
    if item.state is not ItemState.DEAD:
        raise InvalidInput(f"item {item_id} is {item.state.value}, not dead; only dead letters can be shown here")
    calls = store.invocations.calls_of(item_id)
    batch = item.kind.startswith(BATCH_PREFIX)
    payload = item.payload or {}
    records = (
        [{"offset": values[0], "key": values[1], "record": values[2], "processed": values[4]} for values in payload.get("records", ())]
        if batch
        else [{"record": payload.get("record"), "processed": item.attempts}]
    )
    return {
        "id": item.id,
        "handler": item.kind.split(":", 1)[1],
        "model": "stream" if batch else "async",
        "attempts": item.attempts,
        "max_attempts": item.max_attempts,
        "error": item.last_error,
        "created_at": item.created_at.isoformat(),
        "dead_since": item.updated_at.isoformat(),
        "records": records,
        "result": item.result,
        "history": [
            {
                "attempt": attempt.attempt,
                "owner": attempt.owner,
                "started_at": attempt.started_at.isoformat() if attempt.started_at else None,
                "ended_at": attempt.ended_at.isoformat(),
                "outcome": attempt.outcome.value,
                "error": attempt.error,
            }
            for attempt in store.items.history(item.id)
        ],
        "calls": [
            {
                "attempt": call.attempt,
                "started_at": call.started_at.isoformat(),
                "busy_ms": round(call.busy_ms, 3),
                "records": call.records,
                "failed": call.failed,
                "outcome": call.outcome.value,
                "error": call.error,
            }
            for call in calls
        ],
        "dedup_keys": [
            {
                "key": key.key,
                "outcome": key.outcome.value,
                "expires_at": key.expires_at.isoformat(),
                "past_window": key.expires_at <= store.clock.now(),
            }
            for key in store.dedup.held_by([item.id])
        ],
    }


@dataclass(frozen=True, kw_only=True)
class RedriveReport:
    """What a redrive did (or, with ``dry_run``, would do)."""

    dry_run: bool
    items: int
    records: int
    ids: list[int]
    rate_per_s: float | None
    last_ready_at: str | None
    dedup_keys: int
    """Keys the items hold (kept alive, then given a fresh window)."""
    already_succeeded: int
    """Records among them that had already succeeded: skipped, not processed again."""
    would_reprocess_without_retention: int
    """Of those, the ones whose key had outlived its window: without vardiya's retention (keys expire
    after the window, dead letter or not) each of them would have been processed a second time."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_redrive(*, rate_per_s: float | None, max_attempts: int | None) -> None:
    """Refuse a redrive's bad rate or attempt budget (the CLI asks before it opens the store)."""
    if rate_per_s is not None and (isinstance(rate_per_s, bool) or not rate_per_s > 0):
        raise InvalidInput(f"--rate must be more than 0 items per second, got {rate_per_s!r}")
    if max_attempts is not None and (isinstance(max_attempts, bool) or max_attempts < 1):
        raise InvalidInput(f"--max-attempts must be a whole number of at least 1, got {max_attempts!r}")


def redrive(
    store: Store,
    *,
    handler: str | None = None,
    older_than_s: float | None = None,
    error: str | None = None,
    ids: Sequence[int] | None = None,
    rate_per_s: float | None = None,
    max_attempts: int | None = None,
    dry_run: bool = False,
) -> RedriveReport:
    """Redrive the dead letters the filters select; see the module docstring."""
    check_redrive(rate_per_s=rate_per_s, max_attempts=max_attempts)
    letters = dead_letters(store, handler=handler, older_than_s=older_than_s, error=error, ids=ids)
    chosen = sorted(letter.id for letter in letters)
    now = store.clock.now()
    keys = store.dedup.held_by(chosen)
    succeeded = [key for key in keys if key.outcome is DedupOutcome.SUCCEEDED]
    past_window = [key for key in succeeded if key.expires_at <= now]
    spacing = 1.0 / rate_per_s if rate_per_s else 0.0
    if not dry_run and chosen:
        store.dedup.extend_for_items(chosen)
        store.items.redrive(chosen, max_attempts=max_attempts, spacing_s=spacing)
    last = now + timedelta(seconds=spacing * (len(chosen) - 1)) if chosen else None
    return RedriveReport(
        dry_run=dry_run,
        items=len(chosen),
        records=sum(letter.records for letter in letters),
        ids=chosen,
        rate_per_s=rate_per_s,
        last_ready_at=last.isoformat() if last else None,
        dedup_keys=len(keys),
        already_succeeded=len(succeeded),
        would_reprocess_without_retention=len(past_window),
    )


def purge(
    store: Store,
    *,
    handler: str | None = None,
    older_than_s: float | None = None,
    error: str | None = None,
    ids: Sequence[int] | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Delete the dead letters the filters select, with their history; their dedup keys then expire."""
    letters = dead_letters(store, handler=handler, older_than_s=older_than_s, error=error, ids=ids)
    chosen = [letter.id for letter in letters]
    purged = 0 if dry_run or not chosen else store.items.purge(chosen)
    return {
        "dry_run": dry_run,
        "items": len(chosen) if dry_run else purged,
        "records": sum(letter.records for letter in letters),
        "ids": chosen,
    }
