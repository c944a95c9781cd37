"""A sync call over its handler's sla is logged, counted in the store and exported, as a worker's
async call is (issue 16): the status document and Prometheus read the same count."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from prometheus_client import generate_latest

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.invoke.handlers import Dedup
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.retry import CallerRetry
from vardiya.service.metrics import ServiceMetrics
from vardiya.service.status import status_report
from vardiya.store import Store
from vardiya.store.failures import FailureFamily


def _app(clock: VirtualClock) -> App:
    app = App("sync")

    @app.handler("quote", model="sync", sla=timedelta(seconds=2))
    def quote(record: dict[str, float], context: object) -> float:
        clock.advance(record["takes_s"])  # the handler's cost, on the virtual clock the store times by
        return record["takes_s"]

    return app


def test_a_sync_call_over_its_sla_is_logged_counted_and_exported(
    store: Store, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    invoker = Invoker(store, _app(clock))
    with caplog.at_level(logging.WARNING, logger="vardiya.sla"):
        assert invoker.call("quote", {"takes_s": 5.0}) == 5.0
    (line,) = [record for record in caplog.records if record.name == "vardiya.sla"]
    assert line.getMessage() == (
        "sla missed: handler quote (sync call) took 5.000 s, over its sla of 2.000 s"
    )
    (row,) = store.failures.sla_report()
    assert (row.family, row.name, row.missed, row.last_ref) == (FailureFamily.HANDLER, "quote", 1, "sync call")
    assert (row.expected_ms, row.last_took_ms) == (2000.0, 5000.0)
    assert row.last_at == clock.now()
    (shown,) = status_report(store)["sla_missed"]
    assert (shown["family"], shown["name"], shown["missed"]) == ("handler", "quote", 1)
    metrics = ServiceMetrics()
    metrics.watch(store)
    assert 'vardiya_sla_missed_total{family="handler",name="quote"} 1.0' in generate_latest(metrics.registry).decode()


def test_a_sync_call_within_its_sla_records_nothing(
    store: Store, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    invoker = Invoker(store, _app(clock))
    with caplog.at_level(logging.WARNING, logger="vardiya.sla"):
        assert invoker.call("quote", {"takes_s": 2.0}) == 2.0  # exactly its sla: not over it
        assert invoker.call("quote", {"takes_s": 0.5}) == 0.5
    assert [record for record in caplog.records if record.name == "vardiya.sla"] == []
    assert store.failures.sla_report() == []
    assert status_report(store)["sla_missed"] == []


def test_each_slow_call_of_a_retried_sync_call_counts_and_a_dedup_key_names_it(
    store: Store, clock: VirtualClock
) -> None:
    app = App("sync")
    calls: list[int] = []

    @app.handler(
        "charge", model="sync", sla=timedelta(seconds=1), dedup=Dedup(key=lambda record: f"card-{record}"),
        caller_retry=CallerRetry(count=2, delay_s=0),
    )
    def charge(record: int, context: object) -> int:
        calls.append(record)
        clock.advance(3)
        if len(calls) < 2:
            raise RuntimeError("gateway busy")
        return record

    assert Invoker(store, app).call("charge", 7) == 7
    (row,) = store.failures.sla_report()
    assert (row.missed, row.last_ref, row.last_took_ms) == (2, "sync call card-7", 3000.0)


def test_a_sync_call_without_a_store_is_only_logged(clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    invoker = Invoker(None, _app(clock), clock=clock)
    with caplog.at_level(logging.WARNING, logger="vardiya.sla"):
        assert invoker.call("quote", {"takes_s": 3.0}) == 3.0
    assert [record.getMessage() for record in caplog.records if record.name == "vardiya.sla"] == [
        "sla missed: handler quote (sync call) took 3.000 s, over its sla of 2.000 s"
    ]
