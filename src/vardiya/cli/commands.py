"""What every command group and renamed option shares: help that is never cut, bare groups, old spellings.

- A bare group (``vardiya``, ``vardiya dlq``) prints its help and exits 0, as ``git``, ``kubectl`` and
  ``docker`` do; Click 8.2+ would raise a usage error, which the CLI main squashes into one line.
- The command list in ``--help`` shows each command's whole first sentence, wrapped between words;
  Click cuts it to the terminal's width with ``...``.
- An option renamed for one spelling per thing (``--max-concurrent`` became ``--concurrency``) keeps its
  old name for one release as a hidden alias that prints one deprecation line on stderr.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["Group", "renamed_option"]

F = TypeVar("F", bound=Callable[..., Any])

_WHOLE = 1_000_000  # no limit: Click's short help is cut to this many characters


class Group(click.Group):
    """A command group whose bare call prints the help (exit 0) and whose command list is never cut."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(_WHOLE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def renamed_option(old: str, new: str, param: str, **option: Any) -> Callable[[F], F]:
    """Accept ``old`` for one more release as a hidden alias of the option ``new`` (parameter ``param``).

    Put it between the command's options and the function: the old value, when given, replaces the
    new option's and a one-line ``vardiya: warning:`` on stderr names the new spelling.
    """
    hidden = f"renamed_{param}"

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(hidden)
            if value is not None and value != ():
                click.echo(
                    f"vardiya: warning: {old} is deprecated and goes in the next release; use {new}", err=True
                )
                kwargs[param] = value
            return function(*args, **kwargs)

        return click.option(old, hidden, hidden=True, default=None, **option)(wrapper)  # type: ignore[return-value]

    return decorate
