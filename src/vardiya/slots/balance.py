"""Reports that judge a slot scheme from the ids alone, before anything runs. Pure.

``balance`` answers "how evenly do these ids fill B slots, and should I use mod or hash?": counts per
slot, their spread and deviation from the mean, and warnings when the ids share a pattern with B (all
even, all multiples of B, a common factor, gaps that hit one residue class), because such a pattern
leaves slots empty under ``mod`` however many ids there are. ``migration_plan`` answers "what does
switching schemes do?": who moves window, and how long the longest and shortest wait between two runs
of a record is across the switch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from math import gcd

from ..clock import ensure_aware
from ..errors import InvalidInput
from .hashing import RecordId, hash_slot
from .scheme import Assign, SlotScheme, describe_duration

__all__ = ["BalanceReport", "MigrationPlan", "balance", "migration_plan", "parse_ids"]

BALANCED_PCT = 10.0
"""Deviation from the mean (either way, in percent) up to which ``mod`` counts as balanced.

The source's real id set sat at +5.29 % / -4.81 % and was judged balanced enough to keep ``mod``."""

_UTC = UTC
_INTEGER = re.compile(r"[+-]?[0-9]+")
_LISTED = 12  # slot numbers shown in a warning before it says "..."


@dataclass(frozen=True, kw_only=True)
class BalanceReport:
    """Counts per slot and what they mean; ``to_json`` gives the ``vardiya slots balance`` document.

    Percentages are signed deviations from the mean (``min_dev_pct`` is negative or zero). Figures that
    are undefined (no ids, or an empty slot for ``max_over_min``) are ``None``.
    """

    slots: int
    assign: Assign
    total: int
    mean: float
    min: int
    max: int
    spread: int
    max_over_min: float | None
    max_dev_pct: float | None
    min_dev_pct: float | None
    counts: tuple[int, ...]
    empty_slots: tuple[int, ...]
    warnings: tuple[str, ...]
    recommendation: str

    def to_json(self) -> dict[str, object]:
        """The JSON document of cli.md (lists for sequences, the assign as its name)."""
        document = asdict(self)
        document["assign"] = self.assign.value
        for field in ("counts", "empty_slots", "warnings"):
            document[field] = list(document[field])
        return document


