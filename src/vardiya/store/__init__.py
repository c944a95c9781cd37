"""The state store: work items, the ledger and dedup keys on SQLite or PostgreSQL."""

from __future__ import annotations

from .api import Store, open_store, store_version, upgrade_store
from .migrate import SchemaState, SchemaVersion, head_revision
from .records import (
    Attempt,
    AttemptOutcome,
    DedupKey,
    DedupOutcome,
    ItemState,
    LedgerEntry,
    LedgerRow,
    LedgerStatus,
    WorkItem,
)
from .url import DEFAULT_URL, Backend, StoreURL, parse_store_url

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "Backend",
    "DEFAULT_URL",
    "DedupKey",
    "DedupOutcome",
    "ItemState",
    "LedgerEntry",
    "LedgerRow",
    "LedgerStatus",
    "SchemaState",
    "SchemaVersion",
    "Store",
    "StoreURL",
    "WorkItem",
    "head_revision",
    "open_store",
    "parse_store_url",
    "store_version",
    "upgrade_store",
]
