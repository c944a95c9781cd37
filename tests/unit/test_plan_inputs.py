"""The planner's inputs: the workload CSV and the cost profile, and every way they can be wrong."""

from __future__ import annotations

import filecmp
import tomllib
from pathlib import Path
from typing import Any

import pytest

from vardiya.errors import InvalidInput
from vardiya.invoke.handlers import FailurePolicy
from vardiya.invoke.retry import FixedWait
from vardiya.plan.profile import load_profile, parse_profile
from vardiya.plan.workload import Outcome, Workload, load_workload, parse_workload

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "examples" / "meter_validation" / "profile.toml"
PACKAGED_PROFILE = ROOT / "src" / "vardiya" / "examples" / "data" / "profile.toml"
NIGHT = ROOT / "examples" / "meter_validation" / "validation-night.csv"


def _profile() -> dict[str, Any]:
    return tomllib.loads(PROFILE.read_text(encoding="utf-8"))


# -- the workload ----------------------------------------------------------------------------------


def test_the_example_night_reads_as_a_workload() -> None:
    workload = load_workload(NIGHT)
    assert workload.counts() == {"ok": 19_551, "transient": 436, "poison": 13}
    assert [entry.record for entry in workload.records[:3]] == [1, 2, 3]
    assert all(entry.duration_ms is None for entry in workload.records)


def test_durations_are_optional_per_line_and_ids_may_be_text() -> None:
    workload = parse_workload(["record,outcome,duration_ms", "a,ok,120", "b,transient,", "7,poison,0.5", ""])
    assert [(entry.record, entry.outcome, entry.duration_ms) for entry in workload.records] == [
        ("a", Outcome.OK, 120.0),
        ("b", Outcome.TRANSIENT, None),
        (7, Outcome.POISON, 0.5),
    ]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["record,outcome", "1,ok", "2,flaky"], r"w, line 3: unknown outcome 'flaky' for record 2; use one of: ok, transient, poison"),
        (["record,result", "1,ok"], r"w, line 1: expected the header 'record,outcome'"),
        (["record,outcome", "1,ok", "1,poison"], r"w, line 3: record 1 appears twice"),
        (["record,outcome,duration_ms", "1,ok,-4"], r"w, line 2: duration_ms '-4' is not a number of 0 or more"),
        (["record,outcome,duration_ms", "1,ok,fast"], r"w, line 2: duration_ms 'fast'"),
        (["record,outcome", "1,ok,5"], r"w, line 2: expected record,outcome, got '1,ok,5'"),
        (["record,outcome", ",ok"], r"w, line 2: the record id is empty"),
        (["record,outcome"], r"w: a workload needs at least one record"),
    ],
)
def test_a_bad_workload_says_which_line(lines: list[str], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_workload(lines, source="w")


def test_a_missing_workload_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"cannot read the workload .*nope.csv: No such file or directory"):
        load_workload(tmp_path / "nope.csv")


def test_a_workload_can_be_given_as_a_mapping() -> None:
    workload = Workload.of({1: "ok", 2: Outcome.POISON})
    assert workload.counts() == {"ok": 1, "transient": 0, "poison": 1}
    with pytest.raises(InvalidInput, match="unknown outcome 'bad'"):
        Workload.of({1: "bad"})


# -- the profile -----------------------------------------------------------------------------------


def test_the_example_profile_is_the_spec_s() -> None:
    profile = load_profile(PROFILE)
    assert (profile.per_call_overhead_ms, profile.per_record_ms, profile.accept_ms) == (250, 400, 5)
    assert (profile.arrival_rate_per_s, profile.time_limit_s, profile.concurrency) == (250, 900, None)
    assert (profile.caller_retry.count, profile.caller_retry.delay_s) == (1, 0.2)
    assert profile.retry.max_attempts == 3 and profile.retry.wait == FixedWait(seconds=60)
    assert (profile.prices.per_call, profile.prices.per_ms) == (0.0005, 0.0000025)
    assert (profile.dedup.read_ms, profile.dedup.write_ms) == (15, 10)
    assert (profile.dedup.window_s, profile.dedup.redrive_after_s) == (24 * 3600, 72 * 3600)
    assert profile.batch_sizes == (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
    assert profile.policy is FailurePolicy.RETRY_BATCH and profile.batch_size == 100
    assert profile.batch_window_s is None
    assert profile.batch_ms(2500) == 1_000_250 and not profile.fits(2500) and profile.fits(2249)


def test_the_packaged_profile_is_the_example_s() -> None:
    assert filecmp.cmp(PROFILE, PACKAGED_PROFILE, shallow=False)


def test_a_worker_pool_and_a_batch_window_are_read() -> None:
    document = _profile() | {"concurrency": 8, "batch_window_s": 2}
    profile = parse_profile(document)
    assert (profile.concurrency, profile.batch_window_s) == (8, 2.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"per_recrod_ms": 400}, r"p: unknown key 'per_recrod_ms' \(did you mean 'per_record_ms'\?\)"),
        ({"retry": {"attempts": 3, "wait_s": 60, "wiat": 1}}, r"p, \[retry\]: unknown key 'wiat' \(did you mean 'wait_s'\?\)"),
        ({"prices": {"per_call": 1, "per_ms": 1, "per_byte": 1}}, r"p, \[prices\]: unknown key 'per_byte'"),
        ({"dedup": {"read_ms": 1, "write_ms": 1, "window_s": 60}}, r"p, \[dedup\]: missing key 'redrive_after_s'"),
        ({"concurrency": "lots"}, r"concurrency must be 'unbounded' or a number of workers, got 'lots'"),
        ({"concurrency": 0}, r"concurrency must be a whole number of at least 1, got 0"),
        ({"batch_sizes": [1, 0]}, r"every one of batch_sizes must be a whole number of at least 1, got 0"),
        ({"batch_size": 0}, r"batch_size must be a whole number of at least 1, got 0"),
        ({"arrival_rate_per_s": 0}, r"arrival_rate_per_s must be more than 0, got 0"),
        ({"per_record_ms": True}, r"per_record_ms must be a finite number, got True"),
        ({"policy": "split"}, r"unknown policy 'split'; use one of: retry_batch, bisect, report_failures"),
        ({"retry": {"attempts": 0, "wait_s": 60}}, r"p: max_attempts must be a whole number of at least 1"),
        ({"retry": "3 x 60"}, r"p: retry must be a table"),
    ],
)
def test_a_bad_profile_names_the_key(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_profile(_profile() | change, source="p")


@pytest.mark.parametrize("key", ["per_record_ms", "time_limit_s", "prices", "retry"])
def test_a_missing_required_key_is_named(key: str) -> None:
    document = _profile()
    del document[key]
    with pytest.raises(InvalidInput, match=rf"p: missing key '{key}'; the required keys are per_call_overhead_ms, "):
        parse_profile(document, source="p")


def test_a_profile_that_is_not_toml_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("per_record_ms = = 4\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"p.toml is not valid TOML"):
        load_profile(path)
    with pytest.raises(InvalidInput, match=r"cannot read the profile .*missing.toml"):
        load_profile(tmp_path / "missing.toml")
