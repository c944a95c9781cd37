"""Bad input at the store's API and the Python API, on both backends: one ``VardiyaError``, nothing written.

Each case asserts the exception class, its one-line message, and that the store's whole content is
unchanged; inputs SQLite would keep and PostgreSQL would refuse (a long kind, a NUL in a payload) are
refused on both with the same message, and the largest accepted values are stored on both.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.snapshot import store_content
from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput, InvalidRecord, VardiyaError
from vardiya.invoke.handlers import Dedup
from vardiya.invoke.invoker import Invoker
from vardiya.limits import KEY_MAX, KIND_MAX, TIME_MAX
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.slots.job import SlotJob
from vardiya.slots.runner import replay, run_tick
from vardiya.slots.scheme import SlotScheme
from vardiya.slots.sources import IterableSource
from vardiya.store import LedgerEntry, LedgerStatus, Store, open_store
from vardiya.store.streams import Streams


def _app() -> App:
    app = App("edges")

    def echo(record: Any, context: Any) -> Any:
        return record

    app.handler("plain", model="async")(echo)
    app.handler("keyed", model="async", dedup=Dedup(key=lambda r: str(r["id"])))(echo)
    app.handler("keyed_stream", model="stream", dedup=Dedup(key=lambda r: str(r["id"])))(echo)
    app.handler("now", model="sync")(echo)
    return app


def _job() -> SlotJob:
    return SlotJob(name="nightly", scheme=SlotScheme(slots=24, tz="Europe/Istanbul"),
                   source=IterableSource(range(1, 49)), handler=lambda ids, context: None)


def _refused(store_url: str, error: type[VardiyaError], fragments: list[str], action: Callable[[], Any]) -> str:
    """Run ``action``: it raises ``error`` (one line holding every fragment) and the store is unchanged."""
    before = store_content(store_url)
    with pytest.raises(error) as raised:
        action()
    message = str(raised.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert store_content(store_url) == before
    return message


CASES: dict[str, tuple[type[VardiyaError], list[str], Callable[[Store], Any]]] = {
    "a 10,000-character kind": (
        InvalidInput, ["a work-item kind must be 1 to 200", "(10000 characters)"],
        lambda store: store.items.enqueue("k" * 10_000, {}),
    ),
    "a kind with a space": (InvalidInput, ["a work-item kind", "got 'a kind'"], lambda store: store.items.enqueue("a kind", {})),
    "a 501-character key": (
        InvalidInput, ["the key of a call:x item must be 1 to 500 characters", "is 501 characters long"],
        lambda store: store.items.enqueue("call:x", {}, key="k" * 501),
    ),
    "a key with a NUL": (InvalidInput, ["holds a control character"], lambda store: store.items.enqueue("x", {}, key="a\x00b")),
    "a NUL in a payload": (
        InvalidInput, ["payload of x item", "holds a NUL character (U+0000)"],
        lambda store: store.items.enqueue("x", {"note": "a\x00b"}, key="k1"),
    ),
    "a NUL in one payload of many": (
        InvalidInput, ["holds a NUL character"],
        lambda store: store.items.enqueue_many("x", [("k1", {"n": 1}), ("k2", ["\x00"])]),
    ),
    "a NUL in a key of a payload": (
        InvalidInput, ["holds a NUL character"], lambda store: store.items.enqueue("x", {"a\x00": 1}),
    ),
    "a NUL in a stream record": (
        InvalidInput, ["a record appended to stream 's'", "holds a NUL character"],
        lambda store: Streams(store).append_many("s", [(None, {"n": 1}), (None, "\x00")]),
    ),
    "a long stream name": (
        InvalidInput, ["a stream name must be 1 to 190"], lambda store: Streams(store).append_many("s" * 191, [(None, 1)]),
    ),
    "a ledger entry of an unknown status": (
        InvalidInput, ["status must be one of: done, failed", "got 'exploded'"],
        lambda store: store.ledger.mark("job", "p", [LedgerEntry(record=1, status="exploded")]),  # type: ignore[arg-type]
    ),
    "a ledger entry without a record": (
        InvalidInput, ["record must be an int or a str id, got None"],
        lambda store: store.ledger.mark("job", "p", [LedgerEntry(record=None, status=LedgerStatus.DONE)]),  # type: ignore[arg-type]
    ),
    "a ledger entry of a 501-character record": (
        InvalidInput, ["a ledger entry's record id must be 1 to 500"],
        lambda store: store.ledger.mark("job", "p", [LedgerEntry(record="r" * 501, status=LedgerStatus.DONE)]),
    ),
    "a ledger mark of something else": (
        InvalidInput, ["ledger.mark takes LedgerEntry values, got (1, 'done')"],
        lambda store: store.ledger.mark("job", "p", [LedgerEntry(record=1, status=LedgerStatus.DONE), (1, "done")]),  # type: ignore[list-item]
    ),
    "a ledger job name too long": (
        InvalidInput, ["a ledger job name must be 1 to 190"],
        lambda store: store.ledger.mark("j" * 191, "p", [LedgerEntry(record=1, status=LedgerStatus.DONE)]),
    ),
    "a ledger period too long": (
        InvalidInput, ["a ledger period must be 1 to 64"],
        lambda store: store.ledger.mark("job", "p" * 65, [LedgerEntry(record=1, status=LedgerStatus.DONE)]),
    ),
    "a dedup key function that fails on the payload": (
        InvalidRecord, ["handler 'keyed', record 2 of 2", "the dedup key function _app.<locals>.<lambda> (test_bad_input_edges.py, line", "raised TypeError"],
        lambda store: Invoker(store, _app()).submit_many("keyed", [{"id": 1}, [1, 2]]),
    ),
    "a dedup key function that fails on an appended record": (
        InvalidRecord, ["handler 'keyed_stream'", "the dedup key function _app.<locals>.<lambda> (test_bad_input_edges.py, line", "raised KeyError"],
        lambda store: Invoker(store, _app()).append("keyed_stream", {"no_id": 1}),
    ),
    "a NUL in a submitted payload": (
        InvalidRecord, ["handler 'plain'", "holds a NUL character"], lambda store: Invoker(store, _app()).submit("plain", "\x00"),
    ),
    "submit to a sync handler": (
        InvalidInput, ["handler 'now' is a sync handler", "use vardiya invoke call (Invoker.call)"],
        lambda store: Invoker(store, _app()).submit("now", {"id": 1}),
    ),
    "append to an async handler": (
        InvalidInput, ["handler 'plain' is a async handler", "use vardiya invoke submit (Invoker.submit)"],
        lambda store: Invoker(store, _app()).append("plain", {"id": 1}),
    ),
    "append to a sync handler": (
        InvalidInput, ["handler 'now' is a sync handler", "never run"], lambda store: Invoker(store, _app()).append_many("now", [1]),
    ),
    "a tick planned in year 1": (
        InvalidInput, ["planned time 0001-01-01T00:00:00+00:00 is outside", "1970-01-01T00:00Z to 9000-01-01T00:00Z"],
        lambda store: run_tick(store, _job(), datetime(1, 1, 1, tzinfo=UTC)),
    ),
    "a tick planned in year 9999": (
        InvalidInput, ["planned time 9999-12-31T23:59:00+00:00 is outside"],
        lambda store: run_tick(store, _job(), datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
    ),
    "a replay to year 9999": (
        InvalidInput, ["end 9999-12-31T00:00:00+00:00 is outside"],
        lambda store: replay(store, _job(), datetime(2026, 12, 1, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_error_and_writes_nothing(store: Store, store_url: str, case: str) -> None:
    error, fragments, action = CASES[case]
    _refused(store_url, error, fragments, lambda: action(store))


def test_a_virtual_clock_near_the_end_of_the_calendar_is_refused_before_any_write(store_url: str) -> None:
    near_max = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    _refused(store_url, InvalidInput, ["VirtualClock start 9999-12-31T23:00:00+00:00 is outside"], lambda: VirtualClock(near_max))
    clock = VirtualClock(TIME_MAX - timedelta(seconds=10))
    with pytest.raises(InvalidInput, match="it would pass 9000-01-01T00:00:00"):
        clock.advance(60)
    with pytest.raises(InvalidInput, match="VirtualClock time 0001-01-01"):
        clock.set(datetime(1, 1, 1, tzinfo=UTC))
    with open_store(store_url, clock=clock) as store:  # the last supported minutes still work
        store.items.enqueue("x", {"n": 1}, key="late")
        [item] = store.items.claim(1, owner="w", lease=5)
        store.items.complete(item.id, owner="w")


def test_the_largest_names_and_keys_are_stored_alike_on_both_backends(store: Store) -> None:
    kind = "k" * KIND_MAX
    key = "\U0001f600" * KEY_MAX  # 500 four-byte characters: the widest index entry a key can make
    item = store.items.enqueue(kind, {"text": "\\u0000 is a backslash and five characters here"}, key=key)
    again = store.items.get(item.id)
    assert again is not None and (again.kind, again.key) == (kind, key)
    assert again.payload == {"text": "\\u0000 is a backslash and five characters here"}
    store.ledger.mark("j" * 190, "p" * 64, [LedgerEntry(record=key, status=LedgerStatus.DONE)])
    assert store.ledger.completed("j" * 190, key, "p" * 64)


def test_submit_key_without_dedup_is_the_items_idempotency_key(store: Store) -> None:
    invoker = Invoker(store, _app())
    first = invoker.submit("plain", {"id": 1}, key="order-42")
    second = invoker.submit("plain", {"id": 1}, key="order-42")  # a retry of the submit: stores nothing
    assert second == first
    other = invoker.submit("plain", {"id": 1}, key="order-43")
    unkeyed = [invoker.submit("plain", {"id": 1}) for _ in range(2)]  # without a key every submit is a call
    assert len({first.id, other.id, *(handle.id for handle in unkeyed)}) == 4
    assert len(store.items.list(kind="call:plain")) == 4
    report = Worker(store, _app(), WorkerSettings(heartbeat=False)).run(until_idle=True)
    assert report.succeeded == 4
    assert invoker.submit("plain", {"id": 1}, key="order-42") == first  # still the same call once it ran
    with pytest.raises(InvalidRecord, match="an idempotency key"):
        invoker.submit("plain", {"id": 1}, key="")


def test_a_nul_payload_is_refused_alike_and_its_escaped_text_round_trips(store: Store, store_url: str) -> None:
    text = {"a": "C:\\u0000dir", "b": "\\\\u0000", "c": "\\"}
    item = store.items.enqueue("x", text, key="round-trip")
    assert store.items.get(item.id).payload == text  # type: ignore[union-attr]
    [offset] = Streams(store).append_many("s", [(None, text)])
    assert offset > 0
    message = _refused(store_url, InvalidInput, ["holds a NUL character"], lambda: store.items.enqueue("x", {"a": "\\\x00"}))
    assert "remove it, or encode binary data" in message


def test_names_are_checked_when_declared() -> None:
    app = App("edges")
    for name, fragment in [("h" * 191, "(191 characters)"), ("a b", "got 'a b'"), ("call:x", "got 'call:x'"), ("", "got ''")]:
        with pytest.raises(InvalidInput, match="a handler name must be 1 to 190 ASCII letters") as raised:
            app.handler(name, model="async")(lambda record, context: None)
        assert fragment in str(raised.value)
    with pytest.raises(InvalidInput, match="a slot job name"):
        SlotJob(name="x" * 191, scheme=SlotScheme(slots=24), source=IterableSource([1]), handler=lambda ids, context: None)
