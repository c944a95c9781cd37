"""What every command shares: the settings from the global options, and the two kinds of output."""

from __future__ import annotations

import enum
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from rich.console import Console

from ..clock import Clock
from ..store import Store, open_store

__all__ = ["Settings", "StoreUse", "emit_json", "global_options", "pass_settings"]

F = TypeVar("F", bound=Callable[..., Any])


class StoreUse(enum.Enum):
    """What a command does with the store, which decides whether it may create one.

    A read command on a store that does not exist (a mistyped ``--db``) must not answer from a new,
    empty store that it made: it refuses with one line and creates nothing. The README lists which
    command is which.
    """

    #: reports and listings, and commands that change only what is there (dlq redrive, purge): a
    #: missing store is an error (exit 2), and nothing is created
    EXISTING = "existing"
    #: commands that store new work or results (tick, replay, pipeline run, invoke submit ...): a
    #: SQLite store is created on first use
    CREATE = "create"
    #: the scheduler and the worker: as CREATE, and a store they create is said in the log
    SERVICE = "service"


@dataclass(kw_only=True)
class Settings:
    """The global options, as the group and the command gave them (the command's win)."""

    db: str | None = None
    app: str | None = None

    def open_store(self, use: StoreUse, *, clock: Clock | None = None) -> Store:
        """The store the options point at (``--db``, else ``VARDIYA_DB``, else ./vardiya.db).

        ``use`` says whether the command may create it (see ``StoreUse``); an existing SQLite store is
        migrated either way, a PostgreSQL one only by ``vardiya db upgrade``.
        """
        store = open_store(self.db, clock=clock, create=use is not StoreUse.EXISTING)
        if store.created and use is StoreUse.SERVICE:
            logging.getLogger("vardiya.service").warning(
                "first run: created a new vardiya store at %s", store.url, extra={"store": store.url}
            )
        return store

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
    return click.option(
        "--db",
        metavar="URL",
        envvar="VARDIYA_DB",
        expose_value=False,
        callback=_remember("db"),
        help="The state store: sqlite:///path.db or postgresql://user@host/db (or VARDIYA_DB; default sqlite:///vardiya.db).",
    )(command)


def emit_json(document: Any) -> None:
    """Print exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(document, indent=2, default=str, ensure_ascii=False) + "\n")
