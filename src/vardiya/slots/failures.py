"""The failures summary of a tick or a replay: how many failed with which error, and the first few.

``vardiya tick`` and ``vardiya replay`` end with it when anything failed, so the operator sees why
without opening the ledger; the full list (with tracebacks) is ``vardiya errors --job NAME``, the
command the summary names. Pure: the runner adds each failed record as it marks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FailureTally"]

#: Records named in the summary, the first to fail.
FIRST_SHOWN = 5
#: Distinct error lines counted one by one; beyond them a tally counts "other errors" together, so a
#: handler whose errors all differ (an id in every message) cannot grow a report without end.
DISTINCT_ERRORS = 100
_OTHER = "(other errors)"


@dataclass(kw_only=True)
class FailureTally:
    """Failed records of one job: a count per error line, and the first ``FIRST_SHOWN`` records."""

    job: str
    count: int = 0
    by_error: dict[str, int] = field(default_factory=dict)
    #: (period, record, error line) of the first records that failed
    first: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, period: str, record: str, error: str) -> None:
        """Count one failed record."""
        self.count += 1
        line = error if error in self.by_error or len(self.by_error) < DISTINCT_ERRORS else _OTHER
        self.by_error[line] = self.by_error.get(line, 0) + 1
        if len(self.first) < FIRST_SHOWN:
            self.first.append((period, record, error))

    def merge(self, other: FailureTally) -> None:
        """Add another tally of the same job (the next tick of a replay)."""
        for line, count in other.by_error.items():
            key = line if line in self.by_error or len(self.by_error) < DISTINCT_ERRORS else _OTHER
            self.by_error[key] = self.by_error.get(key, 0) + count
        self.count += other.count
        self.first.extend(other.first[: max(0, FIRST_SHOWN - len(self.first))])

    @property
    def command(self) -> str:
        """The command that lists every failure of the job, with its traceback."""
        return f"vardiya errors --job {self.job} --traceback"

    def ranked(self) -> list[tuple[str, int]]:
        """(error line, count), the most frequent first."""
        return sorted(self.by_error.items(), key=lambda entry: (-entry[1], entry[0]))

    def to_json(self) -> dict[str, Any]:
        """The ``failures`` object of ``vardiya tick|replay --json``."""
        return {
            "count": self.count,
            "by_error": [{"error": line, "count": count} for line, count in self.ranked()],
            "first": [{"period": period, "record": record, "error": error} for period, record, error in self.first],
            "more": self.command,
        }
