"""``vardiya demo``: the main job on embedded SQLite, no server needed."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from ..demo import run_demo
from .context import Settings, emit_json, pass_settings

__all__ = ["demo"]


@click.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("vardiya-demo"),
    show_default=True,
    help="Where the demo keeps its store and outputs; replaced on every run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the demo's figures as one JSON document.")
@pass_settings
def demo(settings: Settings, directory: Path, as_json: bool) -> None:
    """Run the main job end to end on a fresh embedded SQLite store."""
    console = Console(quiet=True) if as_json else settings.console
    result = run_demo(directory, console)
    if as_json:
        emit_json({"directory": str(result.directory), "store": result.store_url, "sections": result.sections})
