"""The stream's batch cut: when the records waiting in a lane become a batch."""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["batch_ready"]


def batch_ready(
    waiting: int, batch_size: int, oldest: datetime, now: datetime, window_s: float, *, flush: bool = False
) -> bool:
    """Whether a batch is cut now: it is full, or its oldest record has waited the window (or a flush)."""
    return waiting >= batch_size or flush or oldest <= now - timedelta(seconds=window_s)