@dataclass(frozen=True, kw_only=True)
class MigrationPlan:
    """What a scheme change does; ``to_json`` gives the ``vardiya slots migrate`` document.

    ``moved`` counts records whose window starts at another wall-time offset in the period;
    ``moved_out`` those whose new window is not inside their old one (0 for 24 -> 48 nested: a
    refinement). Gaps are seconds between a record's last run under the old scheme (the period before
    the switch) and its first run under the new one (the switch period), at each scheme's first run time
    (the window start unless the plan was given offsets).
    """

    total: int
    moved: int
    moved_pct: float
    moved_out: int
    effective_from: str
    max_gap: float | None
    min_gap: float | None

    def to_json(self) -> dict[str, object]:
        """The JSON document of cli.md."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class _Figures:
    mean: float
    min: int
    max: int
    max_over_min: float | None
    max_dev_pct: float | None
    min_dev_pct: float | None
    empty: int

    @classmethod
    def of(cls, counts: Sequence[int]) -> _Figures:
        total, low, high = sum(counts), min(counts), max(counts)
        mean = total / len(counts)
        return cls(
            mean=mean,
            min=low,
            max=high,
            max_over_min=high / low if low else None,
            max_dev_pct=(high - mean) / mean * 100 if total else None,
            min_dev_pct=(low - mean) / mean * 100 if total else None,
            empty=sum(1 for count in counts if count == 0),
        )

    @property
    def balanced(self) -> bool:
        return (
            self.empty == 0
            and self.max_dev_pct is not None
            and self.min_dev_pct is not None
            and self.max_dev_pct <= BALANCED_PCT
            and self.min_dev_pct >= -BALANCED_PCT
        )

    def describe(self) -> str:
        if self.max_over_min is None:
            return f"max/min inf ({self.empty} empty slots)"
        return f"max/min {self.max_over_min:.2f}"


def _listing(slots: Sequence[int]) -> str:
    shown = ", ".join(map(str, slots[:_LISTED]))
    return shown + (", ..." if len(slots) > _LISTED else "")


def _is_int(record_id: object) -> bool:
    return isinstance(record_id, int) and not isinstance(record_id, bool)


def _counts(ids: Sequence[RecordId], slots: int, assign: Assign) -> list[int]:
    counts = [0] * slots
    for record_id in ids:
        if assign is Assign.HASH:
            counts[hash_slot(record_id, slots)] += 1
        elif isinstance(record_id, int):  # MOD is counted only when every id is a whole number
            counts[record_id % slots] += 1
    return counts


def _residue_warnings(ids: Sequence[int], slots: int) -> list[str]:
    """Patterns ``mod`` cannot undo: every id in one residue class of a factor g of B, or skewed gaps."""
    step = 0
    for record_id in ids:
        step = gcd(step, record_id - ids[0])
    factor = gcd(step, slots)  # every id is congruent to ids[0] modulo this factor of B
    if factor > 1:
        residue = ids[0] % factor
        if factor == slots:
            what = f"multiples of {slots}" if residue == 0 else f"congruent to {residue} mod {slots}"
            return [f"all ids are {what}: every record lands in slot {residue}; use assign='hash'"]
        if factor == 2:
            what = "even" if residue == 0 else "odd"
        elif residue == 0:
            what = f"multiples of {factor} (a factor they share with {slots})"
        else:
            what = f"congruent to {residue} mod {factor} (a factor they share with {slots})"
        empty = [slot for slot in range(slots) if slot % factor != residue]
        return [
            (f"all ids are {what}: only slots {residue}, {residue + factor}, ... get records and "
             f"{len(empty)} slots stay empty ({_listing(empty)}); use assign='hash'")
        ]
    distinct = set(ids)
    low = min(distinct)
    span = max(distinct) - low + 1
    overall = (span - len(distinct)) / span
    present = [0] * slots
    for record_id in distinct:
        present[record_id % slots] += 1
    hit = []
    for slot in range(slots):
        possible = span // slots + (1 if (slot - low) % slots < span % slots else 0)
        missing = (possible - present[slot]) / possible if possible else 0.0
        if missing > 2 * overall and missing - overall > 0.10:
            hit.append((slot, missing))
    if hit and len(hit) <= max(1, slots // 4):
        worst = max(share for _, share in hit)
        return [
            (f"the gaps in the ids hit slot(s) {_listing([slot for slot, _ in hit])}: up to {worst:.0%} of "
             f"their ids are missing against {overall:.0%} overall, so they run light; "
             "assign='hash' would spread the gaps")
        ]
    return []


def _recommendation(mod: _Figures | None, hashed: _Figures) -> str:
    if mod is None:
        return f"mod: not possible (string ids); hash: {hashed.describe()} -> use hash"
    figures = f"mod: {mod.describe()}; hash: {hashed.describe()}"
    if mod.balanced:
        return f"{figures} -> keep mod"
    if hashed.empty < mod.empty or hashed.max - hashed.min < mod.max - mod.min:
        return f"{figures} -> use hash"
    return f"{figures} -> keep mod (hash is no better for these ids)"


def balance(
    ids: Iterable[RecordId], scheme_or_slots: SlotScheme | int, assign: Assign | str | None = None
) -> BalanceReport:
    """How ``ids`` fill the slots under ``assign`` (default: the scheme's, or mod), with advice.

    A bare B needs no period: balance depends only on B and the assignment.
    """
    default = scheme_or_slots.assign if isinstance(scheme_or_slots, SlotScheme) else Assign.MOD
    try:
        chosen = Assign(assign) if assign is not None else default
    except ValueError:
        raise InvalidInput(f"assign={assign!r} is not known; use 'mod' or 'hash'") from None
    if isinstance(scheme_or_slots, SlotScheme):
        slots = scheme_or_slots.slots
    else:
        slots = scheme_or_slots
        if isinstance(slots, bool) or not isinstance(slots, int) or slots <= 0:
            raise InvalidInput(f"slots must be a positive integer, got {slots!r}; use e.g. --slots 24")
    records = list(ids)
    all_int = all(_is_int(record_id) for record_id in records)
    if chosen is Assign.MOD and not all_int:
        bad = next(record_id for record_id in records if not _is_int(record_id))
        raise InvalidInput(
            f"id {bad!r} is not an integer but assign='mod' needs integer ids; "
            "use --assign hash for string ids"
        )
    hash_counts = _counts(records, slots, Assign.HASH)
    mod_counts = _counts(records, slots, Assign.MOD) if all_int else None
    counts = hash_counts if chosen is Assign.HASH else mod_counts
    assert counts is not None
    figures = _Figures.of(counts)
    empty = tuple(slot for slot, count in enumerate(counts) if count == 0)
    total = len(records)

    warnings: list[str] = []
    if total == 0:
        warnings.append("no ids given: every slot is empty")
    elif total < slots:
        warnings.append(f"only {total} ids for {slots} slots: at least {slots - total} slots stay empty")
    if chosen is Assign.MOD and total >= 2:
        warnings.extend(_residue_warnings(records, slots))  # type: ignore[arg-type]
    if empty and total:
        warnings.append(f"{len(empty)} of {slots} slots get no records: {_listing(empty)}")
    if figures.max_dev_pct is not None and figures.max_dev_pct > BALANCED_PCT and total >= slots:
        warnings.append(f"the fullest slot holds {figures.max_dev_pct:.1f} % more records than the mean")

    if total == 0:
        recommendation = "no ids given: nothing to recommend"
    else:
        mod_figures = _Figures.of(mod_counts) if mod_counts is not None else None
        recommendation = _recommendation(mod_figures, _Figures.of(hash_counts))
    return BalanceReport(
        slots=slots,
        assign=chosen,
        total=total,
        mean=figures.mean,
        min=figures.min,
        max=figures.max,
        spread=figures.max - figures.min,
        max_over_min=figures.max_over_min,
        max_dev_pct=figures.max_dev_pct,
        min_dev_pct=figures.min_dev_pct,
        counts=tuple(counts),
        empty_slots=empty,
        warnings=tuple(warnings),
        recommendation=recommendation,
    )


def migration_plan(
    ids: Iterable[RecordId], old: SlotScheme, new: SlotScheme, switch_period_start: datetime, *,
    old_offset: timedelta = timedelta(0), new_offset: timedelta = timedelta(0),
) -> MigrationPlan:
    """What switching from ``old`` to ``new`` at the start of a period does to ``ids``.

    ``old_offset`` and ``new_offset`` are the first run time of a slot under each scheme (a
    ``SchemeChange`` may bring its own, e.g. :01 and :31 on 24 slots becoming :01 on 48): the gaps are
    between a record's first runs, so they show what the change of run times adds.

    The switch takes effect at a period boundary: the period before it runs entirely under ``old``, the
    switch period entirely under ``new``. As the ledger is keyed by (job, record, period), every record
    then has exactly one slot in each period: no duplicate and no missed record in the switch period.
    """
    switch = ensure_aware(switch_period_start, "switch_period_start")
    for label, offset, scheme in (("old", old_offset, old), ("new", new_offset, new)):
        if not isinstance(offset, timedelta) or not timedelta(0) <= offset < scheme.window_length:
            raise InvalidInput(
                f"the {label} run time {describe_duration(offset) if isinstance(offset, timedelta) else repr(offset)} is outside the {describe_duration(scheme.window_length)} slot "
                f"of {scheme.fingerprint}; give an offset from 0 up to the slot's length"
            )
    switch_period = new.period_of(switch)
    if switch_period.start.astimezone(_UTC) != switch:
        raise InvalidInput(
            f"a scheme switch takes effect at a period boundary; {switch.isoformat()} is inside period "
            f"{switch_period.key}: use {switch_period.end.isoformat()}"
        )
    last_period = old.period_of(switch - timedelta(microseconds=1))
    if last_period.end.astimezone(_UTC) != switch:
        raise InvalidInput(
            f"{switch.isoformat()} is not a period boundary of the old scheme {old.fingerprint}; "
            "switch where both schemes start a period"
        )
    # In UTC: Python subtracts two datetimes of one zone by wall time, which is wrong across DST.
    old_starts = [old.window(last_period, slot).start.astimezone(_UTC) for slot in range(old.slots)]
    new_starts = [new.window(switch_period, slot).start.astimezone(_UTC) for slot in range(new.slots)]
    total = moved = moved_out = 0
    gaps: list[float] = []
    for record_id in ids:
        old_slot, new_slot = old.slot_of(record_id), new.slot_of(record_id)
        old_start, new_start = old.window_offset(old_slot), new.window_offset(new_slot)
        total += 1
        moved += old_start != new_start
        moved_out += not (
            old_start <= new_start
            and new_start + new.window_length <= old_start + old.window_length
        )
        gaps.append((new_starts[new_slot] + new_offset - old_starts[old_slot] - old_offset).total_seconds())
    return MigrationPlan(
        total=total,
        moved=moved,
        moved_pct=moved / total * 100 if total else 0.0,
        moved_out=moved_out,
        effective_from=switch.astimezone(new.zone).isoformat(),
        max_gap=max(gaps) if gaps else None,
        min_gap=min(gaps) if gaps else None,
    )


def parse_ids(
    lines: Iterable[str], source_name: str = "ids", *, require_int: bool = False
) -> list[RecordId]:
    """Ids one per line (blank lines ignored): an integer line becomes an int, anything else a str.

    Only the canonical decimal form becomes an int (``42``, ``-5``); ``007`` stays text, because under
    ``hash`` the text is what gets hashed, in Python and in the database alike. With ``require_int``
    (``assign="mod"``) any integer literal is accepted and anything else is an error naming the line.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    ids: list[RecordId] = []
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        if _INTEGER.fullmatch(text) and (require_int or str(int(text)) == text):
            ids.append(int(text))
        elif require_int:
            raise InvalidInput(
                f"{source_name} line {number}: {text!r} is not an integer id; "
                "use --assign hash for string ids"
            )
        else:
            ids.append(text)
    return ids
