"""Handler calls: one call as the engine makes it and the call log keeps it, and how a call ended."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

__all__ = ["CallOutcome", "CallRow"]


class CallOutcome(str, enum.Enum):
    """How one handler call ended: it returned, it raised, or it ran past the handler's time limit."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True, slots=True)
class CallRow:
    """One handler call, as the engine makes it (``vardiya.invoke.execute.CallRecord``) and the call log
    stores it."""

    started_at: datetime
    ended_at: datetime
    busy_ms: float
    records: int
    failed: int
    outcome: CallOutcome
    error: str | None
