"""``vardiya app show``: every slot job, handler, periodic function, pipeline and trigger an app registers.

Read from the declarations alone: no store is opened, so it also answers "what would this app do?"
before it is deployed.
"""

from __future__ import annotations

import click
from rich.markup import escape

from ..app import load_app
from ..catalog import catalog
from ..output import FitTable
from .commands import Group
from .context import Settings, emit_json, global_options, pass_settings

__all__ = ["app_group"]


@click.group("app", cls=Group)
@global_options
def app_group() -> None:
    """What an app (--app) registers."""


@app_group.command("show")
@global_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def show(settings: Settings, as_json: bool) -> int:
    """List every slot job, handler, periodic function, pipeline and trigger of --app, with its schedule and model."""
    app = load_app(settings.app)
    entries = catalog(app)
    if as_json:
        emit_json({"app": app.name, "entries": [entry.to_json() for entry in entries]})
        return 0
    table = FitTable(title=f"app {escape(app.name)}: {len(entries)} registered")
    table.add_column("kind")
    table.add_column("name")
    table.add_column("schedule", wrap=True)
    table.add_column("model", wrap=True)
    table.add_column("runs")
    for entry in entries:
        table.add_row(entry.kind.value, escape(entry.name), escape(entry.schedule), escape(entry.model), escape(entry.function))
    settings.console.print(table)
    if not entries:
        settings.console.print("nothing registered: declare a slot job, a handler, a periodic function or a pipeline")
    return 0
