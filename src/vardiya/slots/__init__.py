"""Slot scheduling: spread a periodic job's records over B slots of a period by a pure function of the id.

``SlotScheme`` is the arithmetic (id -> slot -> window, planned time -> (period, slot), the ticks to fire),
``hashing`` the versioned stable hash behind ``assign="hash"`` and its SQL form, ``balance`` the reports
that judge a scheme from the ids before anything runs.
"""

from __future__ import annotations

from .balance import BalanceReport, MigrationPlan, balance, migration_plan, parse_ids
from .hashing import (
    HASH_VERSION,
    RecordId,
    canonical_text,
    hash_slot,
    hash_slot_sql,
    mod_slot_sql,
    register_sqlite_functions,
    stable_hash,
)
from .index import SlotColumnKind, SlotIndexReport, add_slot_index
from .job import RecordResult, RunTimes, SchemeChange, SlotJob, TickContext
from .report import LedgerReport, ledger_report
from .runner import ReplayReport, TickReport, planned_ticks, replay, run_tick
from .scheme import (
    Assign,
    Layout,
    Period,
    PlannedTick,
    SlotPosition,
    SlotScheme,
    SlotWindow,
    parse_scheme,
)
from .sinks import atomic_write, output_path, upsert
from .sources import IterableSource, Source
from .sql_source import SqlTableSource, slot_column_name

__all__ = [
    "Assign",
    "BalanceReport",
    "HASH_VERSION",
    "IterableSource",
    "Layout",
    "LedgerReport",
    "MigrationPlan",
    "Period",
    "PlannedTick",
    "RecordId",
    "RecordResult",
    "ReplayReport",
    "RunTimes",
    "SchemeChange",
    "SlotColumnKind",
    "SlotIndexReport",
    "SlotJob",
    "SlotPosition",
    "SlotScheme",
    "SlotWindow",
    "Source",
    "SqlTableSource",
    "TickContext",
    "TickReport",
    "add_slot_index",
    "atomic_write",
    "balance",
    "canonical_text",
    "hash_slot",
    "hash_slot_sql",
    "ledger_report",
    "migration_plan",
    "mod_slot_sql",
    "output_path",
    "parse_ids",
    "parse_scheme",
    "planned_ticks",
    "register_sqlite_functions",
    "replay",
    "run_tick",
    "slot_column_name",
    "stable_hash",
    "upsert",
]
