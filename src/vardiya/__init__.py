"""vardiya: periodic data work that is deterministic, idempotent and cheap to run.

Every record gets its shift: slot scheduling, invocation models and partitioned pipelines on one
engine, with state in SQLite or PostgreSQL.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .app import App, load_app
from .clock import Clock, SystemClock, VirtualClock
from .errors import (
    AppNotFound,
    CallDeadLettered,
    CallError,
    CallTimedOut,
    ConfigurationError,
    InvalidDatabaseURL,
    InvalidInput,
    InvalidRecord,
    LeaseLost,
    NotAStore,
    ResultTooLarge,
    SchemaOutdated,
    SchemaTooNew,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    UndeclaredRead,
    VardiyaError,
)
from .invoke import (
    CallerRetry,
    Dedup,
    ExponentialWait,
    FailurePolicy,
    FixedWait,
    Handler,
    Invoker,
    Model,
    RetryPolicy,
    WorkerSettings,
)
from .schedule import CatchUpPolicy, Cron, DataArrival, PeriodClose, Upstream
from .service.worker import Worker
from .slots import (
    IterableSource,
    RecordResult,
    SchemeChange,
    SlotJob,
    SlotScheme,
    SqlTableSource,
    TickContext,
    atomic_write,
    output_path,
    replay,
    run_tick,
    upsert,
)
from .store import (
    Attempt,
    AttemptOutcome,
    DedupKey,
    DedupOutcome,
    ItemState,
    LedgerEntry,
    LedgerRow,
    LedgerStatus,
    Store,
    WorkItem,
    open_store,
)

try:
    __version__ = version("vardiya")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
    __version__ = "0.0.0"

__all__ = [
    "App",
    "AppNotFound",
    "Attempt",
    "AttemptOutcome",
    "CallDeadLettered",
    "CallError",
    "CallTimedOut",
    "CallerRetry",
    "CatchUpPolicy",
    "Clock",
    "ConfigurationError",
    "Cron",
    "DataArrival",
    "Dedup",
    "DedupKey",
    "DedupOutcome",
    "ExponentialWait",
    "FailurePolicy",
    "FixedWait",
    "Handler",
    "InvalidDatabaseURL",
    "InvalidInput",
    "InvalidRecord",
    "Invoker",
    "ItemState",
    "IterableSource",
    "LeaseLost",
    "LedgerEntry",
    "LedgerRow",
    "LedgerStatus",
    "Model",
    "NotAStore",
    "PeriodClose",
    "RecordResult",
    "ResultTooLarge",
    "RetryPolicy",
    "SchemaOutdated",
    "SchemaTooNew",
    "SchemeChange",
    "SlotJob",
    "SlotScheme",
    "SqlTableSource",
    "Store",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "SystemClock",
    "TickContext",
    "UndeclaredRead",
    "Upstream",
    "VardiyaError",
    "VirtualClock",
    "WorkItem",
    "Worker",
    "WorkerSettings",
    "__version__",
    "atomic_write",
    "load_app",
    "open_store",
    "output_path",
    "replay",
    "run_tick",
    "upsert",
]
