"""A cost profile: what a call, a record and a retry cost, read from TOML into a frozen value.

    per_call_overhead_ms = 250      # every call's fixed overhead
    per_record_ms = 400             # one record's processing (a workload line may give its own)
    accept_ms = 5                   # an async accept or a stream append answers in this time
    arrival_rate_per_s = 250        # records arrive at this rate
    time_limit_s = 900              # per invocation
    concurrency = "unbounded"       # or a number: a fixed pool of that many workers
    batch_size = 100                # the stream's batch size unless --batch-size says otherwise
    batch_sizes = [1, 10, 100]      # the sizes a sweep looks at
    policy = "retry_batch"          # the stream's failure policy unless --policy says otherwise
    batch_window_s = 2              # optional: cut a partial batch once its oldest record waited this long

    [caller_retry]                  # sync: the caller's retries
    count = 1
    delay_s = 0.2

    [retry]                         # async and stream: the engine's (any setting of RetryPolicy.from_mapping)
    attempts = 3
    wait_s = 60

    [prices]                        # cost = calls x per_call + busy ms x per_ms
    per_call = 0.0005
    per_ms = 0.0000025

    [dedup]
    read_ms = 15                    # a read per processed record
    write_ms = 10                   # a write per record
    window_s = 86400
    redrive_after_s = 259200        # dead letters are redriven this long after they died

Every key is checked: an unknown one is an error with the closest known key, a missing required one
names what to add. Without ``batch_window_s`` a partial batch waits until it is full, or until the
last record of the workload has arrived (what a worker draining to idle does).
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..invoke.handlers import FailurePolicy
from ..invoke.metrics import Prices
from ..invoke.retry import CallerRetry, RetryPolicy

__all__ = ["DedupCosts", "Profile", "load_profile", "parse_profile"]

_UNBOUNDED = "unbounded"

#: key -> required; tables are checked key by key.
_TOP: dict[str, bool] = {
    "per_call_overhead_ms": True,
    "per_record_ms": True,
    "accept_ms": True,
    "arrival_rate_per_s": True,
    "time_limit_s": True,
    "concurrency": False,
    "batch_size": False,
    "batch_sizes": False,
    "batch_window_s": False,
    "policy": False,
    "caller_retry": True,
    "retry": True,
    "prices": True,
    "dedup": True,
}
_CALLER_RETRY = {"count": True, "delay_s": True}
_RETRY = {"attempts": True, "wait_s": True, "backoff": False, "cap_s": False, "multiplier": False, "jitter": False,
          "jitter_ratio": False}
_PRICES = {"per_call": True, "per_ms": True}
_DEDUP = {"read_ms": True, "write_ms": True, "window_s": True, "redrive_after_s": True}


@dataclass(frozen=True, kw_only=True)
class DedupCosts:
    """What dedup costs and how long its keys live, and when dead letters are redriven."""

    read_ms: float
    write_ms: float
    window_s: float
    redrive_after_s: float


@dataclass(frozen=True, kw_only=True)
class Profile:
    """The costs and settings a replay runs under (see the module docstring for the TOML)."""

    per_call_overhead_ms: float
    per_record_ms: float
    accept_ms: float
    arrival_rate_per_s: float
    time_limit_s: float
    caller_retry: CallerRetry
    retry: RetryPolicy
    prices: Prices
    dedup: DedupCosts
    concurrency: int | None = None
    """None: unbounded (every item starts when it is ready); a number: a pool of that many workers."""
    batch_size: int = 100
    batch_sizes: tuple[int, ...] = field(default=())
    batch_window_s: float | None = None
    policy: FailurePolicy = FailurePolicy.RETRY_BATCH
    source: str = "profile"

    def batch_ms(self, batch_size: int) -> float:
        """How long one call on a full batch takes: the overhead and every record at the profile's time."""
        return self.per_call_overhead_ms + batch_size * self.per_record_ms

    def fits(self, batch_size: int) -> bool:
        """Whether a full batch fits the time limit."""
        return self.batch_ms(batch_size) <= self.time_limit_s * 1000.0


