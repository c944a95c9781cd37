"""The caller's side of the three models: call (sync), submit and status (async), append (stream).

    invoker = Invoker(store, app)
    invoker.call("validate", reading)            # sync: waits, retries as the caller, raises the error
    handle = invoker.submit("validate", reading) # async: returns once the request is stored
    invoker.status(handle)                       # state, attempts, result or error, history
    handle.result(timeout=30)                    # async: wait for the handler's return value
    invoker.append("validate", reading)          # stream: returns the record's offset
    invoker.invoke("validate", reading)          # whichever model the handler is configured with

Async and stream work is done by workers (``vardiya worker``, ``Worker``); a sync call runs here, in
the caller's thread, and leaves nothing in the store unless the handler has dedup keys (or the call
went over the handler's ``sla``: the miss is counted, as a worker's is).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from ..clock import Clock, SystemClock
from ..errors import ConfigurationError, InvalidInput, InvalidRecord
from ..limits import check_key
from ..store.records import Attempt, ItemState
from ..store.streams import Streams
from ..store.types import dumps_json, json_text
from .execute import BatchRecord, run_attempt
from .gate import StoreGate
from .handlers import Handler, Model
from .metrics import Metrics, Prices, Tally, store_metrics
from .results import ResultWaiter, check_timeout
from .sla_calls import note_sync_calls

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = [
    "CallStatus", "Handle", "Invoker", "call_key", "call_payload", "call_payloads", "check_appends", "find_handler"
]


def find_handler(handlers: Mapping[str, Handler], name: str) -> Handler:
    """The handler called ``name``; a one-line error names the close match and the known ones."""
    found = handlers.get(name)
    if found is not None:
        return found
    known = ", ".join(sorted(handlers)) or "none"
    close = difflib.get_close_matches(name, list(handlers), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigurationError(f"unknown handler {name!r}{hint}; the app's handlers: {known}")


def handlers_of(source: Any) -> dict[str, Handler]:
    """Handlers from an ``App`` (its ``handlers``), a mapping, or an iterable of ``Handler``."""
    if hasattr(source, "handlers"):
        source = source.handlers
    if isinstance(source, Mapping):
        return dict(source)
    return {handler.name: handler for handler in source}


def check_record(handler: str, record: Any) -> None:
    """A record the store can keep: JSON, without a NUL character (``types.json_text``)."""
    json_text(record, "the payload")


def _bad_record(handler: str, index: int, count: int, error: InvalidInput) -> InvalidRecord:
    """``error`` about one record, as an ``InvalidRecord`` naming the handler and the record's place."""
    reason = f"handler {handler!r}: {error}"
    message = reason if count == 1 else f"handler {handler!r}, record {index + 1} of {count}: {error}"
    return InvalidRecord(message, index=index, reason=reason)


#: The command (and method) that fits each model, for the message refusing the others.
_FITS = {
    Model.SYNC: "vardiya invoke call (Invoker.call)",
    Model.ASYNC: "vardiya invoke submit (Invoker.submit)",
    Model.STREAM: "vardiya invoke append (Invoker.append)",
}


def _refuse_model(handler: Handler, why: str) -> NoReturn:
    raise InvalidInput(
        f"handler {handler.name!r} is a {handler.model.value} handler: {why}; use {_FITS[handler.model]}"
    )


def _given_keys(what: str, records: list[Any], keys: Iterable[str | None] | None) -> list[str | None]:
    given: list[str | None] = list(keys) if keys is not None else [None] * len(records)
    if len(given) != len(records):
        raise InvalidInput(f"{what} got {len(records)} records but {len(given)} keys")
    return given


def random_keys(count: int) -> list[str]:
    """``count`` random item keys of 32 hex digits (128 random bits, as ``uuid4().hex`` has 122).

    One ``urandom`` read for all of them: ``uuid4`` per key was a seventh of a bulk submit's Python.
    """
    digits = os.urandom(16 * count).hex()
    return [digits[start : start + 32] for start in range(0, 32 * count, 32)]


