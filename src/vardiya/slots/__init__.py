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

__all__ = [
    "Assign",
    "BalanceReport",
    "HASH_VERSION",
    "Layout",
    "MigrationPlan",
    "Period",
    "PlannedTick",
    "RecordId",
    "SlotPosition",
    "SlotScheme",
    "SlotWindow",
    "balance",
    "canonical_text",
    "hash_slot",
    "hash_slot_sql",
    "migration_plan",
    "mod_slot_sql",
    "parse_ids",
    "parse_scheme",
    "register_sqlite_functions",
    "stable_hash",
]
