"""What an app registers, in one list: every slot job, handler, periodic function, pipeline and trigger.

``vardiya app show`` prints it; it is the answer to "what will the scheduler fire and the workers run
if I deploy this app?", read from the declarations alone (no store is opened). Pure.

``resolve`` turns a name a person typed (``vardiya pause NAME``, ``vardiya trigger NAME``) into one
entry: a name two kinds share is refused as ambiguous rather than guessed, and an unknown one is
answered with the names the app has.
"""

from __future__ import annotations

import contextlib
import enum
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput
from .slots.scheme import describe_duration
from .store.controls import ControlKind

if TYPE_CHECKING:
    from .app import App

__all__ = ["Entry", "EntryKind", "catalog", "resolve"]


class EntryKind(enum.Enum):
    """What an app registers."""

    SLOT_JOB = "slot job"
    HANDLER = "handler"
    PERIODIC = "periodic"
    PIPELINE = "pipeline"
    TRIGGER = "trigger"

    @property
    def control(self) -> ControlKind:
        """The kind a pause of this entry is stored under."""
        return ControlKind[self.name]

    @classmethod
    def parse(cls, text: str) -> EntryKind:
        """A kind as a flag gives it: ``slot_job``, ``slot-job`` or ``slot job``, any case."""
        wanted = text.strip().lower().replace("-", " ").replace("_", " ")
        for kind in cls:
            if kind.value == wanted:
                return kind
        raise InvalidInput(f"kind {text!r} is not one of: {', '.join(kind.control.value for kind in cls)}")


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One registered thing: its kind, its name, when it runs, how (its model), and the code it runs."""

    kind: EntryKind
    name: str
    schedule: str
    model: str
    function: str

    def to_json(self) -> dict[str, str]:
        return {
            "kind": self.kind.value, "name": self.name, "schedule": self.schedule, "model": self.model,
            "function": self.function,
        }


def _where(fn: Callable[..., Any]) -> str:
    """``file:line name`` of a function, as a traceback names it (the path relative to the working
    directory when it is below it): an app loaded from a file has no importable module name to show."""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return name
    path = code.co_filename
    with contextlib.suppress(ValueError):  # another drive (Windows): keep the absolute path
        relative = os.path.relpath(path)
        if not relative.startswith(os.pardir):
            path = relative
    return f"{path}:{code.co_firstlineno} {name}"


def catalog(app: App) -> list[Entry]:
    """Every entry of ``app``, by kind then name (a pipeline's triggers right after it)."""
    entries: list[Entry] = []
    for job in sorted(app.slot_jobs.values(), key=lambda job: job.name):
        scheme = job.scheme
        entries.append(Entry(
            kind=EntryKind.SLOT_JOB, name=job.name,
            schedule=(
                f"{scheme.slots} slots per {describe_duration(scheme.period)} in {scheme.tz}, "
                f"{job.runs_per_slot} tick(s) per slot"
            ),
            model=f"slots ({scheme.assign.value} assign, {job.max_attempts} attempt(s) per record)",
            function=_where(job.handler),
        ))
    for handler in sorted(app.handlers.values(), key=lambda handler: handler.name):
        entries.append(Entry(
            kind=EntryKind.HANDLER, name=handler.name, schedule="on submit",
            model=f"{handler.model.value} ({handler.retry.max_attempts} attempt(s))",
            function=_where(handler.fn),
        ))
    for periodic in sorted(app.periodic.values(), key=lambda periodic: periodic.name):
        entries.append(Entry(
            kind=EntryKind.PERIODIC, name=periodic.name, schedule=periodic.describe(),
            model=f"work item per planned time ({periodic.max_attempts} attempt(s))", function=_where(periodic.fn),
        ))
    for entry in sorted(app.pipelines.values(), key=lambda entry: entry.name):
        stages = [stage.name for stage in entry.pipeline.stages]
        entries.append(Entry(
            kind=EntryKind.PIPELINE, name=entry.name,
            schedule=f"{len(entry.triggers)} trigger(s)" if entry.triggers else "by hand (vardiya pipeline run)",
            model=f"{len(stages)} stage(s): {', '.join(stages)}", function=f"outputs in {entry.root}",
        ))
        for trigger in entry.triggers:
            entries.append(Entry(
                kind=EntryKind.TRIGGER, name=f"{entry.name}:{trigger.name}", schedule=trigger.describe(),
                model=f"starts {', '.join(entry.stages_of(trigger))}", function=entry.name,
            ))
    return entries


def resolve(app: App, name: str, kind: EntryKind | None = None) -> Entry:
    """The one entry of ``app`` named ``name`` (of ``kind`` when given), else ``InvalidInput``.

    Unknown: the message lists the app's names. Ambiguous (a slot job and a handler both called
    ``nightly``): the message lists the kinds and says to pick one with ``--kind``.
    """
    entries = catalog(app)
    found = [entry for entry in entries if entry.name == name and (kind is None or entry.kind is kind)]
    if len(found) == 1:
        return found[0]
    if not found:
        of_kind = [entry for entry in entries if kind is None or entry.kind is kind]
        known = ", ".join(f"{entry.name} ({entry.kind.value})" for entry in of_kind) or "none"
        what = f"no {kind.value}" if kind is not None else "nothing"
        raise InvalidInput(f"app {app.name!r} has {what} named {name!r}; it has: {known}")
    kinds = ", ".join(entry.kind.control.value for entry in found)
    raise InvalidInput(
        f"{name!r} names more than one thing in app {app.name!r} ({kinds}); say which with --kind {found[0].kind.control.value}"
    )
