"""``vardiya demo``: the main job, end to end, on embedded SQLite in a fresh directory.

The demo is a list of sections; each one takes the demo's directory, its store and a console, shows one
capability at work and returns figures the acceptance tests check.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.rule import Rule

from ..clock import VirtualClock
from ..store import open_store
from .invocation import invocation_section
from .nightly import nightly_section
from .pipelines import pipelines_section
from .planner import planner_section
from .primitives import primitives_section
from .services import services_section

__all__ = ["DemoResult", "run_demo"]

#: The demo's virtual day: every time it shows is reproducible.
DEMO_START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
SECTIONS = (primitives_section, nightly_section, pipelines_section, invocation_section, planner_section, services_section)


@dataclass(kw_only=True)
class DemoResult:
    """What the demo did, section by section."""

    directory: Path
    store_url: str
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_demo(directory: Path, console: Console) -> DemoResult:
    """Run every section in ``directory`` (its old demo files are replaced) and return their figures."""
    directory = directory.resolve()
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    store_path = directory / "vardiya.db"
    url = f"sqlite:///{store_path}"
    clock = VirtualClock(DEMO_START)
    result = DemoResult(directory=directory, store_url=url)
    console.print(Rule("vardiya demo"))
    console.print(f"state store: [bold]{store_path}[/] (embedded SQLite, created and migrated just now)")
    with open_store(url, clock=clock) as store:
        for section in SECTIONS:
            name, figures = section(directory=directory, store=store, clock=clock, console=console)
            result.sections[name] = figures
    console.print(Rule())
    console.print(f"everything the demo wrote is in {directory}")
    return result