def call_payloads(
    handler: Handler, records: list[Any], keys: Iterable[str | None] | None = None
) -> list[tuple[str, str]]:
    """(item key, payload JSON text) of each async call of ``records``, all checked before any is stored.

    Pure: the CLI runs it before it opens the store, so bad input writes nothing, not even a new
    SQLite file. A sync handler is refused; a bad record is an ``InvalidRecord``. Each record is
    encoded once, by its check, and its payload (``{"record": ..., "dedup_key": ...}``) is that text
    wrapped, which is the text ``dumps_json`` makes of the payload.
    """
    if handler.model is Model.SYNC:
        _refuse_model(handler, "its caller waits for the result, so a call cannot be submitted for a worker")
    given = _given_keys("submit_many", records, keys)
    payloads: list[tuple[str, str]] = []
    count = len(records)
    name = handler.name
    dedup = handler.dedup
    fresh = random_keys(count)
    for index, (record, key) in enumerate(zip(records, given, strict=True)):
        try:
            payloads.append(_call_payload(dedup, record, key, fresh[index]))
        except InvalidInput as error:
            raise _bad_record(name, index, count, error) from None
    return payloads


def call_payload(handler: Handler, record: Any, key: str | None = None) -> tuple[str, str]:
    """``call_payloads`` of one record (a single submit), without the lists."""
    if handler.model is Model.SYNC:
        _refuse_model(handler, "its caller waits for the result, so a call cannot be submitted for a worker")
    try:
        return _call_payload(handler.dedup, record, key, os.urandom(16).hex())
    except InvalidInput as error:
        raise _bad_record(handler.name, 0, 1, error) from None


def _call_payload(dedup: Any, record: Any, key: str | None, random_key: str) -> tuple[str, str]:
    """(item key, payload JSON text) of one call: with ``Dedup`` the item key is random and the dedup
    key goes into the payload; without, a given key is the item's idempotency key."""
    text = json_text(record, "the payload")
    if dedup is not None:
        dedup_key = dumps_json(dedup.key_of(record, key))
        return random_key, f'{{"record":{text},"dedup_key":{dedup_key}}}'
    item_key = random_key if key is None else check_key(key, "an idempotency key (key=, --key)")
    return item_key, f'{{"record":{text}}}'


def call_key(handler: Handler, record: Any, key: str | None = None) -> str | None:
    """The dedup key of a sync call of ``record`` (None without ``Dedup``), the record checked; pure.

    A key given to a handler without ``Dedup`` is refused: a sync call stores nothing it could key.
    """
    if key is not None and handler.dedup is None:
        raise InvalidInput(
            f"handler {handler.name!r} has no Dedup, so a call has nothing to do with the key {key!r}; "
            "declare dedup=Dedup(...) on the handler, or call without a key"
        )
    try:
        check_record(handler.name, record)
        return handler.dedup.key_of(record, key) if handler.dedup else None
    except InvalidInput as error:
        raise _bad_record(handler.name, 0, 1, error) from None


def check_appends(handler: Handler, records: list[Any], keys: Iterable[str | None] | None = None) -> list[str | None]:
    """The order keys of ``records`` for the handler's stream, every record checked; pure, as
    ``call_payloads``. Only a stream handler takes appends. With ``Dedup`` each record's dedup key is
    computed too, so a key function that fails on a record refuses it now, not its batch in a worker."""
    if handler.model is not Model.STREAM:
        _refuse_model(handler, "only a stream handler's records are consumed, so appended ones would never run")
    given = _given_keys("append_many", records, keys)
    count = len(records)
    for index, (record, key) in enumerate(zip(records, given, strict=True)):
        try:
            check_record(handler.name, record)
            if key is not None:
                check_key(key, "a stream's order key")
            if handler.dedup is not None:
                handler.dedup.key_of(record)
        except InvalidInput as error:
            raise _bad_record(handler.name, index, count, error) from None
    return given


@dataclass(frozen=True)
class Handle:
    """What an async submit returns: the id of the stored request.

    ``result(timeout=...)`` waits for the handler's return value (``Invoker.wait``). Two handles of one
    request are equal whichever invoker made them.
    """

    id: int
    handler: str
    invoker: Invoker | None = field(default=None, compare=False, repr=False)

    def result(self, timeout: float | timedelta | None = None) -> Any:
        """The handler's return value once the call has succeeded; see ``Invoker.wait``."""
        if self.invoker is None:
            raise ConfigurationError(
                f"handle {self.id} was made without an Invoker; wait with Invoker(store, app).wait(handle)"
            )
        return self.invoker.wait(self, timeout=timeout)


@dataclass(frozen=True, kw_only=True)
class CallStatus:
    """Where an async invocation stands; ``queue`` is the named queue it waits in (``default``)."""

    id: int
    handler: str
    queue: str
    state: ItemState
    attempts: int
    max_attempts: int
    result: Any
    error: str | None
    history: list[Attempt]


