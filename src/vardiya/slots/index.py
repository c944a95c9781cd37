"""``vardiya slots index`` on the user's table: ``vardiya.connectors.slot_index``, re-exported."""

from __future__ import annotations

from ..connectors.slot_index import SlotColumnKind, SlotIndexReport, add_slot_index, index_name, slot_column_name

__all__ = ["SlotColumnKind", "SlotIndexReport", "add_slot_index", "index_name", "slot_column_name"]
