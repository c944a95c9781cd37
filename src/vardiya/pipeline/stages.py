"""Stages and pipelines as declared: names, partition sets, dependencies. Pure, no I/O.

A ``Stage`` is a step of the pipeline; a ``Pipeline`` is its stages in declaration order, which is the
tie-break of the graph's topological order. Either build stages directly or use the decorator::

    pipeline = Pipeline("meters")

    @pipeline.stage(partitions=Monthly(start="2026-01", end="2026-12"),
                    depends_on={"clean": [same(), offset(-1)]})
    def consumption(context): ...

Declarations are checked when they are made (names, types, counts); whether they fit together
(unknown upstream stages, cycles) is checked by ``build_graph``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any, TypeVar, cast, overload

from ..errors import ConfigurationError
from ..limits import check_name
from ..sla import check_sla
from .mapping import PartitionMapping
from .partitions import PartitionSet, Unpartitioned

__all__ = ["Pipeline", "Stage"]

StageFunction = TypeVar("StageFunction", bound=Callable[..., Any])
DependsOn = Mapping[str, PartitionMapping | Iterable[PartitionMapping]]


def _check_name(name: object, what: str) -> str:
    """The rule of ``limits.check_name``: no spaces, no '@' (tasks are named stage@key), a bounded length."""
    return check_name(name, f"{what} name")


def _dependencies(stage: str, depends_on: object) -> Mapping[str, tuple[PartitionMapping, ...]]:
    """``{"clean": same()}`` or ``{"clean": [same(), offset(-1)]}`` as name -> tuple of mappings."""
    if not isinstance(depends_on, Mapping):
        raise ConfigurationError(
            f"stage {stage!r}: depends_on must map upstream stage names to mappings, "
            f"e.g. {{'clean': same()}}, got {depends_on!r}"
        )
    normalized: dict[str, tuple[PartitionMapping, ...]] = {}
    for upstream, given in depends_on.items():
        _check_name(upstream, f"stage {stage!r}: upstream stage")
        if isinstance(given, PartitionMapping):
            mappings: tuple[object, ...] = (given,)
        else:
            mappings = tuple(given) if isinstance(given, Iterable) and not isinstance(given, str) else ()
        checked = tuple(mapping for mapping in mappings if isinstance(mapping, PartitionMapping))
        if not mappings or len(checked) != len(mappings):
            raise ConfigurationError(
                f"stage {stage!r} depends on {upstream!r} with {given!r}; give a mapping such as same() "
                "or a non-empty list of them, e.g. [same(), offset(-1)]"
            )
        normalized[upstream] = checked
    return MappingProxyType(normalized)


@dataclass(frozen=True, kw_only=True)
class Stage:
    """A step of a pipeline: a function run once per partition of ``partitions``.

    ``depends_on`` maps an upstream stage name to one mapping or a list of them; several mappings for
    one upstream add their edges together (``[same(), offset(-1)]``: this period and the previous).
    ``retries`` and ``retry_wait_s`` are per stage because a flaky source and a pure transform need
    different patience. Graph building never calls ``fn``. ``sla``: how long one task of the stage is
    expected to take; a task that takes longer is logged, counted and shown by ``vardiya status``.
    """

    name: str
    fn: Callable[..., Any]
    partitions: PartitionSet = field(default_factory=Unpartitioned)
    depends_on: DependsOn = field(default_factory=dict)  # read back as name -> tuple of mappings
    retries: int = 0
    retry_wait_s: float = 0.0
    sla: timedelta | None = None

    def __post_init__(self) -> None:
        _check_name(self.name, "stage")
        if not callable(self.fn):
            raise ConfigurationError(f"stage {self.name!r}: fn must be callable, got {self.fn!r}")
        if not isinstance(self.partitions, PartitionSet):
            raise ConfigurationError(
                f"stage {self.name!r}: partitions must be a partition set such as "
                f"Monthly(start='2026-01', end='2026-12'), got {self.partitions!r}"
            )
        object.__setattr__(self, "depends_on", _dependencies(self.name, self.depends_on))
        retries = self.retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"stage {self.name!r}: retries must be an integer >= 0, got {retries!r}")
        wait = self.retry_wait_s
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < float("inf"):
            raise ConfigurationError(
                f"stage {self.name!r}: retry_wait_s must be a number of seconds >= 0, got {wait!r}"
            )
        object.__setattr__(self, "sla", check_sla(self.sla, f"stage {self.name!r}"))

    @property
    def upstreams(self) -> Mapping[str, tuple[PartitionMapping, ...]]:
        """``depends_on`` as ``__post_init__`` left it: each upstream stage's name -> its mappings."""
        return cast("Mapping[str, tuple[PartitionMapping, ...]]", self.depends_on)


class Pipeline:
    """A named pipeline: its stages in declaration order (the tie-break of the topological order).

    Not a frozen value on purpose: the decorator adds stages to it as a module is imported. Stage
    names are unique; a second stage with a taken name is refused when it is added.
    """

    def __init__(self, name: str, stages: Iterable[Stage] = ()) -> None:
        self._name = _check_name(name, "pipeline")
        self._stages: dict[str, Stage] = {}
        for stage in stages:
            self.add(stage)

    @property
    def name(self) -> str:
        """The pipeline's name."""
        return self._name

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages, in declaration order."""
        return tuple(self._stages.values())

    def __repr__(self) -> str:
        return f"Pipeline({self._name!r}, stages=[{', '.join(self._stages)}])"

    def add(self, stage: Stage) -> Stage:
        """Add a declared stage; a duplicate name is an error."""
        if not isinstance(stage, Stage):
            raise ConfigurationError(f"pipeline {self._name!r}: {stage!r} is not a Stage")
        if stage.name in self._stages:
            raise ConfigurationError(
                f"pipeline {self._name!r} declares stage {stage.name!r} twice; give each stage its own name"
            )
        self._stages[stage.name] = stage
        return stage

    @overload
    def stage(self, fn: StageFunction, /) -> StageFunction: ...

    @overload
    def stage(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        partitions: PartitionSet | None = None,
        depends_on: DependsOn | None = None,
        retries: int = 0,
        retry_wait_s: float = 0.0,
        sla: timedelta | None = None,
    ) -> Callable[[StageFunction], StageFunction]: ...

    def stage(
        self,
        fn: StageFunction | None = None,
        /,
        *,
        name: str | None = None,
        partitions: PartitionSet | None = None,
        depends_on: DependsOn | None = None,
        retries: int = 0,
        retry_wait_s: float = 0.0,
        sla: timedelta | None = None,
    ) -> StageFunction | Callable[[StageFunction], StageFunction]:
        """Declare the decorated function as a stage (named after it unless ``name`` is given).

        The function is returned unchanged, so it can still be called and tested as plain code.
        """

        def declare(function: StageFunction) -> StageFunction:
            self.add(
                Stage(
                    name=getattr(function, "__name__", "") if name is None else name,
                    fn=function,
                    partitions=Unpartitioned() if partitions is None else partitions,
                    depends_on={} if depends_on is None else depends_on,
                    retries=retries,
                    retry_wait_s=retry_wait_s,
                    sla=sla,
                )
            )
            return function

        return declare if fn is None else declare(fn)
