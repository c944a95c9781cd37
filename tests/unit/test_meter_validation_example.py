"""The meter-validation example: its night of outcomes, its handlers, and the validation they share."""

from __future__ import annotations

import filecmp
from collections import Counter
from pathlib import Path

import pytest

from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.examples.meter_validation import NIGHT_CSV, Outcome, build_app, load_outcomes, load_records
from vardiya.invoke.handlers import FailurePolicy, Model
from vardiya.invoke.invoker import Invoker

EXAMPLE_CSV = Path(__file__).resolve().parents[2] / "examples" / "meter_validation" / "validation-night.csv"


def test_the_night_has_19551_ok_436_transient_and_13_poison_readings() -> None:
    outcomes = load_outcomes(NIGHT_CSV)
    assert Counter(outcomes.values()) == {Outcome.OK: 19_551, Outcome.TRANSIENT: 436, Outcome.POISON: 13}
    assert sorted(outcomes) == list(range(1, 20_001))


def test_the_packaged_night_is_the_examples_night() -> None:
    assert filecmp.cmp(NIGHT_CSV, EXAMPLE_CSV, shallow=False)


def test_records_are_id_payloads_in_file_order() -> None:
    assert load_records(NIGHT_CSV, limit=3) == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert len(load_records(NIGHT_CSV)) == 20_000


def test_an_unknown_outcome_names_its_line(tmp_path: Path) -> None:
    night = tmp_path / "night.csv"
    night.write_text("record,outcome\n1,ok\n2,flaky\n3,poison\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"line 3: unknown outcome 'flaky' for record 2; use one of: ok, transient"):
        load_outcomes(night)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("id,result\n1,ok\n", "line 1: expected the header 'record,outcome'"),
        ("record,outcome\n1,ok\nx,ok\n", "line 3: record 'x' is not a whole number"),
        ("record,outcome\n1,ok\n1,poison\n", "line 3: record 1 appears twice"),
        ("record,outcome\n1,ok,extra\n", "line 2: expected record,outcome"),
    ],
)
def test_a_malformed_night_is_rejected_with_its_line(tmp_path: Path, text: str, fragment: str) -> None:
    night = tmp_path / "night.csv"
    night.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInput, match=fragment):
        load_outcomes(night)


def test_a_missing_night_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read the night's outcomes"):
        load_outcomes(tmp_path / "absent.csv")


def test_one_function_serves_every_model_with_the_profiles_settings() -> None:
    handlers = build_app(NIGHT_CSV).handlers
    assert {handler.fn for handler in handlers.values()} == {handlers["validate_sync"].fn}
    assert handlers["validate_sync"].model is Model.SYNC
    assert (handlers["validate_sync"].caller_retry.count, handlers["validate_sync"].caller_retry.delay_s) == (1, 0.2)
    assert handlers["validate_async"].model is Model.ASYNC
    assert handlers["validate_async"].retry.max_attempts == 3 and handlers["validate_async"].retry.waits() == (60, 60)
    stream = handlers["validate_stream"]
    assert (stream.model, stream.policy, stream.batch_size, stream.time_limit_s) == (
        Model.STREAM, FailurePolicy.RETRY_BATCH, 100, 900
    )
    assert handlers["validate_stream_bisect"].policy is FailurePolicy.BISECT
    assert handlers["validate_stream_report"].policy is FailurePolicy.REPORT_FAILURES
    dedup = handlers["validate_stream_dedup"].dedup
    assert dedup is not None and dedup.window_s == 86_400


def test_ok_passes_transient_passes_on_the_callers_retry_and_poison_reaches_the_caller(tmp_path: Path) -> None:
    night = tmp_path / "night.csv"
    night.write_text("record,outcome\n1,ok\n2,transient\n3,poison\n", encoding="utf-8")
    clock = VirtualClock()
    invoker = Invoker(None, build_app(night), clock=clock)
    assert invoker.call("validate_sync", {"id": 1}) == {"id": 1, "valid": True}
    assert invoker.call("validate_sync", {"id": 2}) == {"id": 2, "valid": True}
    assert clock.monotonic() == pytest.approx(0.2)  # the one retry, 200 ms later, on the virtual clock
    with pytest.raises(ValueError, match="reading 3: meter index went backwards"):
        invoker.call("validate_sync", {"id": 3})
    with pytest.raises(LookupError, match="reading 4 is not in the night's outcomes"):
        invoker.call("validate_sync", {"id": 4})
    metrics = invoker.metrics("validate_sync")
    assert (metrics.calls, metrics.caller_errors) == (1 + 2 + 2 + 2, 2)
