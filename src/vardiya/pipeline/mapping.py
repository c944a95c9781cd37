"""Dependency mappings: which upstream partitions a downstream partition reads. Pure, no I/O.

A stage declares, per upstream stage, one or more mappings; each maps a downstream partition key to
upstream keys::

    same()            the same key                          consumption@2026-07 <- clean@2026-07
    offset(-1)        one position earlier                  consumption@2026-07 <- clean@2026-06
    window(-2, 0)     positions -2 .. 0, both included     2026-05, 2026-06, 2026-07
    all_partitions()  every upstream partition (fan-in)     a yearly report <- every month
    custom(fn)        fn(downstream_key, upstream_set) -> the upstream keys, checked against the set

Rules that decide the edge set:

- ``same``, ``offset`` and ``window`` count in the upstream set's order, from the downstream key's
  position there. Between two stages with the same partition set that is plain position arithmetic.
  Between differently partitioned stages the downstream key is looked up in the upstream set by
  equality; a downstream key the upstream set lacks is a ``ConfigurationError`` (the sets differ and
  the mapping cannot say what to read: use ``all_partitions()`` or ``custom``).
- A position before the first upstream partition (or after the last) yields no edge for that task: the
  first month's consumption has no previous month, by definition, not by error.
- A key a custom mapping returns that is not in the upstream set is a ``ConfigurationError`` naming
  the stage, the key and the mapping: a custom mapping has no "before the first" to fall off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ..errors import ConfigurationError
from .partitions import PartitionSet

__all__ = [
    "CustomMapping",
    "MappingKind",
    "PartitionMapping",
    "all_partitions",
    "custom",
    "offset",
    "same",
    "window",
]

CustomMapping = Callable[[str, PartitionSet], Iterable[str]]


class MappingKind(StrEnum):
    """The shape of a dependency mapping."""

    SAME = "same"
    OFFSET = "offset"
    WINDOW = "window"
    ALL = "all_partitions"
    CUSTOM = "custom"


@dataclass(frozen=True, kw_only=True)
class PartitionMapping:
    """A downstream key -> upstream keys rule; build one with ``same()``, ``offset()``, ``window()``, ...

    ``first`` and ``last`` are the relative positions read (both included): 0..0 for same, k..k for
    offset(k), a..b for window(a, b). ``function`` is set for custom mappings only.
    """

    kind: MappingKind
    first: int = 0
    last: int = 0
    function: CustomMapping | None = None

    def __str__(self) -> str:
        if self.kind is MappingKind.OFFSET:
            return f"offset({self.first})"
        if self.kind is MappingKind.WINDOW:
            return f"window({self.first}, {self.last})"
        if self.kind is MappingKind.CUSTOM:
            name = getattr(self.function, "__qualname__", None) or repr(self.function)
            return f"custom({name})"
        return f"{self.kind.value}()"

    def resolve(
        self, *, stage: str, downstream: PartitionSet, upstream_stage: str, upstream: PartitionSet
    ) -> list[Sequence[int]]:
        """For every downstream position, the upstream positions it reads (possibly none).

        Resolved once per declared dependency, not once per task, so that a 100,000-task graph builds
        with a few list operations per task.
        """
        if self.kind is MappingKind.ALL:
            everything = range(len(upstream))
            return [everything] * len(downstream)
        if self.kind is MappingKind.CUSTOM:
            return self._resolve_custom(stage, downstream, upstream_stage, upstream)
        anchors = self._anchors(stage, downstream, upstream_stage, upstream)
        size, first, last = len(upstream), self.first, self.last
        return [range(max(0, anchor + first), min(size, anchor + last + 1)) for anchor in anchors]

    def _anchors(
        self, stage: str, downstream: PartitionSet, upstream_stage: str, upstream: PartitionSet
    ) -> Sequence[int]:
        """The upstream position of each downstream key, which the relative positions count from."""
        if downstream.keys == upstream.keys:
            return range(len(downstream))
        anchors: list[int] = []
        for key in downstream.keys:
            position = upstream.position(key)
            if position is None:
                raise ConfigurationError(
                    f"stage {stage!r} depends on {upstream_stage!r} with {self}, but its partition "
                    f"{key!r} is not a partition of {upstream_stage!r}: the two stages are partitioned "
                    f"differently ({downstream.label} and {upstream.label}), so {self} cannot say which "
                    "upstream partition to read; partition them alike, or use all_partitions() or "
                    "custom(fn)"
                )
            anchors.append(position)
        return anchors

    def _resolve_custom(
        self, stage: str, downstream: PartitionSet, upstream_stage: str, upstream: PartitionSet
    ) -> list[Sequence[int]]:
        assert self.function is not None
        resolved: list[Sequence[int]] = []
        for key in downstream.keys:
            where = f"stage {stage!r} depends on {upstream_stage!r} with {self}, which for partition {key!r}"
            try:
                returned = self.function(key, upstream)
                keys = None if isinstance(returned, str) else list(returned)
            except Exception as error:
                raise ConfigurationError(f"{where} raised {type(error).__name__}: {error}") from error
            if keys is None:
                raise ConfigurationError(f"{where} returned {returned!r}; return a list of upstream keys")
            positions: dict[int, None] = {}  # a dict keeps the order and drops repeats
            for upstream_key in keys:
                position = upstream.position(upstream_key) if isinstance(upstream_key, str) else None
                if position is None:
                    raise ConfigurationError(
                        f"{where} returned {upstream_key!r}, which is not a partition of "
                        f"{upstream_stage!r} ({upstream.label}); return only keys of the upstream set"
                    )
                positions[position] = None
            resolved.append(tuple(positions))
        return resolved


def _checked_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{what} must be an integer, got {value!r}")
    return value


def same() -> PartitionMapping:
    """The downstream partition reads the upstream partition with the same key."""
    return PartitionMapping(kind=MappingKind.SAME)


def offset(count: int) -> PartitionMapping:
    """The upstream partition ``count`` positions away: ``offset(-1)`` is the previous period."""
    count = _checked_int(count, "offset(count)")
    return PartitionMapping(kind=MappingKind.OFFSET, first=count, last=count)


def window(first: int, last: int) -> PartitionMapping:
    """The upstream partitions at relative positions ``first..last`` (both included): ``window(-2, 0)``."""
    first, last = _checked_int(first, "window(first, ...)"), _checked_int(last, "window(..., last)")
    if first > last:
        raise ConfigurationError(
            f"window({first}, {last}) is empty; the earlier position comes first: window({last}, {first})"
        )
    return PartitionMapping(kind=MappingKind.WINDOW, first=first, last=last)


def all_partitions() -> PartitionMapping:
    """Every upstream partition (fan-in), e.g. a yearly report over all months."""
    return PartitionMapping(kind=MappingKind.ALL)


def custom(function: CustomMapping) -> PartitionMapping:
    """``function(downstream_key, upstream_set)`` returns the upstream keys; each is checked to exist."""
    if not callable(function):
        raise ConfigurationError(
            f"custom() needs a function (downstream_key, upstream_set) -> keys, got {function!r}"
        )
    return PartitionMapping(kind=MappingKind.CUSTOM, function=function)
