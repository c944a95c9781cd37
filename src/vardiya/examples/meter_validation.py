"""The meter-validation example: one validation function under the three invocation models.

A regional metering network validates 20,000 readings every night (invocation.md, "The example
profile"). The night's outcomes are a CSV of ``record,outcome``: an ``ok`` reading passes, a
``transient`` one fails its first processing (the validation service times out) and passes the
second, a ``poison`` one never passes. Records are ``{"id": <int>}`` payloads.

``build_app`` registers the one function ``validate`` under every model, with the profile's settings:

- ``validate_sync``: the caller waits and retries once, 200 ms later; no dead letters.
- ``validate_async``: the engine makes 3 attempts, 60 s apart, then dead-letters the call.
- ``validate_stream``: batches of 100 under ``retry_batch`` (a batch is never split), 3 attempts
  60 s apart, checked against the 900 s limit at 400 ms a record and 250 ms a call.
- ``validate_stream_bisect`` and ``validate_stream_report``: the same stream under ``bisect`` and
  ``report_failures``.
- ``validate_stream_dedup``: ``retry_batch`` with idempotency keys kept for 24 h, so a redrive skips
  the records of a dead batch that had in fact succeeded.

The function never sleeps: how long a validation takes is the planner's business (the cost profile),
not the example's. ``examples/meter_validation/app.py`` exposes this as ``app`` for ``--app``.
"""

from __future__ import annotations

import csv
import enum
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..app import App
from ..errors import InvalidInput
from ..invoke.execute import CallContext
from ..invoke.handlers import Dedup
from ..invoke.retry import CallerRetry, FixedWait, RetryPolicy

__all__ = [
    "CALLER_RETRY",
    "DEDUP",
    "ENGINE_RETRY",
    "HANDLERS",
    "NIGHT_CSV",
    "Outcome",
    "build_app",
    "load_outcomes",
    "load_records",
    "reading_key",
    "STREAM_SETTINGS",
]

#: The night of the example profile, shipped with the package so ``vardiya demo`` finds it anywhere.
NIGHT_CSV = Path(__file__).resolve().parent / "data" / "validation-night.csv"

#: Async and stream: the engine makes 3 attempts, 60 s apart.
ENGINE_RETRY = RetryPolicy(max_attempts=3, wait=FixedWait(seconds=60))
#: Sync: the caller retries once, 200 ms later.
CALLER_RETRY = CallerRetry(count=1, delay_s=0.2)
#: The stream's batch size and the durations it is checked against the time limit with.
STREAM_SETTINGS: dict[str, Any] = {
    "batch_size": 100,
    "per_record_s": 0.4,
    "per_call_overhead_s": 0.25,
    "time_limit_s": 900,
}


class Outcome(str, enum.Enum):
    """What validating a reading does on the scripted night."""

    OK = "ok"
    """Passes."""
    TRANSIENT = "transient"
    """Fails its first processing (a timeout) and passes the second."""
    POISON = "poison"
    """Never passes."""


def load_outcomes(csv_path: Path) -> dict[int, Outcome]:
    """The night's outcome of every reading, by record id, from a ``record,outcome`` CSV."""
    path = Path(csv_path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidInput(f"cannot read the night's outcomes {path}: {error.strerror}") from None
    rows = csv.reader(text.splitlines())
    header = next(rows, None)
    if header is None or [name.strip() for name in header] != ["record", "outcome"]:
        raise InvalidInput(f"{path}, line 1: expected the header 'record,outcome', got {','.join(header or [])!r}")
    known = ", ".join(outcome.value for outcome in Outcome)
    outcomes: dict[int, Outcome] = {}
    for line, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) != 2:
            raise InvalidInput(f"{path}, line {line}: expected record,outcome, got {','.join(row)!r}")
        record_text, outcome_text = (value.strip() for value in row)
        try:
            record = int(record_text)
        except ValueError:
            raise InvalidInput(f"{path}, line {line}: record {record_text!r} is not a whole number") from None
        try:
            outcome = Outcome(outcome_text)
        except ValueError:
            raise InvalidInput(
                f"{path}, line {line}: unknown outcome {outcome_text!r} for record {record}; use one of: {known}"
            ) from None
        if record in outcomes:
            raise InvalidInput(f"{path}, line {line}: record {record} appears twice")
        outcomes[record] = outcome
    return outcomes


def load_records(csv_path: Path, *, limit: int | None = None) -> list[dict[str, int]]:
    """The readings to validate, ``{"id": n}`` in file order (the first ``limit`` of them if given)."""
    records = [{"id": record} for record in load_outcomes(csv_path)]
    return records if limit is None else records[:limit]


def reading_key(record: Mapping[str, Any]) -> str:
    """A reading's idempotency key: its id, readable in ``vardiya dlq show``."""
    return f"reading-{record['id']}"


#: The profile's dedup window: a reading that succeeded within 24 h does not run again.
DEDUP = Dedup(window=timedelta(hours=24), key=reading_key)

_STREAM: dict[str, Any] = {"retry": ENGINE_RETRY, **STREAM_SETTINGS}

#: Handler name -> (model, settings); every one runs the same ``validate``.
HANDLERS: dict[str, tuple[str, dict[str, Any]]] = {
    "validate_sync": ("sync", {"caller_retry": CALLER_RETRY}),
    "validate_async": ("async", {"retry": ENGINE_RETRY}),
    "validate_stream": ("stream", {"policy": "retry_batch", **_STREAM}),
    "validate_stream_bisect": ("stream", {"policy": "bisect", **_STREAM}),
    "validate_stream_report": ("stream", {"policy": "report_failures", **_STREAM}),
    "validate_stream_dedup": ("stream", {"policy": "retry_batch", "dedup": DEDUP, **_STREAM}),
}


def build_app(csv_path: Path = NIGHT_CSV) -> App:
    """The example's App: ``validate`` under every handler of ``HANDLERS``, scripted by the CSV."""
    outcomes = load_outcomes(csv_path)

    def validate(record: Any, context: CallContext) -> dict[str, Any]:
        """Validate one meter reading: ok passes, transient times out once, poison is rejected."""
        reading = record.get("id") if isinstance(record, Mapping) else None
        if isinstance(reading, bool) or not isinstance(reading, int):
            raise ValueError(f"a reading is {{'id': <whole number>}}, got {record!r}")
        outcome = outcomes.get(reading)
        if outcome is None:
            raise LookupError(f"reading {reading} is not in the night's outcomes ({csv_path})")
        if outcome is Outcome.POISON:
            raise ValueError(f"reading {reading}: meter index went backwards")
        if outcome is Outcome.TRANSIENT and context.attempt == 1:
            raise TimeoutError(f"reading {reading}: validation service timed out")
        return {"id": reading, "valid": True}

    app = App("meter_validation")
    for name, (model, settings) in HANDLERS.items():
        app.handler(name, model=model, **settings)(validate)
    return app
