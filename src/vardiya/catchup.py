"""The catch-up policy: which missed ticks fire when a scheduler comes back, and which it passes by.

A tick is *missed* when its planned time passed while no scheduler was running (the store's cursor of
the schedule says how far planning got). Ticks that came due while a scheduler was running are never
missed, however late it noticed them (a loaded machine, a forward clock step the scheduler detected):
they all fire. Of the missed ones, the policy fires at most ``max_ticks`` (the latest), none older than
``max_age``; the rest are counted as skipped. For a slot job that is safe: the records of a skipped
tick are not lost, the next ticks' backlog takes them (within the job's ``catch_up`` periods and
``backfill_limit``), so the default fires only the latest missed tick, which processes its own slot
first and then the backlog. This is Airflow's ``catchup=False`` and Kubernetes' ``startingDeadlineSeconds``
made exact and counted.

``grace`` keeps a quick restart from skipping anything: a tick missed by less than ``grace`` before the
scheduler came back counts as on time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .errors import ConfigurationError

__all__ = ["CatchUpPolicy", "Decision", "decide"]


@dataclass(frozen=True, kw_only=True)
class CatchUpPolicy:
    """How many missed ticks fire after downtime (the latest ones), and how old one may be."""

    max_ticks: int = 1
    max_age: timedelta | None = None
    grace: timedelta = timedelta(minutes=5)

    def __post_init__(self) -> None:
        if isinstance(self.max_ticks, bool) or not isinstance(self.max_ticks, int) or self.max_ticks < 0:
            raise ConfigurationError(
                f"CatchUpPolicy(max_ticks={self.max_ticks!r}): give a whole number >= 0 of missed ticks to fire"
            )
        for label, value in (("max_age", self.max_age), ("grace", self.grace)):
            if value is None and label == "max_age":
                continue
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ConfigurationError(
                    f"CatchUpPolicy({label}={value!r}): give a timedelta of 0 or more, e.g. timedelta(hours=6)"
                )

    def to_json(self) -> dict[str, object]:
        return {
            "max_ticks": self.max_ticks,
            "max_age_s": None if self.max_age is None else self.max_age.total_seconds(),
            "grace_s": self.grace.total_seconds(),
        }


@dataclass(frozen=True)
class Decision:
    """What to do with the ticks due since the cursor: fire these, pass by those, plan through ``through``."""

    fire: tuple[datetime, ...]
    skipped: tuple[datetime, ...]
    through: datetime | None

    @property
    def empty(self) -> bool:
        return not self.fire and not self.skipped


def decide(due: Sequence[datetime], *, live_from: datetime, now: datetime, policy: CatchUpPolicy) -> Decision:
    """Apply ``policy`` to ``due`` (planned times after the cursor and not after ``now``, ascending).

    ``live_from`` is when the deciding scheduler started running continuously; a tick planned before
    ``live_from - grace`` was missed during downtime.
    """
    if not due:
        return Decision((), (), None)
    cut = live_from - policy.grace
    missed = [planned for planned in due if planned <= cut]
    on_time = [planned for planned in due if planned > cut]
    eligible = [planned for planned in missed if policy.max_age is None or now - planned <= policy.max_age]
    chosen = eligible[max(0, len(eligible) - policy.max_ticks) :] if policy.max_ticks else []
    chosen_set = set(chosen)
    skipped = tuple(planned for planned in missed if planned not in chosen_set)
    return Decision(tuple(chosen) + tuple(on_time), skipped, due[-1])
