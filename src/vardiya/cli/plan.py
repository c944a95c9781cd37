"""``vardiya plan invocation|compare|batch-sweep|dedup``: a workload replayed through the engine.

Every command reads a workload (``--workload CSV``, or ``--history HANDLER``: the handler's past runs
in the store, with ``--app`` and ``--db``) and a cost profile (``--profile TOML``), replays it on a
virtual clock and prints a table for people or, with ``--json``, the document of cli.md. Nothing is
written anywhere but the ``--plot`` file.
"""

from __future__ import annotations

from typing import Any

import click

from ..app import load_app
from ..errors import InvalidInput
from ..invoke.handlers import FailurePolicy, Model
from ..output import progress
from ..plan.compare import compare
from ..plan.dedup import plan_dedup
from ..plan.profile import Profile, load_profile
from ..plan.replay import check_batch_size, replay
from ..plan.report import print_comparison, print_dedup, print_row, print_sweep
from ..plan.sweep import sweep, write_sweep_chart
from ..plan.workload import Workload, from_store, load_workload
from ..slots.chart import check_chart_path
from .commands import Group
from .context import Settings, StoreUse, emit_json, global_options, pass_settings

__all__ = ["plan"]

_POLICIES = [policy.value for policy in FailurePolicy]


def _inputs(command: Any) -> Any:
    for option in reversed(
        [
            click.option("--workload", "workload_path", metavar="CSV", help="Records and outcomes: record,outcome[,duration_ms]."),
            click.option("--history", "history", metavar="HANDLER", help="Take the workload from HANDLER's past runs (--app, --db)."),
            click.option("--profile", "profile_path", metavar="TOML", required=True, help="The cost profile."),
        ]
    ):
        command = option(command)
    return command


def _json_option(command: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(command)


def _batch_size(value: int | None) -> int | None:
    return None if value is None else check_batch_size(value, "--batch-size")


def _load(settings: Settings, workload_path: str | None, history: str | None, profile_path: str) -> tuple[Workload, Profile]:
    """The profile first (it is small and its errors are the likelier ones), then the workload."""
    if (workload_path is None) == (history is None):
        raise InvalidInput("give exactly one of --workload CSV or --history HANDLER")
    profile = load_profile(profile_path)
    if workload_path is not None:
        return load_workload(workload_path), profile
    assert history is not None
    handler = load_app(settings.app).get_handler(history)
    with settings.open_store(StoreUse.EXISTING) as store:
        return from_store(store, handler), profile


@click.group(cls=Group)
@global_options
def plan() -> None:
    """Replay a workload through the invocation engine on a virtual clock, before running it."""


@plan.command("invocation")
@global_options
@_inputs
@click.option("--model", type=click.Choice([model.value for model in Model]), required=True, help="The invocation model.")
@click.option("--batch-size", type=int, default=None, help="Stream: records per batch (default: the profile's).")
@click.option("--policy", type=click.Choice(_POLICIES), default=None, help="Stream: the failure policy (default: the profile's).")
@click.option("--dedup", is_flag=True, help="With dedup keys, at the profile's read and write costs.")
@_json_option
@pass_settings
def invocation_command(
    settings: Settings, workload_path: str | None, history: str | None, profile_path: str, model: str,
    batch_size: int | None, policy: str | None, dedup: bool, as_json: bool,
) -> None:
    """The metrics of one model (and batch size) on the workload."""
    size = _batch_size(batch_size)
    workload, profile = _load(settings, workload_path, history, profile_path)
    row = replay(workload, profile, model=model, batch_size=size, policy=policy, dedup=dedup)
    if as_json:
        emit_json(row.to_json())
        return
    print_row(settings.console, row, workload, profile)


@plan.command("compare")
@global_options
@_inputs
@click.option("--batch-size", type=int, default=None, help="The stream's batch size (default: the profile's).")
@click.option("--dedup", is_flag=True, help="With dedup keys, at the profile's read and write costs.")
@_json_option
@pass_settings
def compare_command(
    settings: Settings, workload_path: str | None, history: str | None, profile_path: str, batch_size: int | None,
    dedup: bool, as_json: bool,
) -> None:
    """The three models side by side, and the stream's failure policies against each other."""
    size = _batch_size(batch_size)
    workload, profile = _load(settings, workload_path, history, profile_path)
    result = compare(workload, profile, batch_size=size, dedup=dedup)
    if as_json:
        emit_json(result.to_json())
        return
    print_comparison(settings.console, result, workload)


@plan.command("batch-sweep")
@global_options
@_inputs
@click.option("--sizes", default=None, metavar="N,N,...", help="Batch sizes to replay (default: the profile's batch_sizes).")
@click.option("--policy", type=click.Choice(_POLICIES), default=None, help="The failure policy (default: the profile's).")
@click.option("--plot", default=None, metavar="FILE", help="Also write the chart of cost against batch size (.svg, or .png).")
@_json_option
@pass_settings
def batch_sweep_command(
    settings: Settings, workload_path: str | None, history: str | None, profile_path: str, sizes: str | None,
    policy: str | None, plot: str | None, as_json: bool,
) -> None:
    """One stream replay per batch size: the cheapest that fits the limit, and the fastest."""
    chosen = _sizes(sizes) if sizes is not None else None
    if plot is not None:
        check_chart_path(plot)
    workload, profile = _load(settings, workload_path, history, profile_path)
    with progress(settings.console, "batch-sweep", len(chosen) if chosen else None) as advance:
        result = sweep(
            workload, profile, sizes=chosen, policy=policy,
            progress=lambda done, total: advance(1, f"{done} of {total} batch sizes"),
        )
    written = write_sweep_chart(plot, result) if plot is not None else None
    if as_json:
        document = result.to_json()
        if written is not None:
            document["plot"] = str(written)
        emit_json(document)
        return
    print_sweep(settings.console, result, workload)
    if written is not None:
        settings.console.print(f"chart written to {written}")


@plan.command("dedup")
@global_options
@_inputs
@click.option("--batch-size", type=int, default=None, help="The stream's batch size (default: the profile's).")
@click.option("--policy", type=click.Choice(_POLICIES), default=None, help="The failure policy (default: the profile's).")
@_json_option
@pass_settings
def dedup_command(
    settings: Settings, workload_path: str | None, history: str | None, profile_path: str, batch_size: int | None,
    policy: str | None, as_json: bool,
) -> None:
    """The dedup window against the redrive delay: records processed twice, with and without key retention."""
    size = _batch_size(batch_size)
    workload, profile = _load(settings, workload_path, history, profile_path)
    result = plan_dedup(workload, profile, batch_size=size, policy=policy)
    if as_json:
        emit_json(result.to_json())
        return
    print_dedup(settings.console, result)


def _sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip()
        try:
            size = int(part)
        except ValueError:
            raise InvalidInput(f"--sizes takes whole numbers separated by commas, e.g. 1,10,100; got {part!r}") from None
        sizes.append(check_batch_size(size, "every one of --sizes"))
    return sizes
