"""``vardiya pause``, ``vardiya resume`` and ``vardiya trigger``: hold, release and run by hand what an app registers.

NAME is a slot job, handler, periodic function, pipeline or pipeline trigger (``PIPELINE:TRIGGER``) of
``--app``, as ``vardiya app show`` lists them; a name two kinds share needs ``--kind``. A pause is
stored, so every scheduler and worker of the store honours it (``store/controls.py``): a paused
schedule fires nothing, a paused handler's items stay queued. Pausing twice and resuming what runs are
no-ops that say so (exit 0). ``trigger`` queues the run a scheduler would have fired as a work item for
the workers (``service/manual.py``).
"""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from ..app import App, load_app
from ..catalog import Entry, EntryKind, resolve
from ..errors import InvalidInput
from ..service.manual import manual_run, queue_manual_run
from ..store.controls import REASON_MAX, PauseChange
from .context import Settings, StoreUse, emit_json, global_options, pass_settings

__all__ = ["pause", "resume", "trigger"]

_KINDS = [kind.control.value for kind in EntryKind]


def _entry(settings: Settings, name: str, kind: str | None) -> tuple[App, Entry]:
    if not settings.app:
        raise InvalidInput("say which app NAME belongs to: --app MODULE:ATTR (or VARDIYA_APP)")
    app = load_app(settings.app)
    return app, resolve(app, name, EntryKind.parse(kind) if kind is not None else None)


def _kind_option(command: Any) -> Any:
    return click.option(
        "--kind", type=click.Choice(_KINDS), default=None, help="What NAME is, when the app has two things of that name."
    )(command)


def _report(settings: Settings, verb: str, entry: Entry, change: PauseChange, as_json: bool) -> int:
    pause = change.pause
    if as_json:
        emit_json({
            "kind": entry.kind.control.value, "name": entry.name, "changed": change.changed,
            "paused": verb == "paused", "pause": None if pause is None else pause.to_json(),
        })
        return 0
    what = f"{entry.kind.value} {escape(entry.name)}"
    if verb == "paused":
        assert pause is not None
        why = f" ({escape(pause.reason)})" if pause.reason else ""
        if change.changed:
            settings.console.print(f"paused {what}{why}; resume it with: vardiya resume {escape(entry.name)}")
        else:
            settings.console.print(f"{what} was already paused (since {pause.paused_at.isoformat()}){why}; nothing changed")
    elif change.changed:
        assert pause is not None
        after = (
            "its queued items run again" if entry.kind is EntryKind.HANDLER
            else "its catch-up policy decides the runs missed meanwhile"
        )
        settings.console.print(f"resumed {what} (paused since {pause.paused_at.isoformat()}); {after}")
    else:
        settings.console.print(f"{what} is not paused; nothing changed")
    return 0


@click.command()
@global_options
@click.argument("name")
@_kind_option
@click.option("--reason", default=None, metavar="TEXT", help=f"Why, shown by vardiya status (at most {REASON_MAX} characters).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def pause(settings: Settings, name: str, kind: str | None, reason: str | None, as_json: bool) -> int:
    """Pause NAME: schedulers fire none of its runs, workers claim none of its items, until resumed."""
    _app, entry = _entry(settings, name, kind)
    with settings.open_store(StoreUse.CREATE) as store:
        change = store.controls.pause(entry.kind.control, entry.name, reason=reason)
    return _report(settings, "paused", entry, change, as_json)


@click.command()
@global_options
@click.argument("name")
@_kind_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def resume(settings: Settings, name: str, kind: str | None, as_json: bool) -> int:
    """Resume NAME: its queued items run again, and its schedule's catch-up policy decides the missed runs."""
    _app, entry = _entry(settings, name, kind)
    with settings.open_store(StoreUse.EXISTING) as store:
        change = store.controls.resume(entry.kind.control, entry.name)
    return _report(settings, "resumed", entry, change, as_json)


@click.command("trigger")
@global_options
@click.argument("name")
@_kind_option
@click.option(
    "--at", "at", default=None, metavar="PLANNED",
    help="Slot job: a time in the slot to run (default: the current slot). Periodic function: the planned "
    "time (default: now). Pipeline trigger: a partition key or a time in it (default: the partition it would run now).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def trigger(settings: Settings, name: str, kind: str | None, at: str | None, as_json: bool) -> int:
    """Queue a run of NAME for the workers now, as the scheduler would fire it; the same run twice is queued once."""
    app, entry = _entry(settings, name, kind)
    with settings.open_store(StoreUse.CREATE) as store:
        run = manual_run(app, entry.kind.control, entry.name, at, store.clock.now())  # bad --at: nothing written
        queued = queue_manual_run(store, run)
    item = queued.item
    assert item is not None
    if as_json:
        emit_json({
            **run.to_json(), "queued": queued.new, "item": item.id, "state": item.state.value,
        })
        return 0
    what = f"{entry.kind.value} {escape(entry.name)}: {escape(run.what)}"
    if queued.new:
        settings.console.print(f"queued {what} as work item {item.id}; a worker runs it (vardiya worker)")
    else:
        settings.console.print(
            f"{what} was already queued as work item {item.id} ({item.state.value}); not queued again"
        )
    return 0
