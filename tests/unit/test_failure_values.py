"""The pure parts of "what failed and why": bounded tracebacks, the failures tally, SLA declarations."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vardiya import App, IterableSource, SlotScheme
from vardiya.errors import ConfigurationError
from vardiya.pipeline import Pipeline
from vardiya.sla import check_sla, describe_miss, over_sla
from vardiya.slots.failures import DISTINCT_ERRORS, FIRST_SHOWN, FailureTally
from vardiya.tracebacks import TRACEBACK_LIMIT, bound_traceback, format_traceback


def test_a_short_traceback_is_kept_whole_and_nul_free() -> None:
    assert bound_traceback("Traceback\n  File x\nKeyError: 'a\x00b'\n") == "Traceback\n  File x\nKeyError: 'a\\x00b'"


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=300), min_size=1, max_size=200))
def test_a_bounded_traceback_fits_and_keeps_whole_last_lines(lines: list[str]) -> None:
    lines = [line.replace("\n", " ").replace("\r", " ") for line in lines]
    text = "\n".join(lines)
    bounded = bound_traceback(text, limit=2_000)
    assert len(bounded.encode()) <= 2_000
    assert "\x00" not in bounded
    if len(text.replace("\x00", "\\x00").rstrip("\n").encode()) > 2_000:
        header, _, kept = bounded.partition("\n")
        assert header.startswith("[traceback cut: its first ")
        clean = text.replace("\x00", "\\x00").rstrip("\n")
        assert clean.endswith(kept)


def test_format_traceback_names_the_raising_line() -> None:
    try:
        {}["db"]
    except KeyError as error:
        text = format_traceback(error)
    assert text.startswith("Traceback (most recent call last):")
    assert 'in test_format_traceback_names_the_raising_line' in text and text.endswith("KeyError: 'db'")
    assert len(text.encode()) <= TRACEBACK_LIMIT


def test_a_tally_counts_by_error_keeps_the_first_and_bounds_distinct_lines() -> None:
    tally = FailureTally(job="nightly")
    for record in range(DISTINCT_ERRORS + 50):
        tally.add("2026-12-01", str(record), f"ValueError: {record}")
    assert tally.count == DISTINCT_ERRORS + 50
    assert len(tally.by_error) == DISTINCT_ERRORS + 1
    assert tally.by_error["(other errors)"] == 50
    assert len(tally.first) == FIRST_SHOWN
    other = FailureTally(job="nightly")
    other.add("2026-12-02", "7", "KeyError: 'db'")
    tally.merge(other)
    assert tally.count == DISTINCT_ERRORS + 51 and len(tally.first) == FIRST_SHOWN
    assert tally.to_json()["more"] == "vardiya errors --job nightly --traceback"


def test_sla_is_a_positive_duration() -> None:
    assert check_sla(None, "job 'a'") is None
    assert check_sla(90, "job 'a'") == timedelta(seconds=90)
    assert over_sla(timedelta(seconds=1), 1.5) and not over_sla(timedelta(seconds=1), 0.5) and not over_sla(None, 9e9)
    assert describe_miss("job", "a", "tick x", 90.0, timedelta(minutes=1)) == (
        "sla missed: job a (tick x) took 1.5 min, over its sla of 1.0 min"
    )


@pytest.mark.parametrize("bad", [timedelta(0), -5, "5m", True])
def test_a_bad_sla_is_refused_at_declaration_for_jobs_handlers_and_stages(bad: object) -> None:
    app = App("bad")
    with pytest.raises(ConfigurationError, match="job 'nightly': sla must be"):
        app.slot_job("nightly", scheme=SlotScheme(slots=1), source=IterableSource([1]), sla=bad)(lambda record: None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="handler 'charge': sla must be"):
        app.handler("charge", sla=bad)(lambda record, context: None)
    with pytest.raises(ConfigurationError, match="stage 'load': sla must be"):
        Pipeline("p").stage(name="load", sla=bad)(lambda context: None)  # type: ignore[arg-type]
