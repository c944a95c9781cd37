"""The app object: what ``--app MODULE_OR_FILE:ATTR`` names, holding a project's jobs.

    app = App("nightly")

    @app.slot_job("nightly_users", scheme=SlotScheme(slots=24), source=IterableSource(range(1000)),
                  runs_per_slot=2, offsets=[timedelta(minutes=1), timedelta(minutes=31)])
    def refresh(user_id, context):
        ...

Loading an app is importing user code; ``load_app`` turns every way that can fail into one
``AppNotFound`` line that says what to fix.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from .catchup import CatchUpPolicy
from .errors import AppNotFound, ConfigurationError
from .invoke.handlers import Handler
from .pipeline.stages import Pipeline
from .schedule.periodic import EPOCH, Periodic
from .schedule.pipelines import ScheduledPipeline
from .schedule.triggers import Trigger
from .slots.job import SchemeChange, SlotJob
from .slots.scheme import SlotScheme
from .slots.sources import Source

__all__ = ["App", "load_app", "load_object"]


class App:
    """A registry of a project's slot jobs, invocation handlers and scheduled pipelines."""

    def __init__(self, name: str = "vardiya") -> None:
        self.name = name
        self.slot_jobs: dict[str, SlotJob] = {}
        self.handlers: dict[str, Handler] = {}
        self.pipelines: dict[str, ScheduledPipeline] = {}
        self.periodic: dict[str, Periodic] = {}

    def add_pipeline(
        self,
        pipeline: Pipeline,
        *,
        root: str | os.PathLike[str],
        triggers: Iterable[Trigger] = (),
        concurrency: int = 1,
        strict: bool = False,
        max_attempts: int = 3,
        retry_wait_s: float = 60.0,
    ) -> ScheduledPipeline:
        """Register a pipeline the scheduler starts by its ``triggers`` and workers run, outputs under ``root``."""
        if pipeline.name in self.pipelines:
            raise ConfigurationError(f"app {self.name!r} already has a pipeline named {pipeline.name!r}")
        entry = ScheduledPipeline(
            pipeline=pipeline, root=os.fspath(root), triggers=tuple(triggers), concurrency=concurrency,
            strict=strict, max_attempts=max_attempts, retry_wait_s=retry_wait_s,
        )
        self.pipelines[pipeline.name] = entry
        return entry

    def get_pipeline(self, name: str) -> ScheduledPipeline:
        """The scheduled pipeline called ``name``; a clear error lists the ones that exist."""
        try:
            return self.pipelines[name]
        except KeyError:
            known = ", ".join(sorted(self.pipelines)) or "none"
            raise ConfigurationError(f"app {self.name!r} has no pipeline {name!r}; its pipelines: {known}") from None

    def add_handler(self, handler: Handler) -> Handler:
        """Register a ``Handler``; names are unique within an app."""
        if handler.name in self.handlers:
            raise ConfigurationError(f"app {self.name!r} already has a handler named {handler.name!r}")
        self.handlers[handler.name] = handler
        return handler

    def handler(self, name: str, **settings: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare a handler whose function is the decorated one (returned unchanged).

        ``settings`` are those of ``Handler``: ``model`` (sync, async, stream), ``retry``,
        ``caller_retry``, ``batch_size``, ``batch_window``, ``policy``, ``time_limit_s``,
        ``per_record_s``, ``per_call_overhead_s``, ``dedup``, ``on_failure``, ``ordered``, ``lanes``,
        ``batch``, ``sla``. They are checked here, at declaration.
        """

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add_handler(Handler(name=name, fn=fn, **settings))
            return fn

        return register

    def get_handler(self, name: str) -> Handler:
        """The handler called ``name``; a clear error lists the ones that exist."""
        from .invoke.invoker import find_handler

        return find_handler(self.handlers, name)

    def add_slot_job(self, job: SlotJob) -> SlotJob:
        """Register a ``SlotJob``; names are unique within an app."""
        if job.name in self.slot_jobs:
            raise ConfigurationError(f"app {self.name!r} already has a slot job named {job.name!r}")
        self.slot_jobs[job.name] = job
        return job

    def slot_job(
        self,
        name: str,
        *,
        scheme: SlotScheme,
        source: Source,
        runs_per_slot: int = 1,
        offsets: Iterable[timedelta] = (),
        current_limit: int | None = None,
        backfill_limit: int = 1_000,
        catch_up: int = 1,
        deadline: timedelta | None = None,
        deadline_fraction: float | None = None,
        max_attempts: int = 3,
        batch_size: int | None = None,
        scheme_changes: Iterable[SchemeChange] = (),
        start: datetime | None = None,
        downtime: CatchUpPolicy | None = None,
        flush_every: int = 500,
        deadline_grace: timedelta = timedelta(0),
        claim_lease: timedelta = timedelta(minutes=1),
        sla: timedelta | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare a slot job whose handler is the decorated function (returned unchanged); see ``SlotJob``."""

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self.add_slot_job(
                SlotJob(
                    name=name,
                    scheme=scheme,
                    source=source,
                    handler=handler,
                    runs_per_slot=runs_per_slot,
                    offsets=tuple(offsets),
                    current_limit=current_limit,
                    backfill_limit=backfill_limit,
                    catch_up=catch_up,
                    deadline=deadline,
                    deadline_fraction=deadline_fraction,
                    max_attempts=max_attempts,
                    batch_size=batch_size,
                    scheme_changes=tuple(scheme_changes),
                    start=start,
                    downtime=downtime or CatchUpPolicy(),
                    flush_every=flush_every,
                    deadline_grace=deadline_grace,
                    claim_lease=claim_lease,
                    sla=sla,
                )
            )
            return handler

        return register

    def add_periodic(self, periodic: Periodic) -> Periodic:
        """Register a ``Periodic`` function; names are unique within an app."""
        if periodic.name in self.periodic:
            raise ConfigurationError(f"app {self.name!r} already has a periodic function named {periodic.name!r}")
        self.periodic[periodic.name] = periodic
        return periodic

    def every(
        self,
        interval: timedelta,
        *,
        name: str | None = None,
        anchor: datetime = EPOCH,
        downtime: CatchUpPolicy | None = None,
        max_attempts: int = 3,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Run the decorated function (returned unchanged) every ``interval``, counted from ``anchor``.

        Fired by ``vardiya scheduler`` once per planned time however many schedulers run, run by
        ``vardiya worker``; ``downtime`` says which missed times fire after all schedulers were down.
        """

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add_periodic(Periodic(
                name=name or fn.__name__, fn=fn, every=interval, anchor=anchor,
                downtime=downtime or CatchUpPolicy(), max_attempts=max_attempts,
            ))
            return fn

        return register

    def cron(
        self,
        expr: str,
        *,
        tz: str = "UTC",
        name: str | None = None,
        downtime: CatchUpPolicy | None = None,
        max_attempts: int = 3,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Run the decorated function (returned unchanged) at the times of cron ``expr`` in zone ``tz``."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add_periodic(Periodic(
                name=name or fn.__name__, fn=fn, cron=expr, tz=tz, downtime=downtime or CatchUpPolicy(),
                max_attempts=max_attempts,
            ))
            return fn

        return register

    def get_periodic(self, name: str) -> Periodic:
        """The periodic function called ``name``; a clear error lists the ones that exist."""
        try:
            return self.periodic[name]
        except KeyError:
            known = ", ".join(sorted(self.periodic)) or "none"
            raise ConfigurationError(
                f"app {self.name!r} has no periodic function {name!r}; its periodic functions: {known}"
            ) from None

    def get_slot_job(self, name: str) -> SlotJob:
        """The slot job called ``name``; a clear error lists the ones that exist."""
        try:
            return self.slot_jobs[name]
        except KeyError:
            known = ", ".join(sorted(self.slot_jobs)) or "none"
            raise ConfigurationError(
                f"app {self.name!r} has no slot job {name!r}; its slot jobs: {known}"
            ) from None

    def __repr__(self) -> str:
        return (
            f"App({self.name!r}, slot_jobs={sorted(self.slot_jobs)}, handlers={sorted(self.handlers)}, "
            f"pipelines={sorted(self.pipelines)}, periodic={sorted(self.periodic)})"
        )


def load_object(spec: str | None, *, what: str = "app", option: str = "--app / VARDIYA_APP") -> Any:
    """Import ``MODULE_OR_FILE:ATTR`` and return the attribute."""
    if not spec:
        raise AppNotFound(f"no {what} given; pass {option} as MODULE_OR_FILE:ATTR, e.g. examples/nightly_users/app.py:app")
    location, separator, attribute = spec.rpartition(":")
    if not separator or not location or not attribute:
        raise AppNotFound(f"{what} {spec!r} is not MODULE_OR_FILE:ATTR, e.g. myproject.jobs:app or jobs.py:app")
    try:
        module = _import(location, option)
    except AppNotFound:
        raise
    except Exception as error:  # any import-time failure of user code is reported in one line
        where = _where(error)
        raise AppNotFound(
            f"{what} {spec!r} does not import: {type(error).__name__}: {error}{where}"
            " (vardiya --debug ... prints the whole traceback)"
        ) from error
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise AppNotFound(f"{location} has no attribute {attribute!r}; check {option}")
        target = getattr(target, part)
    return target


#: How many of the user's innermost frames an import error names.
_FRAMES_SHOWN = 3
#: Frames in vardiya itself and in Python's standard library (importlib) are not the user's code.
_NOT_USERS = (str(Path(__file__).resolve().parent), sysconfig.get_paths()["stdlib"])


def _where(error: BaseException) -> str:
    """`` (jobs.py:12, in <module>; from ...)``: the innermost frames of the user's code in ``error``'s
    traceback, innermost first, files relative to the working directory; empty when there are none
    (the error came from Python or vardiya itself before any user code ran)."""
    frames = [
        frame for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith("<") and not frame.filename.startswith(_NOT_USERS)
    ]
    if not frames:
        return ""
    here = Path.cwd()
    shown = []
    for frame in reversed(frames[-_FRAMES_SHOWN:]):
        path = Path(frame.filename)
        with contextlib.suppress(ValueError):
            path = path.resolve().relative_to(here)
        shown.append(f"{path}:{frame.lineno}, in {frame.name}")
    return f" ({'; from '.join(shown)})"


def _import(location: str, option: str) -> Any:
    if location.endswith(".py") or os.sep in location or "/" in location:
        path = Path(location).resolve()
        if not path.is_file():
            raise AppNotFound(f"no such file {location!r}; check {option}")
        module_name = f"vardiya_app_{abs(hash(str(path)))}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise AppNotFound(f"cannot import {location!r} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    # A module name is looked up from the working directory first, as `celery -A` and `uvicorn` do:
    # `VARDIYA_APP=jobs:app` beside jobs.py works from the installed `vardiya` script too, whose
    # sys.path starts at its bin directory, not at the working directory as `python -m` does.
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as error:
        if error.name and location.startswith(error.name):
            raise AppNotFound(f"no module named {location!r}; check {option} and PYTHONPATH") from None
        raise


def load_app(spec: str | None) -> App:
    """The ``App`` named by ``--app``."""
    app = load_object(spec)
    if not isinstance(app, App):
        raise AppNotFound(f"{spec!r} is a {type(app).__name__}, not a vardiya App; point --app at an App object")
    return app
