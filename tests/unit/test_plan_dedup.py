"""The dedup plan: what dedup costs against what it prevents, and the window against the redrive delay."""

from __future__ import annotations

import dataclasses

import pytest

from vardiya.plan.dedup import DedupPlan, plan_dedup
from vardiya.plan.profile import Profile
from vardiya.plan.workload import Workload


@pytest.fixture(scope="module")
def planned(night: Workload, profile: Profile) -> DedupPlan:
    return plan_dedup(night, profile)


def test_key_retention_brings_late_redrive_reprocessing_to_zero(planned: DedupPlan, night: Workload) -> None:
    poison = night.counts()["poison"]
    assert (planned.window_s, planned.redrive_after_s) == (24 * 3600, 72 * 3600)
    assert planned.dead_letter == planned.redriven_records == 100 * poison  # retry_batch: whole batches
    # keys gone after 24 h: every healthy record of a dead batch runs again at the 72 h redrive
    assert planned.reprocessed_without_retention == 100 * poison - poison
    assert planned.reprocessed_with_retention == 0


def test_a_redrive_within_the_window_reprocesses_nothing_either_way(night: Workload, profile: Profile) -> None:
    early = dataclasses.replace(profile, dedup=dataclasses.replace(profile.dedup, redrive_after_s=3600))
    planned = plan_dedup(night.head(3_000), early)
    assert planned.dead_letter > 0
    assert planned.reprocessed_without_retention == planned.reprocessed_with_retention == 0


def test_dedup_costs_little_next_to_the_duplicates_it_prevents(planned: DedupPlan, night: Workload) -> None:
    counts = night.counts()
    # with dedup every record is processed until it passes, and the poison 3 more times at the redrive
    assert planned.processed_with_dedup == 20_000 + counts["transient"] + 2 * counts["poison"] + 3 * counts["poison"]
    assert planned.processed_without_dedup > 2 * planned.processed_with_dedup - 1_000
    # reads of 15 ms for every record looked up and writes of 10 ms for every record settled
    assert planned.dedup_ms == pytest.approx(15 * planned.processed_without_dedup + 10 * planned.processed_with_dedup)
    assert planned.dedup_cost < planned.prevented_cost / 5
    assert planned.cost_with_dedup < planned.cost_without_dedup


def test_the_json_has_the_cli_shape(planned: DedupPlan) -> None:
    document = planned.to_json()
    assert list(document)[:5] == [
        "window_s", "redrive_after_s", "dead_letter", "reprocessed_without_retention", "reprocessed_with_retention"
    ]
