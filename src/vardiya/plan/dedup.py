"""The dedup plan: the key window against the redrive delay, with and without vardiya's key retention.

Three replays of the same stream, each followed by the redrive of its dead letters ``redrive_after_s``
after they died:

- with dedup keys and vardiya's retention: the dead item itself is redriven, and its keys, kept alive
  while it was dead, say which of its records had already succeeded;
- with dedup keys as the usual design keeps them: they expire at the window whatever happened, and
  a redriven dead letter is a new message;
- with no dedup at all: the baseline for what dedup prevents.

"Reprocessed" counts records that ran again although they had already succeeded. When the redrive
comes after the window, the usual design reprocesses every healthy record of a dead batch; retention
brings that to zero. The dedup store's own cost (a read per processed record, a write per record) is
set against the processing it prevents, the retried healthy records of the night included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..invoke.handlers import FailurePolicy, Model
from .profile import Profile
from .replay import Prepared, Replay
from .workload import Workload

__all__ = ["DedupPlan", "plan_dedup"]


@dataclass(frozen=True, kw_only=True)
class DedupPlan:
    """What dedup does for one stream configuration, the redrive of its dead letters included."""

    window_s: float
    redrive_after_s: float
    batch_size: int
    policy: FailurePolicy
    dead_letter: int
    """Records dead-lettered on the night (with dedup)."""
    redriven_records: int
    reprocessed_without_retention: int
    reprocessed_with_retention: int
    processed_without_dedup: int
    processed_with_dedup: int
    dedup_ms: float
    dedup_cost: float
    """The dedup store's reads and writes, at the price of busy time."""
    prevented_cost: float
    """What the processing dedup prevented would have cost (calls and busy time)."""
    cost_without_dedup: float
    cost_with_dedup: float
    """Including the dedup store's cost."""

    def to_json(self) -> dict[str, Any]:
        return {
            "window_s": self.window_s,
            "redrive_after_s": self.redrive_after_s,
            "dead_letter": self.dead_letter,
            "reprocessed_without_retention": self.reprocessed_without_retention,
            "reprocessed_with_retention": self.reprocessed_with_retention,
            "batch_size": self.batch_size,
            "policy": self.policy.value,
            "redriven_records": self.redriven_records,
            "processed_without_dedup": self.processed_without_dedup,
            "processed_with_dedup": self.processed_with_dedup,
            "dedup_ms": round(self.dedup_ms, 3),
            "dedup_cost": round(self.dedup_cost, 6),
            "prevented_cost": round(self.prevented_cost, 6),
            "cost_without_dedup": round(self.cost_without_dedup, 6),
            "cost_with_dedup": round(self.cost_with_dedup, 6),
        }


def _night_and_redrive(
    workload: Workload, profile: Profile, *, batch_size: int | None, policy: FailurePolicy | str | None,
    dedup: bool, retain: bool, prepared: Prepared,
) -> tuple[Replay, int, int]:
    """A replay of the night, then of the redrive; with the night's dead letters and the redriven records."""
    replayed = Replay(
        workload, profile, model=Model.STREAM, batch_size=batch_size, policy=policy, dedup=dedup,
        retain_dead_keys=retain, prepared=prepared,
    ).run()
    dead = replayed.dead_letter
    redriven = sum(len(item.records) for _, item, _ in replayed.dead)
    replayed.redrive(profile.dedup.redrive_after_s, retain=retain)
    return replayed, dead, redriven


def plan_dedup(
    workload: Workload, profile: Profile, *, batch_size: int | None = None, policy: FailurePolicy | str | None = None
) -> DedupPlan:
    """Replay the stream with vardiya's key retention, with the usual design's and without dedup."""
    prepared = Prepared.of(workload, profile)

    def night_and_redrive(*, dedup: bool, retain: bool) -> tuple[Replay, int, int]:
        return _night_and_redrive(
            workload, profile, batch_size=batch_size, policy=policy, dedup=dedup, retain=retain, prepared=prepared
        )

    kept, dead, redriven = night_and_redrive(dedup=True, retain=True)
    usual, _, _ = night_and_redrive(dedup=True, retain=False)
    bare, _, _ = night_and_redrive(dedup=False, retain=False)
    assert kept.keys is not None and usual.keys is not None
    prices = profile.prices
    cost_without = prices.cost(bare.calls, bare.busy_ms)
    cost_with = prices.cost(kept.calls, kept.busy_ms + kept.dedup_ms)
    dedup_cost = kept.dedup_ms * prices.per_ms
    assert kept.batch_size is not None and kept.policy is not None
    return DedupPlan(
        window_s=profile.dedup.window_s,
        redrive_after_s=profile.dedup.redrive_after_s,
        batch_size=kept.batch_size,
        policy=kept.policy,
        dead_letter=dead,
        redriven_records=redriven,
        reprocessed_without_retention=usual.keys.reprocessed,
        reprocessed_with_retention=kept.keys.reprocessed,
        processed_without_dedup=bare.processed,
        processed_with_dedup=kept.processed,
        dedup_ms=kept.dedup_ms,
        dedup_cost=dedup_cost,
        prevented_cost=cost_without - (cost_with - dedup_cost),
        cost_without_dedup=cost_without,
        cost_with_dedup=cost_with,
    )
