"""A table of the user's database as a slot job's source: ``vardiya.connectors.sql_source``, re-exported."""

from __future__ import annotations

from ..connectors.sql_source import SqlTableSource, slot_column_name

__all__ = ["SqlTableSource", "slot_column_name"]
