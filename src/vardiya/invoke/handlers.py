"""A handler and the configuration that says how it is invoked: sync, async or stream.

The same function serves all three models; the model is configuration, not a rewrite:

    @app.handler("validate", model="stream", batch_size=100, policy="bisect",
                 retry=RetryPolicy(max_attempts=3, wait=FixedWait(seconds=60)),
                 per_record_s=0.4, per_call_overhead_s=0.25, time_limit_s=900)
    def validate(reading, context):
        ...

A handler takes one record and a ``CallContext``, returns a JSON-serialisable result (or None), and
raises to fail. With ``batch=True`` it takes the whole batch instead (a list of ``BatchRecord``) and
returns the offsets of the records that failed (``report_failures``) or raises to fail them all.

Everything is checked when the handler is declared, so a configuration that cannot work (a batch size
whose worst case cannot fit the time limit, a negative wait, zero attempts) never reaches a worker.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..clock import to_seconds
from ..errors import ConfigurationError, InvalidInput
from ..limits import check_key, check_name
from ..rules.rates import RateLimit, parse_rate_limit
from ..sla import check_sla
from ..store.types import dumps_json
from .batching import check_batch_size
from .retry import CallerRetry, FixedWait, RetryPolicy

__all__ = ["CALL_PREFIX", "BATCH_PREFIX", "Dedup", "FailurePolicy", "Handler", "Model", "payload_key"]

#: Work-item kinds: ``call:NAME`` for an async invocation, ``batch:NAME`` for a stream batch.
CALL_PREFIX = "call:"
BATCH_PREFIX = "batch:"


class Model(str, enum.Enum):
    """Who waits, who sees the error, who retries."""

    SYNC = "sync"
    """The caller waits for the result and owns the retries; no dead letters."""
    ASYNC = "async"
    """The caller gets a handle once the request is stored; the engine retries and dead-letters."""
    STREAM = "stream"
    """Records are appended to an ordered stream and consumed in batches under a failure policy."""


class FailurePolicy(str, enum.Enum):
    """What a stream consumer does with a batch in which some records failed."""

    RETRY_BATCH = "retry_batch"
    """The batch is never split: it is retried whole, and dead-lettered whole (healthy records co-fail)."""
    BISECT = "bisect"
    """A failing batch is split in halves and each half called again, until the bad records are alone."""
    REPORT_FAILURES = "report_failures"
    """Only the records that failed are retried and dead-lettered."""


def _enum(enum_class: type[enum.Enum], value: object, what: str) -> Any:
    if isinstance(value, enum_class):
        return value
    try:
        return enum_class(value)
    except ValueError:
        known = ", ".join(member.value for member in enum_class)
        raise InvalidInput(f"unknown {what} {value!r}; choose one of: {known}") from None


def payload_key(record: Any) -> str:
    """The default dedup key of a record: a digest of its canonical JSON (keys sorted)."""
    import json

    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Dedup:
    """Idempotency keys: within ``window`` a record whose key already succeeded does not run again.

    ``key`` derives the key from a record (default: a digest of its JSON, ``payload_key``); a key given
    at submit or append time wins. Keys of dead-lettered records stay live until the dead letter is
    redriven or purged, whatever the window says.
    """

    window: float | timedelta = 24 * 3600.0
    key: Callable[[Any], str] | None = None

    def __post_init__(self) -> None:
        seconds = to_seconds(self.window) if isinstance(self.window, int | float | timedelta) else None
        if seconds is None or isinstance(self.window, bool) or seconds <= 0:
            raise InvalidInput(f"a dedup window must be a positive number of seconds, got {self.window!r}")
        object.__setattr__(self, "window", seconds)
        if self.key is not None and not callable(self.key):
            raise InvalidInput(f"dedup key must be a function of the record, got {self.key!r}")

    @property
    def window_s(self) -> float:
        """The window in seconds."""
        return float(self.window)  # type: ignore[arg-type]

    def key_of(self, record: Any, given: str | None = None) -> str:
        """The record's key: ``given`` if any, else ``key(record)``, else the digest of its JSON.

        A key function that raises on the record, or returns something that is not a key, is an
        ``InvalidInput`` naming the function and what it did (the caller adds the handler and record).
        """
        if given is not None:
            return _key_text(given, "a dedup key")
        if self.key is not None:
            try:
                key = self.key(record)
            except Exception as error:  # the user's function: its error is bad input here
                raise InvalidInput(
                    f"the dedup key function {function_label(self.key)} raised {type(error).__name__}: {error}; "
                    "make it accept every payload the handler gets, or give the key yourself"
                ) from error
            return _key_text(key, f"the key returned by the dedup key function {function_label(self.key)}")
        return payload_key(record)


def function_label(fn: Callable[..., Any]) -> str:
    """A function as a message names it: its name, and where it is defined (a lambda has no other name)."""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return name
    return f"{name} ({code.co_filename.rsplit('/', 1)[-1]}, line {code.co_firstlineno})"


def _key_text(key: object, what: str) -> str:
    if isinstance(key, bool) or not isinstance(key, str | int):
        raise InvalidInput(f"{what} must be a string or an integer, got {key!r}")
    return check_key(str(key), what)


def _default_id(record: Any) -> Any:
    if isinstance(record, Mapping):
        for name in ("id", "record"):
            if name in record:
                return record[name]
    return record


_DEFAULT_RETRY = RetryPolicy(max_attempts=3, wait=FixedWait(seconds=60))


@dataclass(frozen=True, kw_only=True)
class Handler:
    """A function and how to invoke it. Build one with ``App.handler`` or directly; ``with_model`` and
    ``replace`` give variants (the same function under another model or batch size)."""

    name: str
    fn: Callable[..., Any]
    model: Model = Model.ASYNC
    retry: RetryPolicy = _DEFAULT_RETRY
    """Engine-owned retries (async and stream)."""
    caller_retry: CallerRetry = field(default_factory=CallerRetry)
    """Caller-owned retries (sync): a count and a delay."""
    batch_size: int = 100
    batch_window: float = 0.0
    """Seconds a partial batch may wait for more records before it is cut anyway (0: cut at once)."""
    policy: FailurePolicy = FailurePolicy.RETRY_BATCH
    batch: bool = False
    """The function takes the whole batch (a list of ``BatchRecord``) instead of one record."""
    time_limit_s: float = 900.0
    per_record_s: float | None = None
    """Worst-case seconds per record, to check a stream batch size against the time limit."""
    per_call_overhead_s: float = 0.0
    dedup: Dedup | None = None
    on_failure: Callable[..., Any] | None = None
    """Called as ``on_failure(handler_name, item, error)`` when a record or batch is dead-lettered."""
    ordered: bool = False
    """Stream: keep order per key (records of one lane are consumed one batch at a time)."""
    lanes: int = 1
    """Stream with ``ordered``: keys are spread over this many lanes, each consumed in order."""
    id_of: Callable[[Any], Any] = _default_id
    """A record's identity for reports (default: a mapping's ``id`` or ``record`` field, else itself)."""
    sla: timedelta | None = None
    """How long one call is expected to take; a worker's call that takes longer is logged, counted and
    shown by ``vardiya status`` (``vardiya.sla``). Nothing is stopped for it: ``time_limit_s`` does that."""
    queue: str = "default"
    """The named queue its async calls and stream batches go to: ``vardiya worker --queue NAME`` (and
    ``WorkerSettings(queues=[...])``) claims only the items of its queues; a worker without claims them all."""
    rate_limit: RateLimit | str | None = None
    """At most this many of its items start, over all the workers of the store ("100/s", "30/m",
    "500/h"; ``rules.rates``): a token bucket in the store, taken in each claim's transaction. Items over
    the limit wait, ready; they are not failed."""

    def __post_init__(self) -> None:
        check_name(self.name, "a handler name")
        if not callable(self.fn):
            raise InvalidInput(f"handler {self.name!r} needs a function, got {self.fn!r}")
        object.__setattr__(self, "model", _enum(Model, self.model, "invocation model"))
        object.__setattr__(self, "policy", _enum(FailurePolicy, self.policy, "failure policy"))
        if not isinstance(self.retry, RetryPolicy):
            raise InvalidInput(f"retry of handler {self.name!r} must be a RetryPolicy, got {self.retry!r}")
        if not isinstance(self.caller_retry, CallerRetry):
            raise InvalidInput(
                f"caller_retry of handler {self.name!r} must be a CallerRetry, got {self.caller_retry!r}"
            )
        if self.dedup is not None and not isinstance(self.dedup, Dedup):
            raise InvalidInput(f"dedup of handler {self.name!r} must be a Dedup, got {self.dedup!r}")
        for name in ("time_limit_s", "batch_window", "per_call_overhead_s"):
            value = getattr(self, name)
            if isinstance(value, timedelta):
                value = value.total_seconds()
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InvalidInput(f"{name} of handler {self.name!r} must be 0 or more seconds, got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.time_limit_s <= 0:
            raise InvalidInput(f"time_limit_s of handler {self.name!r} must be more than 0 seconds")
        size = self.batch_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidInput(f"batch_size of handler {self.name!r} must be a whole number of at least 1, got {size!r}")
        lanes = self.lanes
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise InvalidInput(f"lanes of handler {self.name!r} must be a whole number of at least 1, got {lanes!r}")
        if self.per_record_s is not None:
            try:
                check_batch_size(
                    size if self.model is Model.STREAM else 1,
                    per_record_s=self.per_record_s,
                    per_call_overhead_s=self.per_call_overhead_s,
                    time_limit_s=self.time_limit_s,
                )
            except ConfigurationError as error:
                raise ConfigurationError(f"handler {self.name!r}: {error}") from None
        if self.on_failure is not None and not callable(self.on_failure):
            raise InvalidInput(f"on_failure of handler {self.name!r} must be a function, got {self.on_failure!r}")
        object.__setattr__(self, "sla", check_sla(self.sla, f"handler {self.name!r}"))
        check_name(self.queue, f"the queue of handler {self.name!r}")
        if self.rate_limit is not None:
            try:
                object.__setattr__(self, "rate_limit", parse_rate_limit(self.rate_limit))
            except InvalidInput as error:
                raise InvalidInput(f"handler {self.name!r}: {error}") from None

    @property
    def limit(self) -> RateLimit | None:
        """The parsed ``rate_limit`` (None: no limit)."""
        return self.rate_limit if isinstance(self.rate_limit, RateLimit) else None

    @property
    def call_kind(self) -> str:
        """The work-item kind of this handler's async invocations."""
        return CALL_PREFIX + self.name

    @property
    def batch_kind(self) -> str:
        """The work-item kind of this handler's stream batches."""
        return BATCH_PREFIX + self.name

    @property
    def kind(self) -> str:
        """The work-item kind the configured model uses (sync uses none; its kind is the call kind)."""
        return self.batch_kind if self.model is Model.STREAM else self.call_kind

    def replace(self, **changes: Any) -> Handler:
        """A copy with some settings changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def with_model(self, model: Model | str, **changes: Any) -> Handler:
        """The same function under another model (and other settings)."""
        return self.replace(model=model, **changes)

    def describe(self) -> dict[str, Any]:
        """The configuration as JSON-ready values."""
        described: dict[str, Any] = {
            "name": self.name,
            "model": self.model.value,
            "retry": self.retry.to_mapping(),
            "caller_retry": {"count": self.caller_retry.count, "delay_s": self.caller_retry.delay_s},
            "time_limit_s": self.time_limit_s,
            "dedup_window_s": self.dedup.window_s if self.dedup else None,
            "queue": self.queue,
            "rate_limit": self.limit.spelling() if self.limit else None,
        }
        if self.model is Model.STREAM:
            described |= {
                "batch_size": self.batch_size,
                "batch_window_s": self.batch_window,
                "policy": self.policy.value,
                "ordered": self.ordered,
                "lanes": self.lanes,
            }
        dumps_json(described)
        return described
