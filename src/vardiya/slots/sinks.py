"""Atomic file outputs and idempotent table upserts: ``vardiya.connectors.sinks``, re-exported."""

from __future__ import annotations

from ..connectors.sinks import atomic_write, output_path, upsert

__all__ = ["atomic_write", "output_path", "upsert"]
