"""How far ahead of its handlers a worker thread marks its prefetched items started (pure).

A worker claims up to ``prefetch`` items at once; a crash must be charged only to the items whose
handler was running (``WorkItems.start``). Marking each item in its own round trip would make a drain
of no-op calls a third slower; marking the whole claim at once charges a crash to every prefetched
item. So the marks go a chunk at a time, sized to what the handlers take: a chunk covers about
``ahead_s`` of expected work. With handlers slower than that every item is marked alone, just before
it runs (exact); with fast ones the chunk grows until the claim itself marks all its items (no extra
round trip), and a crash can then charge only items the worker would have started within about
``ahead_s``.
"""

from __future__ import annotations

__all__ = ["START_AHEAD_S", "StartPacer"]

#: About how much expected handler time one started-marker chunk covers.
START_AHEAD_S = 0.05


class StartPacer:
    """The size of the next chunk of items a worker thread marks started, learnt from the last ones.

    ``size`` starts at 1 (nothing is known about the handlers); a chunk that ran within ``ahead_s``
    doubles it (up to ``most``), one that took longer scales it down in proportion.
    """

    def __init__(self, *, ahead_s: float = START_AHEAD_S, most: int = 1_000) -> None:
        self.ahead_s = ahead_s
        self.most = most
        self.size = 1

    def ran(self, count: int, elapsed_s: float) -> int:
        """Learn from a chunk of ``count`` items that ran in ``elapsed_s``; returns the next size."""
        if count <= 0:
            return self.size
        if elapsed_s > self.ahead_s:
            self.size = max(1, int(count * self.ahead_s / elapsed_s))
        elif count >= self.size:
            self.size = min(self.most, self.size * 2)
        return self.size
