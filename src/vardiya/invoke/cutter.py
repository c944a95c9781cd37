"""The stream consumer's side of a worker: cut waiting stream records into batches.

A worker with nothing to claim cuts the records waiting in its stream handlers' lanes into batch items
(``Streams.cut``), which any worker of the fleet then claims like every other item. A flushing cut
(``run(until_idle=True)``) also cuts a batch that is not full and whose window has not closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..store.streams import Streams
from .handlers import Handler
from .report import WorkerReport

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["StreamCutter"]


class StreamCutter:
    """Cuts the stream records of ``handlers`` into batches and counts them in ``report``."""

    def __init__(self, store: Store, handlers: Sequence[Handler], report: WorkerReport) -> None:
        self.handlers = list(handlers)
        self.report = report
        self._streams = Streams(store)

    def __bool__(self) -> bool:
        return bool(self.handlers)

    def cut(self, *, flush: bool) -> int:
        """Cut what is ready (everything waiting, with ``flush``); returns the batches made."""
        made = 0
        for handler in self.handlers:
            made += self._streams.cut(
                handler.name,
                kind=handler.batch_kind,
                batch_size=handler.batch_size,
                window_s=handler.batch_window,
                max_attempts=handler.retry.max_attempts,
                ordered=handler.ordered,
                lanes=handler.lanes,
                flush=flush,
                queue=handler.queue,
            )
        if made:
            self.report.add(batches_cut=made)
        return made

    def any_waiting(self) -> bool:
        """Records still wait in a stream of ours (held back by their lane's batch in flight)."""
        return bool(self.handlers) and self._streams.any_waiting([handler.name for handler in self.handlers])
