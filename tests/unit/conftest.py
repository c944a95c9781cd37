"""Fixtures of the unit tests: the example night and its cost profile (the planner tests share them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vardiya.plan.profile import Profile, load_profile
from vardiya.plan.workload import Workload, load_workload

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "meter_validation"


@pytest.fixture(scope="module")
def night() -> Workload:
    """The spec's night: 20,000 readings (19,551 ok, 436 transient, 13 poison)."""
    return load_workload(EXAMPLE / "validation-night.csv")


@pytest.fixture(scope="module")
def profile() -> Profile:
    """The spec's example cost profile."""
    return load_profile(EXAMPLE / "profile.toml")
