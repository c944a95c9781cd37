"""The ``vardiya`` command. Exit codes: 0 success, 1 the work ran and some of it failed, 2 bad input.

Every ``VardiyaError`` becomes one line on stderr and exit code 2; nothing else is printed for it,
unless ``vardiya --debug`` (or ``VARDIYA_DEBUG=1``) asks for the full traceback above that line.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

import click

from .. import __version__
from ..errors import VardiyaError
from .app import app_group
from .commands import Group
from .context import global_options
from .control import pause, resume, trigger
from .db import db
from .demo import demo
from .dlq import dlq
from .errors import errors_command
from .invoke import invoke, worker
from .pipeline import pipeline
from .pipeline_run import run_command  # noqa: F401 - registers run/status/resume/rerun/backfill
from .pipeline_triggers import triggers_command  # noqa: F401 - registers pipeline triggers
from .plan import plan
from .services import scheduler, status
from .slots import slots
from .ticks import replay_command, tick
from .ui import ui_command

__all__ = ["cli", "main"]


class _Debug:
    """Whether ``--debug`` was given: set by the root group's option, read by ``main``."""

    on = False


def _remember_debug(_context: click.Context, _parameter: click.Parameter, value: bool) -> None:
    if value:
        _Debug.on = True


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@global_options
@click.option(
    "--debug", is_flag=True, expose_value=False, is_eager=True, callback=_remember_debug,
    help="On an error, print its full traceback before the one-line message (or VARDIYA_DEBUG=1).",
)
@click.version_option(__version__, "--version", prog_name="vardiya")
def cli() -> None:
    """vardiya: periodic data work that is deterministic, idempotent and cheap to run."""


cli.add_command(app_group)
cli.add_command(db)
cli.add_command(demo)
cli.add_command(tick)
cli.add_command(replay_command)
cli.add_command(slots)
cli.add_command(pipeline)
cli.add_command(worker)
cli.add_command(invoke)
cli.add_command(dlq)
cli.add_command(plan)
cli.add_command(scheduler)
cli.add_command(status)
cli.add_command(errors_command)
cli.add_command(pause)
cli.add_command(resume)
cli.add_command(trigger)
cli.add_command(ui_command)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _traceback_if_debugging(error: BaseException) -> None:
    if _Debug.on or os.environ.get("VARDIYA_DEBUG", "") not in ("", "0"):
        click.echo("".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip(), err=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line and exit with its code."""
    _Debug.on = False
    try:
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="vardiya", standalone_mode=False)
    except VardiyaError as error:
        _traceback_if_debugging(error)
        click.echo(f"vardiya: error: {_one_line(str(error))}", err=True)
        sys.exit(2)
    except click.UsageError as error:
        _traceback_if_debugging(error)
        hint = f" (see: {error.ctx.command_path} --help)" if error.ctx is not None else ""
        click.echo(f"vardiya: error: {_one_line(error.format_message())}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as error:
        click.echo(f"vardiya: error: {_one_line(error.format_message())}", err=True)
        sys.exit(2)
    except click.Abort:
        click.echo("vardiya: aborted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
