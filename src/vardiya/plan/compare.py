"""The comparisons a user chooses by: the three models side by side, and the stream's failure policies.

Both are replays of the same workload under the same profile, so what differs between two rows is
the model or the policy and nothing else. The models show latency moving rather than vanishing (the
caller's wait falls from sync to async and stream while completion grows); the policies show what a
poison record costs a batch (``retry_batch`` dead-letters its healthy neighbours, ``bisect`` and
``report_failures`` do not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..invoke.handlers import FailurePolicy, Model
from .profile import Profile
from .replay import PlanRow, Prepared, check_batch_size, replay
from .workload import Workload

__all__ = ["Comparison", "compare"]


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Rows of the same workload: one per model, and one per stream failure policy."""

    batch_size: int
    models: tuple[PlanRow, ...]
    """sync, async, and the stream under the profile's policy."""
    policies: tuple[PlanRow, ...]
    """The stream under retry_batch, bisect and report_failures."""

    def model(self, name: Model | str) -> PlanRow:
        return next(row for row in self.models if row.model is Model(name))

    def policy(self, name: FailurePolicy | str) -> PlanRow:
        return next(row for row in self.policies if row.policy is FailurePolicy(name))

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "models": [row.to_json() for row in self.models],
            "policies": [row.to_json() for row in self.policies],
        }


def compare(
    workload: Workload,
    profile: Profile,
    *,
    batch_size: int | None = None,
    dedup: bool = False,
    prepared: Prepared | None = None,
) -> Comparison:
    """Replay the workload under every model and every stream policy (the stream at ``batch_size``).

    ``prepared``: what replays of this workload under this profile share, if it is already made.
    """
    size = check_batch_size(profile.batch_size if batch_size is None else batch_size)
    prepared = prepared or Prepared.of(workload, profile)
    policies = tuple(
        replay(workload, profile, model=Model.STREAM, batch_size=size, policy=policy, dedup=dedup, prepared=prepared)
        for policy in FailurePolicy
    )
    stream = next(row for row in policies if row.policy is profile.policy)
    models = (
        replay(workload, profile, model=Model.SYNC, dedup=dedup, prepared=prepared),
        replay(workload, profile, model=Model.ASYNC, dedup=dedup, prepared=prepared),
        stream,
    )
    return Comparison(batch_size=size, models=models, policies=policies)
