"""A scripted workload for the invocation tests: records whose outcomes are known in advance."""

from __future__ import annotations

from typing import Any

from vardiya.app import App
from vardiya.invoke import FixedWait, RetryPolicy
from vardiya.invoke.handlers import Dedup

RETRY = RetryPolicy(max_attempts=3, wait=FixedWait(seconds=60))


def outcomes(n: int, *, poison_every: int = 97, transient_every: int = 13) -> dict[int, str]:
    """Record id -> ok / transient (fails its first processing) / poison (never passes)."""
    return {
        i: "poison" if i % poison_every == 0 else "transient" if i % transient_every == 0 else "ok"
        for i in range(1, n + 1)
    }


class Scripted:
    """A handler whose outcome per record follows ``outcomes``; it counts every processing."""

    def __init__(self, table: dict[int, str]) -> None:
        self.table = table
        self.processed: dict[int, int] = {}

    def __call__(self, record: Any, context: Any) -> Any:
        rid = record["id"]
        self.processed[rid] = self.processed.get(rid, 0) + 1
        outcome = self.table[rid]
        if outcome == "poison":
            raise ValueError(f"reading {rid} is poison")
        if outcome == "transient" and context.attempt == 1:
            raise TimeoutError(f"reading {rid}: the meter API timed out")
        return {"id": rid, "valid": True}


def workload_app(table: dict[int, str], *, batch_size: int = 50, dedup: bool = False) -> tuple[App, Scripted]:
    """One scripted function under every model and policy."""
    fn = Scripted(table)
    app = App("workload")
    keyed = Dedup(window=24 * 3600, key=lambda record: str(record["id"])) if dedup else None
    app.handler("v_sync", model="sync", dedup=keyed)(fn)
    app.handler("v_async", model="async", retry=RETRY, dedup=keyed)(fn)
    for policy in ("retry_batch", "bisect", "report_failures"):
        app.handler(f"v_{policy}", model="stream", batch_size=batch_size, policy=policy, retry=RETRY, dedup=keyed)(fn)
    return app, fn


def records(n: int) -> list[dict[str, int]]:
    return [{"id": i} for i in range(1, n + 1)]
