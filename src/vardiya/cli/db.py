"""``vardiya db``: schema versions of the state store."""

from __future__ import annotations

import click

from ..store import SchemaState, store_version, upgrade_store
from .commands import Group
from .context import Settings, emit_json, global_options, pass_settings

__all__ = ["db"]


@click.group(cls=Group)
def db() -> None:
    """Create, migrate and inspect the state store's schema."""


@db.command()
@global_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def upgrade(settings: Settings, as_json: bool) -> None:
    """Apply every migration the store lacks (safe to run from several machines at once)."""
    before, after = upgrade_store(settings.db)
    if as_json:
        emit_json({"from": before.current, "to": after.current, "head": after.head})
        return
    if before.current == after.current:
        settings.console.print(f"store is current at revision {after.current}")
    else:
        settings.console.print(f"upgraded store from {before.current or 'empty'} to {after.current}")


@db.command()
@global_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def current(settings: Settings, as_json: bool) -> None:
    """Show the store's schema revision and whether it is this vardiya's head. Writes nothing."""
    target, version = store_version(settings.db)
    if as_json:
        emit_json(
            {"url": target.display, "current": version.current, "head": version.head, "state": version.state.value}
        )
        return
    notes = {
        SchemaState.CURRENT: "(head)",
        SchemaState.EMPTY: "(empty: run `vardiya db upgrade`)",
        SchemaState.OUTDATED: f"(behind head {version.head}: run `vardiya db upgrade`)",
        SchemaState.TOO_NEW: f"(newer than this vardiya's head {version.head}: upgrade vardiya)",
    }
    settings.console.print(f"{target.display}: {version.current or 'no revision'} {notes[version.state]}")
