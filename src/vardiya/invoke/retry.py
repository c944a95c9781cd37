"""Retry decisions: after attempt n of a work item fails, retry when, or give up. Pure, no I/O.

Two owners of a retry, matching the invocation models:

- ``RetryPolicy`` is the engine's (async and stream models): ``max_attempts`` counts the first attempt,
  a ``Wait`` gives the pause after each failed attempt, and ``Jitter`` spreads retries of many items so
  they do not all come back in the same second. ``decide`` turns "attempt n failed at ``now``" into a
  ``RetryDecision``: retry at ``now + wait(n)``, or give up and dead-letter the item.
- ``CallerRetry`` is the caller's (sync model): a number of extra calls, each after a fixed delay. The
  engine never retries a sync call and never dead-letters one.

Waits
    ``FixedWait(seconds=s)`` waits s after every failed attempt. ``ExponentialWait(initial=i,
    multiplier=m, cap=c)`` waits ``min(c, i * m ** (n - 1))`` after attempt n: 60, 120, 240, ... up to c.

Jitter
    Jitter only ever shortens a wait, so a jittered wait stays within ``[0, base]`` and never exceeds the
    cap. With ``r = jitter_ratio`` (0..1, default 1) and u uniform in [0, 1):

    - ``none``:  ``base``
    - ``full``:  ``base * (1 - r * u)``      (r = 1: anywhere in [0, base], the "full jitter" of AWS)
    - ``equal``: ``base * (1 - r * u / 2)``  (r = 1: in [base / 2, base], the "equal jitter" of AWS)

    u is not random: it is derived from (item key, attempt) by a versioned BLAKE2b hash
    (``JITTER_VERSION``), never from the ``random`` module's global state. The same item on the same
    attempt always gets the same wait, so a replay on a virtual clock is reproducible, while different
    items get different waits. Pass the work item's key: items that share a key share their jitter.
"""

from __future__ import annotations

import difflib
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, TypeAlias, TypeVar

from ..clock import ensure_aware
from ..errors import InvalidInput

__all__ = [
    "Backoff",
    "CallerRetry",
    "ExponentialWait",
    "FixedWait",
    "JITTER_VERSION",
    "Jitter",
    "RetryDecision",
    "RetryPolicy",
    "Wait",
    "jitter_fraction",
]

JITTER_VERSION = 1
"""Version of the (key, attempt) -> u derivation. Bump it only on purpose: every replayed wait moves."""

_JITTER_PERSON = b"vardiya-jitter" + bytes([JITTER_VERSION])  # BLAKE2b personalisation, <= 16 bytes


class Jitter(StrEnum):
    """How a wait is spread: not at all, over the whole wait, or over its upper half."""

    NONE = "none"
    FULL = "full"
    EQUAL = "equal"


class Backoff(StrEnum):
    """The shape of the waits in a retry configuration: the same every time, or growing."""

    FIXED = "fixed"
    EXPONENTIAL = "exponential"


def _is_number(value: object) -> bool:
    # bool is an int subclass, but ``wait_s = true`` is a typo, not a duration
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds(value: object, what: str) -> float:
    """``value`` as a finite, non-negative number of seconds, or InvalidInput naming ``what``."""
    if not _is_number(value) or not math.isfinite(value):  # type: ignore[arg-type]
        raise InvalidInput(f"{what} must be a finite number of seconds, got {value!r}")
    if value < 0:  # type: ignore[operator]
        raise InvalidInput(f"a wait cannot be negative: {what}={value!r}; use 0 or more seconds")
    return float(value)  # type: ignore[arg-type]


def _whole_number(value: object, what: str, *, at_least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < at_least:
        raise InvalidInput(f"{what} must be a whole number of at least {at_least}, got {value!r}")
    return value


_Choice = TypeVar("_Choice", bound=StrEnum)


def _enum_value(enum: type[_Choice], value: object, what: str) -> _Choice:
    if isinstance(value, str):  # a member is a str too
        try:
            return enum(value)
        except ValueError:
            pass
    choices = ", ".join(repr(member.value) for member in enum)
    raise InvalidInput(f"{what} {value!r} is not known; use one of {choices}")


def jitter_fraction(key: str, attempt: int) -> float:
    """The u in [0, 1) behind the jitter of ``key``'s wait after ``attempt``: stable across runs."""
    if not isinstance(key, str):
        raise InvalidInput(f"a jitter key must be a string (the work item's key), got {key!r}")
    attempt = _whole_number(attempt, "attempt", at_least=1)
    digest = hashlib.blake2b(
        f"{attempt}:{key}".encode(), digest_size=8, person=_JITTER_PERSON
    ).digest()
    # the top 53 bits, exactly representable: a 64-bit value over 2**64 could round up to 1.0
    return (int.from_bytes(digest, "big") >> 11) / 2.0**53


@dataclass(frozen=True, kw_only=True)
class FixedWait:
    """The same wait after every failed attempt."""

    seconds: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "seconds", _seconds(self.seconds, "seconds"))

    @property
    def longest(self) -> float:
        """The longest wait this can produce, in seconds."""
        return self.seconds

    def base(self, attempt: int) -> float:
        """Seconds to wait after attempt ``attempt`` (1-based) fails, before jitter."""
        _whole_number(attempt, "attempt", at_least=1)
        return self.seconds