class Invoker:
    """Invoke an app's handlers under their models; keeps the caller-side tally (waits, sync calls)."""

    def __init__(self, store: Store | None, handlers: Any, *, clock: Clock | None = None) -> None:
        self.store = store
        self.handlers = handlers_of(handlers)
        self.clock = clock or (store.clock if store is not None else SystemClock())
        self._tallies: dict[str, Tally] = {}
        #: Per handler, the caller's wait over its async and stream records: [total ms, records].
        #: Two numbers, not one entry per record: a long-lived process that submits keeps a bounded
        #: tally (``metrics`` reports only the mean).
        self._waits: dict[str, list[float]] = {}

    def handler(self, name: str) -> Handler:
        return find_handler(self.handlers, name)

    def _store(self, what: str) -> Store:
        if self.store is None:
            raise ConfigurationError(f"{what} needs a store; give the Invoker one (open_store(...))")
        return self.store

    def _wait(self, name: str, began: float, records: int) -> None:
        """Record the caller's wait: a bulk submit or append shares its time among its records."""
        if records <= 0:
            return
        waited = (self.clock.monotonic() - began) * 1000.0
        tally = self._waits.get(name)
        if tally is None:
            self._waits[name] = [waited, float(records)]
        else:
            tally[0] += waited
            tally[1] += records

    # -- sync ---------------------------------------------------------------------------------------

    def call(self, name: str, record: Any, *, key: str | None = None) -> Any:
        """Run the handler now and return its result; the caller's retries apply; errors are raised.

        With dedup, a record whose key already succeeded within the window returns the stored result
        without running the handler. A call longer than the handler's ``sla`` is logged and counted
        (``vardiya status``'s ``sla_missed``), as a worker's call is.
        """
        handler = self.handler(name).with_model(Model.SYNC)
        dedup_key = call_key(handler, record, key)
        began = self.clock.monotonic()
        tally = self._tallies.setdefault(name, Tally())
        tally.unique += 1
        gate = StoreGate(self.store, handler, None) if self.store is not None else None
        entry = BatchRecord(offset=0, key=key, record=record, arrived_ms=0, dedup_key=dedup_key)
        call = 1
        try:
            while True:
                outcome = run_attempt(handler, [entry], clock=self.clock, gate=gate)
                tally.add_calls(outcome.calls)
                note_sync_calls(self.store, self.clock, handler, outcome.calls, key=dedup_key)
                if outcome.skipped:
                    return outcome.skipped[0][1]
                if outcome.done:
                    return outcome.succeeded[0][1]
                delay = handler.caller_retry.delay_after(call)
                if delay is None:
                    tally.caller_errors += 1
                    raise outcome.exceptions.get(0) or RuntimeError(outcome.errors.get(0, "failed"))
                self.clock.sleep(delay)
                call += 1
        finally:
            tally.waits.add((self.clock.monotonic() - began) * 1000.0)

    # -- async --------------------------------------------------------------------------------------

    def submit(self, name: str, record: Any, *, key: str | None = None) -> Handle:
        """Store the request and return its handle; a worker runs it (the engine owns the retries).

        ``key``: with ``Dedup``, the record's dedup key (else the key function's); without, the work
        item's idempotency key: a second submit with the same key stores nothing and returns the first
        handle (as an SQS FIFO MessageDeduplicationId or a Celery task_id would). A sync handler is
        refused: its caller waits, so there is nothing to submit (use ``call``).
        """
        handler = self.handler(name)
        began = self.clock.monotonic()
        item_key, text = call_payload(handler, record, key)
        item_id = self._store("submit").items.enqueue_text_id(
            handler.call_kind, item_key, text, max_attempts=handler.retry.max_attempts, wake=True,
            queue=handler.queue,
        )
        self._wait(name, began, 1)
        return Handle(item_id, handler.name, self)

    def submit_many(
        self, name: str, records: Iterable[Any], *, keys: Iterable[str | None] | None = None
    ) -> list[Handle]:
        """Store many requests in one go (each checked before any is stored); their handles, in order.

        ``keys`` as for ``submit``: records given the same key without ``Dedup`` are one item (one handle).
        A bad record is an ``InvalidRecord`` whose ``index`` says which.
        """
        handler = self.handler(name)
        began = self.clock.monotonic()
        records = list(records)
        given = list(keys) if keys is not None else None
        payloads = call_payloads(handler, records, given)
        store = self._store("submit")
        kind = handler.call_kind
        # Records given no key (or any, with Dedup) get random item keys, which no item has yet.
        fresh = handler.dedup is not None or given is None or all(key is None for key in given)
        ids = store.items.enqueue_texts_ids(
            kind, payloads, max_attempts=handler.retry.max_attempts, wake=True, queue=handler.queue,
            fresh_keys=fresh,
        )
        handles = self._handles(store, kind, [item_key for item_key, _ in payloads], ids)
        self._wait(name, began, len(records))
        return handles

    def _handles(self, store: Store, kind: str, item_keys: list[str], ids: dict[str, int]) -> list[Handle]:
        """The handles of ``item_keys``: ``ids`` has the new items; any other key is read from the store."""
        missing = [item_key for item_key in item_keys if item_key not in ids]
        if missing:
            ids.update(store.invocations.ids_by_key(kind, missing))
        name = kind.split(":", 1)[1]
        return [Handle(ids[item_key], name, self) for item_key in item_keys]

    def wait(self, handle: Handle | int, *, timeout: float | timedelta | None = None) -> Any:
        """Wait for an async call and return its handler's result (Celery's ``AsyncResult.get``).

        ``timeout``: seconds (or a timedelta) of this invoker's clock; None waits as long as it takes.
        Raises ``CallDeadLettered`` when the call ended as a dead letter (its error line; the traceback
        is in ``vardiya dlq show ID``), ``CallTimedOut`` when the timeout passed first (the call stays
        stored), ``ResultTooLarge`` when its result was over what the store keeps. A failed attempt with
        attempts left is waited through. The wait sleeps on the store's wake-up (``invoke.results``),
        so it returns as soon as a worker records the outcome.
        """
        seconds = check_timeout(timeout)
        store = self._store("wait")
        item_id = handle.id if isinstance(handle, Handle) else handle
        if isinstance(item_id, bool) or not isinstance(item_id, int):
            raise InvalidInput(f"a handle is a Handle or its integer id, got {handle!r}")
        waiter = ResultWaiter(store, self.clock)
        try:
            return waiter.wait(item_id, seconds)
        finally:
            waiter.close()

    def status(self, handle: Handle | int) -> CallStatus:
        """Where an async invocation stands, with its attempt history; an unknown handle is an error."""
        store = self._store("status")
        item_id = handle.id if isinstance(handle, Handle) else handle
        item = store.items.get(item_id)
        if item is None or not item.kind.startswith("call:"):
            raise InvalidInput(f"no async invocation has handle {item_id}; handles come from submit()")
        return CallStatus(
            id=item.id,
            handler=item.kind.split(":", 1)[1],
            queue=store.items.queue_of(item.id) or "default",
            state=item.state,
            attempts=item.attempts,
            max_attempts=item.max_attempts,
            result=item.result,
            error=item.last_error,
            history=store.items.history(item.id),
        )

    # -- stream -------------------------------------------------------------------------------------

    def append(self, name: str, record: Any, *, key: str | None = None) -> int:
        """Append a record to the handler's stream; returns its offset. ``key`` keeps order per key.

        Only a stream handler has a stream a worker consumes: any other is refused (use ``submit`` or
        ``call``).
        """
        return self.append_many(name, [record], keys=[key])[0]

    def append_many(self, name: str, records: Iterable[Any], *, keys: Iterable[str | None] | None = None) -> list[int]:
        """Append records in order (each checked before any is stored, ``check_appends``); returns their
        offsets."""
        handler = self.handler(name)
        began = self.clock.monotonic()
        records = list(records)
        given = check_appends(handler, records, keys)
        store = self._store("append")
        offsets = Streams(store).append_many(
            handler.name,
            list(zip(given, records, strict=True)),
            lanes=handler.lanes if handler.ordered else 1,
            kind=handler.batch_kind,
        )
        self._wait(name, began, len(records))
        return offsets

    # -- per configuration --------------------------------------------------------------------------

    def invoke(self, name: str, record: Any, *, key: str | None = None) -> Any:
        """Invoke under the handler's configured model: a result (sync), a handle (async), an offset."""
        model = self.handler(name).model
        if model is Model.SYNC:
            return self.call(name, record, key=key)
        if model is Model.ASYNC:
            return self.submit(name, record, key=key)
        return self.append(name, record, key=key)

    # -- metrics ------------------------------------------------------------------------------------

    def metrics(self, name: str, *, model: Model | str | None = None, prices: Prices | None = None) -> Metrics:
        """This run's metrics for a handler: the sync tally, or the store's figures for async/stream."""
        handler = self.handler(name)
        if model is not None:
            handler = handler.with_model(model)
        if handler.model is Model.SYNC:
            return self._tallies.get(name, Tally()).metrics(handler, prices)
        waits = self._waits.get(name)
        wait = waits[0] / waits[1] if waits else None
        return store_metrics(self._store("metrics"), handler, prices=prices, caller_wait_ms=wait)
