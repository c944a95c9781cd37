"""A bounded summary of many durations that answers a rank (a p99) exactly, then within 0.5%.

An ``Invoker`` times every sync call of a long-lived process (a web server that calls handlers for
days): one float per call grows without bound. ``DurationSketch`` keeps the first ``exact_max``
values as they are, so a run of up to that many calls gets its exact nearest-rank percentile; past
it, the values fold into logarithmic buckets (the DDSketch idea: bucket ``i`` holds the values in
``(gamma**(i-1), gamma**i]``, ``gamma = (1 + a) / (1 - a)``), and a rank is answered with its
bucket's middle, which is within the relative error ``a`` (0.5%) of the exact value of that rank.
The buckets are bounded too: past ``buckets_max`` the lowest two merge, which only coarsens the
smallest values, never the high percentiles this is kept for. The count, the total (the mean), the
smallest and the largest value stay exact. Pure: no clock, no store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["RELATIVE_ERROR", "DurationSketch"]

#: How far a rank's value may be from the exact one, relative to it, once the values are bucketed.
RELATIVE_ERROR = 0.005
_GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
_LOG_GAMMA = math.log(_GAMMA)
#: Values at or below this (a zero wait, say) are counted apart and answered as 0.
_TINY = 1e-9


@dataclass
class DurationSketch:
    """Durations (non-negative, any unit) summarised in bounded memory; see the module docstring."""

    exact_max: int = 4096
    buckets_max: int = 2048
    count: int = 0
    total: float = 0.0
    smallest: float = math.inf
    largest: float = -math.inf
    _exact: list[float] | None = field(default_factory=list, repr=False)
    _buckets: dict[int, int] = field(default_factory=dict, repr=False)
    _tiny: int = 0

    def add(self, value: float) -> None:
        """Count one duration."""
        self.count += 1
        self.total += value
        if value < self.smallest:
            self.smallest = value
        if value > self.largest:
            self.largest = value
        exact = self._exact
        if exact is not None:
            exact.append(value)
            if len(exact) > self.exact_max:
                self._exact = None
                for kept in exact:
                    self._bucket(kept)
            return
        self._bucket(value)

    @property
    def exact(self) -> bool:
        """Whether every value is still kept, so ranks are answered exactly."""
        return self._exact is not None

    def value_at_rank(self, rank: int) -> float:
        """The ``rank``-th smallest value (1-based; a nearest-rank position), exact while every value
        is kept, within ``RELATIVE_ERROR`` of it after; 0 when nothing was added."""
        if self.count == 0:
            return 0.0
        rank = min(max(rank, 1), self.count)
        if self._exact is not None:
            return sorted(self._exact)[rank - 1]
        if rank == self.count:
            return self.largest
        seen = self._tiny
        if rank <= seen:
            return 0.0
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if seen >= rank:
                middle = 2 * _GAMMA**index / (_GAMMA + 1)
                return min(max(middle, self.smallest), self.largest)
        return self.largest  # pragma: no cover - the counts add up to ``count``

    def _bucket(self, value: float) -> None:
        if value <= _TINY:
            self._tiny += 1
            return
        index = math.ceil(math.log(value) / _LOG_GAMMA)
        buckets = self._buckets
        buckets[index] = buckets.get(index, 0) + 1
        if len(buckets) > self.buckets_max:
            lowest, second = sorted(buckets)[:2]
            buckets[second] += buckets.pop(lowest)
