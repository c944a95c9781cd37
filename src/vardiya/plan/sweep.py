"""The batch-size sweep: one stream replay per batch size, the cheapest that fits, the fastest.

Cost against batch size is a valley: on the left every record pays a call's overhead, on the right a
failing record drags its whole batch through the retries (``retry_batch``). The cheapest size and the
size with the shortest busy time are chosen among the sizes whose full batch fits the time limit and
whose calls all did; a size that cannot fit is still replayed (its calls time out, as they would)
and shown, marked, but never recommended.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..invoke.handlers import FailurePolicy, Model
from ..slots.chart import bar_chart_svg, write_svg
from .profile import Profile
from .replay import PlanRow, Prepared, check_batch_size, policy_of, replay
from .workload import Workload

__all__ = ["Sweep", "recommend", "sweep", "sweep_chart_svg", "write_sweep_chart"]


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """One row per batch size, and the sizes a user would choose by."""

    policy: FailurePolicy
    time_limit_s: float
    rows: tuple[PlanRow, ...]
    cheapest: int | None
    """The size with the lowest cost among those that fit the limit (None: none fits)."""
    fastest: int | None
    """The size with the shortest busy time among those that fit the limit."""

    def row(self, batch_size: int) -> PlanRow:
        """The row of one batch size."""
        return next(row for row in self.rows if row.batch_size == batch_size)

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [row.to_json(with_batch_ms=True) for row in self.rows],
            "cheapest": self.cheapest,
            "fastest": self.fastest,
            "policy": self.policy.value,
            "time_limit_s": self.time_limit_s,
        }


def recommend(rows: Sequence[PlanRow]) -> tuple[int | None, int | None]:
    """(cheapest, fastest) batch size among the rows that fit the limit; a tie goes to the smaller size."""
    fitting = [row for row in rows if row.fits_limit and row.batch_size is not None]
    if not fitting:
        return None, None
    cheapest = min(fitting, key=lambda row: (row.cost, row.batch_size))
    fastest = min(fitting, key=lambda row: (row.busy_ms, row.batch_size))
    return cheapest.batch_size, fastest.batch_size


def sweep(
    workload: Workload,
    profile: Profile,
    *,
    sizes: Iterable[int] | None = None,
    policy: FailurePolicy | str | None = None,
    dedup: bool = False,
    prepared: Prepared | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Sweep:
    """Replay the stream once per batch size (the profile's ``batch_sizes`` by default), smallest first.

    ``prepared``: what replays of this workload under this profile share, if it is already made.
    ``progress`` is told (sizes replayed, sizes) after each replay: a progress bar.
    """
    chosen = sorted({check_batch_size(size) for size in (profile.batch_sizes if sizes is None else sizes)})
    if not chosen:
        raise InvalidInput("a sweep needs at least one batch size, e.g. --sizes 1,10,100")
    rule = policy_of(profile.policy if policy is None else policy)
    prepared = prepared or Prepared.of(workload, profile)
    rows = []
    for size in chosen:
        rows.append(replay(workload, profile, model=Model.STREAM, batch_size=size, policy=rule, dedup=dedup, prepared=prepared))
        if progress is not None:
            progress(len(rows), len(chosen))
    cheapest, fastest = recommend(rows)
    return Sweep(policy=rule, time_limit_s=profile.time_limit_s, rows=tuple(rows), cheapest=cheapest, fastest=fastest)


def sweep_chart_svg(result: Sweep) -> str:
    """Cost and busy time against batch size, one bar per size; sizes that cannot fit the limit in red."""
    labels = [str(row.batch_size) for row in result.rows]
    unfit = [index for index, row in enumerate(result.rows) if not row.fits_limit]
    picks = f"cheapest {result.cheapest}, fastest {result.fastest}" if result.cheapest else "no size fits the limit"
    return bar_chart_svg(
        f"cost against batch size ({result.policy.value}): {picks}",
        labels,
        {
            "cost": [row.cost for row in result.rows],
            "busy time (h)": [row.busy_ms / 3_600_000 for row in result.rows],
        },
        highlight=unfit,
        highlight_label=f"cannot fit the {result.time_limit_s:g} s limit",
        x_label="batch size",
    )


def write_sweep_chart(path: str | os.PathLike[str], result: Sweep) -> Path:
    """Write the sweep's chart to ``path`` (.svg, or .png with cairosvg), atomically."""
    return write_svg(path, sweep_chart_svg(result))
