"""Rate limits as a handler declares them (``rate_limit="100/s"``), and the token-bucket arithmetic. Pure.

A rate is a whole number of work items per second, minute or hour, spelled ``N/s``, ``N/m`` or ``N/h``
(Celery's spelling; ``sec``, ``min``, ``hour`` and their plurals are accepted too). It counts items
started: the async calls of a handler, or the batches of a stream handler. The bucket holds up to
``burst`` tokens (default: N, so "100/s" may start 100 at once after a quiet second, and "10/m" 10 at
once after a quiet minute) and refills at N per unit; a claim takes one token per item it starts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import InvalidInput

__all__ = ["RateLimit", "parse_rate_limit", "refill", "token_due_in"]

_UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
}
_SPELLING = re.compile(r"\s*(\d+)\s*/\s*([A-Za-z]+)\s*")
_HELP = "spell a rate limit as a whole number of items per s, m or h, such as '100/s', '30/m' or '500/h'"


@dataclass(frozen=True, kw_only=True)
class RateLimit:
    """``count`` items per ``per_s`` seconds, with a bucket of ``burst`` tokens (default: ``count``)."""

    count: int
    per_s: float
    burst: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise InvalidInput(f"a rate limit's count must be a whole number of at least 1, got {self.count!r}; {_HELP}")
        if isinstance(self.per_s, bool) or not isinstance(self.per_s, int | float) or not self.per_s > 0 or math.isinf(self.per_s):
            raise InvalidInput(f"a rate limit's period must be more than 0 seconds, got {self.per_s!r}; {_HELP}")
        if self.burst is not None and (isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1):
            raise InvalidInput(f"a rate limit's burst must be a whole number of at least 1, got {self.burst!r}")
        object.__setattr__(self, "per_s", float(self.per_s))

    @property
    def per_second(self) -> float:
        """The refill rate, in tokens per second."""
        return self.count / self.per_s

    @property
    def capacity(self) -> int:
        """The most tokens the bucket holds: how many items may start at once after a quiet spell."""
        return self.burst if self.burst is not None else self.count

    def spelling(self) -> str:
        """The limit as ``parse_rate_limit`` reads it ("100/s"), for reports."""
        unit = {1.0: "s", 60.0: "m", 3600.0: "h"}.get(self.per_s)
        text = f"{self.count}/{unit}" if unit else f"{self.count}/{self.per_s:g}s"
        return text if self.burst is None else f"{text} (burst {self.burst})"


def parse_rate_limit(value: object) -> RateLimit:
    """A ``RateLimit`` from its spelling ("100/s", "30/m", "500/h") or itself; anything else is an
    ``InvalidInput`` that says how to spell one."""
    if isinstance(value, RateLimit):
        return value
    if not isinstance(value, str):
        raise InvalidInput(f"a rate limit must be a string such as '100/s', got {value!r}; {_HELP}")
    match = _SPELLING.fullmatch(value)
    if match is None:
        raise InvalidInput(f"cannot read the rate limit {value!r}; {_HELP}")
    count, unit = int(match.group(1)), match.group(2).lower()
    if unit not in _UNITS:
        raise InvalidInput(f"unknown unit {match.group(2)!r} in the rate limit {value!r}; {_HELP}")
    if count < 1:
        raise InvalidInput(f"the rate limit {value!r} lets nothing run; {_HELP} (at least 1)")
    return RateLimit(count=count, per_s=_UNITS[unit])


def refill(tokens: float, elapsed_s: float, per_second: float, capacity: float) -> float:
    """The tokens of a bucket ``elapsed_s`` seconds after it held ``tokens``: grown at ``per_second``,
    never above ``capacity``. A clock that stepped back (``elapsed_s`` < 0) adds nothing."""
    return min(float(capacity), tokens + max(0.0, elapsed_s) * per_second)


def token_due_in(tokens: float, per_second: float) -> float:
    """Seconds until a bucket holding ``tokens`` holds a whole one again at ``per_second`` (0: it does).

    What a rate-limited worker with no token waits for, instead of polling: a claim takes a token when
    the bucket holds at least one (``math.floor(tokens + 1e-9)``, the claim's own tolerance).
    """
    if not per_second > 0:
        raise InvalidInput(f"a bucket's refill rate must be more than 0 tokens a second, got {per_second!r}")
    if tokens + 1e-9 >= 1.0:
        return 0.0
    return (1.0 - tokens) / per_second