def load_profile(path: str | Path) -> Profile:
    """Read a profile TOML file; every error names the file and the key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidInput(f"cannot read the profile {path}: {error.strerror or error}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InvalidInput(f"{path} is not valid TOML: {error}") from None
    return parse_profile(document, source=str(path))


def _check_keys(table: Mapping[str, Any], known: Mapping[str, bool], where: str) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidInput(f"{where}: unknown key {key!r}{hint}; known keys: {', '.join(known)}")
    missing = [key for key, required in known.items() if required and key not in table]
    if missing:
        required = ", ".join(key for key, needed in known.items() if needed)
        raise InvalidInput(f"{where}: missing key {missing[0]!r}; the required keys are {required}")


def _table(document: Mapping[str, Any], name: str, known: Mapping[str, bool], source: str) -> Mapping[str, Any]:
    table = document[name]
    if not isinstance(table, Mapping):
        raise InvalidInput(f"{source}: {name} must be a table ([{name}] with key = value lines), got {table!r}")
    _check_keys(table, known, f"{source}, [{name}]")
    return table


def _number(value: object, what: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{what} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise InvalidInput(f"{what} must be {'more than 0' if positive else '0 or more'}, got {value!r}")
    return float(value)


def _whole(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{what} must be a whole number of at least 1, got {value!r}")
    return value


def parse_profile(document: Mapping[str, Any], *, source: str = "profile") -> Profile:
    """A profile from a parsed TOML document (a mapping)."""
    _check_keys(document, _TOP, source)
    caller = _table(document, "caller_retry", _CALLER_RETRY, source)
    retry = _table(document, "retry", _RETRY, source)
    prices = _table(document, "prices", _PRICES, source)
    dedup = _table(document, "dedup", _DEDUP, source)
    try:
        caller_retry = CallerRetry.from_mapping(caller)
        retry_policy = RetryPolicy.from_mapping(retry)
    except InvalidInput as error:
        raise InvalidInput(f"{source}: {error}") from None

    def top(name: str, *, positive: bool = False) -> float:
        return _number(document[name], f"{source}: {name}", positive=positive)

    concurrency_value = document.get("concurrency", _UNBOUNDED)
    concurrency = None if concurrency_value == _UNBOUNDED else concurrency_value
    if concurrency is not None:
        if isinstance(concurrency, str):
            raise InvalidInput(f"{source}: concurrency must be {_UNBOUNDED!r} or a number of workers, got {concurrency!r}")
        concurrency = _whole(concurrency, f"{source}: concurrency")
    batch_size = _whole(document.get("batch_size", 100), f"{source}: batch_size")
    sizes_value = document.get("batch_sizes", [batch_size])
    if not isinstance(sizes_value, list) or not sizes_value:
        raise InvalidInput(f"{source}: batch_sizes must be a list of whole numbers, e.g. [1, 10, 100], got {sizes_value!r}")
    sizes = tuple(_whole(size, f"{source}: every one of batch_sizes") for size in sizes_value)
    window = document.get("batch_window_s")
    policy_value = document.get("policy", FailurePolicy.RETRY_BATCH.value)
    try:
        policy = FailurePolicy(policy_value)
    except ValueError:
        known = ", ".join(member.value for member in FailurePolicy)
        raise InvalidInput(f"{source}: unknown policy {policy_value!r}; use one of: {known}") from None
    return Profile(
        per_call_overhead_ms=top("per_call_overhead_ms"),
        per_record_ms=top("per_record_ms", positive=True),
        accept_ms=top("accept_ms"),
        arrival_rate_per_s=top("arrival_rate_per_s", positive=True),
        time_limit_s=top("time_limit_s", positive=True),
        caller_retry=caller_retry,
        retry=retry_policy,
        prices=Prices(
            per_call=_number(prices["per_call"], f"{source}: [prices] per_call"),
            per_ms=_number(prices["per_ms"], f"{source}: [prices] per_ms"),
        ),
        dedup=DedupCosts(
            read_ms=_number(dedup["read_ms"], f"{source}: [dedup] read_ms"),
            write_ms=_number(dedup["write_ms"], f"{source}: [dedup] write_ms"),
            window_s=_number(dedup["window_s"], f"{source}: [dedup] window_s", positive=True),
            redrive_after_s=_number(dedup["redrive_after_s"], f"{source}: [dedup] redrive_after_s"),
        ),
        concurrency=concurrency,
        batch_size=batch_size,
        batch_sizes=sizes,
        batch_window_s=None if window is None else _number(window, f"{source}: batch_window_s"),
        policy=policy,
        source=source,
    )