@dataclass(frozen=True, kw_only=True)
class ExponentialWait:
    """A wait that grows by ``multiplier`` after every failed attempt, never beyond ``cap``."""

    initial: float
    multiplier: float = 2.0
    cap: float

    def __post_init__(self) -> None:
        initial = _seconds(self.initial, "initial")
        cap = _seconds(self.cap, "cap")
        multiplier = self.multiplier
        if not _is_number(multiplier) or not math.isfinite(multiplier) or multiplier < 1:
            raise InvalidInput(
                f"the multiplier of an exponential wait must be a finite number of at least 1, "
                f"got {multiplier!r}; use a fixed wait for waits that do not grow"
            )
        if cap < initial:
            raise InvalidInput(
                f"the cap of an exponential wait cannot be below its initial wait: "
                f"initial={initial:g} s, cap={cap:g} s; raise the cap or lower the initial wait"
            )
        object.__setattr__(self, "initial", initial)
        object.__setattr__(self, "cap", cap)
        object.__setattr__(self, "multiplier", float(multiplier))

    @property
    def longest(self) -> float:
        """The longest wait this can produce, in seconds."""
        return self.cap

    def base(self, attempt: int) -> float:
        """Seconds to wait after attempt ``attempt`` (1-based) fails, before jitter."""
        attempt = _whole_number(attempt, "attempt", at_least=1)
        try:
            grown = self.initial * self.multiplier ** (attempt - 1)
        except OverflowError:  # a very late attempt: the growth left float range long after the cap
            return self.cap
        return min(self.cap, grown)


Wait: TypeAlias = FixedWait | ExponentialWait


@dataclass(frozen=True, kw_only=True)
class RetryDecision:
    """What to do after a failed attempt: retry ``at`` (after ``wait_s``), or give up (dead letter)."""

    retry: bool
    at: datetime | None
    wait_s: float
    attempt: int
    """The attempt that failed (1-based)."""
    reason: str

    @property
    def next_attempt(self) -> int | None:
        """The number of the attempt to make at ``at``, or None when giving up."""
        return self.attempt + 1 if self.retry else None


