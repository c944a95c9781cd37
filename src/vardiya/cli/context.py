"""What every command shares: the settings from the global options, and the two kinds of output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from rich.console import Console

from ..clock import Clock
from ..store import Store, open_store

__all__ = ["Settings", "emit_json", "global_options", "pass_settings"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(kw_only=True)
class Settings:
    """The global options, as the group and the command gave them (the command's win)."""

    db: str | None = None
    app: str | None = None

    def open_store(self, *, clock: Clock | None = None, migrate: bool | None = None) -> Store:
        """The store the options point at (``--db``, else ``VARDIYA_DB``, else ./vardiya.db)."""
        return open_store(self.db, clock=clock, migrate=migrate)

    @property
    def console(self) -> Console:
        """Where output for people goes: Rich on stdout, colours only on a terminal.

        Its width is the terminal's, or ``COLUMNS``, or 80 when piped; the tables of every command
        (``vardiya.output.FitTable``) fit it without cutting a cell.
        """
        return Console(highlight=False)


pass_settings = click.make_pass_decorator(Settings, ensure=True)


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(context: click.Context, _parameter: click.Parameter, value: Any) -> None:
        if value is not None:
            setattr(context.ensure_object(Settings), name, value)

    return callback


def global_options(command: F) -> F:
    """``--db`` and ``--app``, accepted before the command name and after it alike."""
    command = click.option(
        "--app",
        metavar="MODULE_OR_FILE:ATTR",
        envvar="VARDIYA_APP",
        expose_value=False,
        callback=_remember("app"),
        help="The app object holding jobs, handlers and pipelines (or VARDIYA_APP).",
    )(command)
    command = click.option(
        "--db",
        metavar="URL",
        envvar="VARDIYA_DB",
        expose_value=False,
        callback=_remember("db"),
        help="The state store: sqlite:///path.db or postgresql://user@host/db (or VARDIYA_DB; default sqlite:///vardiya.db).",
    )(command)
    return command


def emit_json(document: Any) -> None:
    """Print exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(document, indent=2, default=str, ensure_ascii=False) + "\n")