_MAPPING_KEYS = ("attempts", "backoff", "cap_s", "jitter", "jitter_ratio", "multiplier", "wait_s")


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """The engine's retries for a work item: how many attempts, and how long to wait between them."""

    max_attempts: int = 3
    wait: Wait
    jitter: Jitter = Jitter.NONE
    jitter_ratio: float = 1.0

    def __post_init__(self) -> None:
        _whole_number(self.max_attempts, "max_attempts", at_least=1)
        if not isinstance(self.wait, FixedWait | ExponentialWait):
            raise InvalidInput(
                f"wait must be a FixedWait or an ExponentialWait, got {self.wait!r}; "
                "e.g. wait=FixedWait(seconds=60)"
            )
        object.__setattr__(self, "jitter", _enum_value(Jitter, self.jitter, "jitter"))
        ratio = self.jitter_ratio
        if not _is_number(ratio) or not 0 <= ratio <= 1:
            raise InvalidInput(f"jitter_ratio must be a number from 0 to 1, got {ratio!r}")
        object.__setattr__(self, "jitter_ratio", float(ratio))

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> RetryPolicy:
        """A policy from configuration values (a TOML table, a dict); unknown keys are rejected.

        ``{"attempts": 3, "wait_s": 60, "backoff": "exponential", "cap_s": 600, "jitter": "full"}``
        """
        if not isinstance(settings, Mapping):
            raise InvalidInput(f"retry settings must be a table of key = value, got {settings!r}")
        for key in settings:
            if key not in _MAPPING_KEYS:
                close = difflib.get_close_matches(str(key), _MAPPING_KEYS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise InvalidInput(
                    f"unknown retry setting {key!r}{hint}; known settings: {', '.join(_MAPPING_KEYS)}"
                )
        if "wait_s" not in settings:
            raise InvalidInput(
                "retry settings need wait_s, the wait after the first failed attempt, e.g. wait_s = 60"
            )
        # checked here so that a message names the setting as written, wait_s, not the field behind it
        wait_s = _seconds(settings["wait_s"], "wait_s")
        backoff = _enum_value(Backoff, settings.get("backoff", Backoff.FIXED), "backoff")
        wait: Wait
        if backoff is Backoff.FIXED:
            for key in ("cap_s", "multiplier"):
                if key in settings:
                    raise InvalidInput(
                        f"{key} applies only to backoff = 'exponential'; remove it or set that backoff"
                    )
            wait = FixedWait(seconds=wait_s)
        else:
            if "cap_s" not in settings:
                raise InvalidInput(
                    "backoff = 'exponential' needs cap_s, the longest wait, e.g. cap_s = 600"
                )
            wait = ExponentialWait(
                initial=wait_s,
                multiplier=settings.get("multiplier", 2.0),
                cap=_seconds(settings["cap_s"], "cap_s"),
            )
        return cls(
            max_attempts=settings.get("attempts", 3),
            wait=wait,
            jitter=settings.get("jitter", Jitter.NONE),
            jitter_ratio=settings.get("jitter_ratio", 1.0),
        )

    def to_mapping(self) -> dict[str, Any]:
        """The configuration values that ``from_mapping`` turns back into this policy."""
        settings: dict[str, Any] = {"attempts": self.max_attempts}
        if isinstance(self.wait, FixedWait):
            settings |= {"backoff": Backoff.FIXED.value, "wait_s": self.wait.seconds}
        else:
            settings |= {
                "backoff": Backoff.EXPONENTIAL.value,
                "wait_s": self.wait.initial,
                "multiplier": self.wait.multiplier,
                "cap_s": self.wait.cap,
            }
        settings |= {"jitter": self.jitter.value, "jitter_ratio": self.jitter_ratio}
        return settings

    def wait_after(self, attempt: int, key: str = "") -> float:
        """Seconds to wait after attempt ``attempt`` of item ``key`` fails, jitter included."""
        base = self.wait.base(attempt)
        if self.jitter is Jitter.NONE or self.jitter_ratio == 0 or base == 0:
            return base
        share = self.jitter_ratio if self.jitter is Jitter.FULL else self.jitter_ratio / 2
        return base * (1 - share * jitter_fraction(key, attempt))

    def waits(self, key: str = "") -> tuple[float, ...]:
        """Every wait item ``key`` can go through: one after each attempt but the last."""
        return tuple(self.wait_after(attempt, key) for attempt in range(1, self.max_attempts))

    def decide(self, attempt: int, now: datetime, key: str = "") -> RetryDecision:
        """After attempt ``attempt`` (1-based) of item ``key`` failed at ``now``: retry when, or give up."""
        attempt = _whole_number(attempt, "attempt", at_least=1)
        if not isinstance(now, datetime):
            raise InvalidInput(f"now must be a datetime, got {now!r}")
        now = ensure_aware(now, "now")
        if attempt >= self.max_attempts:
            if attempt == self.max_attempts:
                reason = f"attempt {attempt} of {self.max_attempts} failed; no attempts left: dead letter"
            else:
                # a crash after the last attempt still counts as one: never an extra chance
                reason = (
                    f"attempt {attempt} failed, beyond max_attempts={self.max_attempts}; "
                    "no attempts left: dead letter"
                )
            return RetryDecision(retry=False, at=None, wait_s=0.0, attempt=attempt, reason=reason)
        wait_s = self.wait_after(attempt, key)
        at = now + timedelta(seconds=wait_s)
        return RetryDecision(
            retry=True,
            at=at,
            wait_s=wait_s,
            attempt=attempt,
            reason=(
                f"attempt {attempt} of {self.max_attempts} failed; "
                f"attempt {attempt + 1} at {at.isoformat()} after {wait_s:g} s"
            ),
        )


@dataclass(frozen=True, kw_only=True)
class CallerRetry:
    """The caller's retries of a sync call: ``count`` extra calls, each ``delay_s`` after a failure."""

    count: int = 1
    delay_s: float = 0.2

    def __post_init__(self) -> None:
        _whole_number(self.count, "count", at_least=0)
        object.__setattr__(self, "delay_s", _seconds(self.delay_s, "delay_s"))

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> CallerRetry:
        """A caller retry from configuration values: ``{"count": 1, "delay_s": 0.2}``."""
        known = ("count", "delay_s")
        if not isinstance(settings, Mapping):
            raise InvalidInput(f"caller retry settings must be a table of key = value, got {settings!r}")
        for key in settings:
            if key not in known:
                raise InvalidInput(
                    f"unknown caller retry setting {key!r}; known settings: {', '.join(known)}"
                )
        return cls(**dict(settings))

    @property
    def max_calls(self) -> int:
        """Calls the caller makes at most: the first one and every retry."""
        return self.count + 1

    def delay_after(self, call: int) -> float | None:
        """Seconds before the call after call ``call`` (1-based) failed; None when the caller gives up."""
        call = _whole_number(call, "call", at_least=1)
        return self.delay_s if call <= self.count else None
