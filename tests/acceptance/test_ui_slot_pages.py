"""The dashboard's slot job pages: a tick's records with their outcomes and errors, the balance report of
a job's ids and the not-done records of its closed periods; each JSON endpoint is the CLI's ``--json``."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.test_ui_api import Dashboard, _serving
from tests.support.cli import run_cli


@pytest.fixture(scope="module")
def failed_tick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """The dashboard's store after the tick of slot 1 on 2026-11-20 (a period closed for good) ran with
    record 13 failing."""
    with _serving(tmp_path_factory.mktemp("ticks")) as serving:
        (serving.cwd / "broken_rolling").touch()
        ran = run_cli("replay", "rolling", "--from", "2026-11-20T06:00:00Z", "--to", "2026-11-20T12:00:00Z",
                      *serving.options, cwd=serving.cwd)
        assert ran.code == 1, ran.stderr  # a record failed
        yield serving


def test_a_ticks_page_shows_its_records_outcomes_and_tracebacks(failed_tick: Dashboard) -> None:
    get = failed_tick.client.get
    tick = get("/api/slots/rolling/ticks/2026-11-20/1").json()
    assert tick["counts"] == {"done": 9, "failed": 1} and tick["recorded"] == 10 and not tick["truncated"]
    first = tick["records"][0]  # failed records come first
    assert first["record"] == "13" and first["status"] == "failed" and first["attempts"] >= 1
    assert "record 13 does not add up" in first["error"]
    assert "ValueError: record 13 does not add up" in first["traceback"]
    assert {each["record"] for each in tick["records"]} == {str(record) for record in range(1, 40, 4)}
    assert all(each["traceback"] is None for each in tick["records"][1:])
    assert tick["window_start"].startswith("2026-11-20T06:00") and tick["window_end"].startswith("2026-11-20T12:00")
    # the same failure is the one vardiya errors lists
    listed = failed_tick.cli_json("errors", "--job", "rolling")["failures"]
    assert [(each["what"], each["traceback"]) for each in listed] == [("2026-11-20/13", first["traceback"])]
    limited = get("/api/slots/rolling/ticks/2026-11-20/1", params={"limit": 2}).json()
    assert len(limited["records"]) == 2 and limited["truncated"] and limited["records"][0]["record"] == "13"
    page = get("/slots/rolling/ticks/2026-11-20/1")
    assert page.status_code == 200 and 'data-record="13" data-status="failed"' in page.text
    assert "ValueError: record 13 does not add up" in page.text and page.text.count('data-status="done"') == 9
    # a slot no tick has run yet
    assert get("/api/slots/rolling/ticks/2026-11-20/2").json()["records"] == []
    assert "no record of this slot has run" in get("/slots/rolling/ticks/2026-11-20/2").text


def test_the_job_page_links_each_slot_to_its_tick(failed_tick: Dashboard) -> None:
    page = failed_tick.client.get("/slots", params={"job": "rolling", "period": "2026-11-20"}).text
    assert 'href="/slots/rolling/ticks/2026-11-20/1"' in page and 'data-tick="3"' in page


def test_the_balance_report_is_slots_balance_of_the_jobs_ids(failed_tick: Dashboard, tmp_path: Path) -> None:
    (tmp_path / "ids.txt").write_text("".join(f"{record}\n" for record in range(40)))
    result = run_cli("slots", "balance", "--slots", "4", "--assign", "mod", "--ids", str(tmp_path / "ids.txt"), "--json",
                     cwd=tmp_path)
    assert result.code == 0, result.stderr
    api = failed_tick.client.get("/api/slots/rolling/balance").json()
    assert api == json.loads(result.stdout) and api["counts"] == [10, 10, 10, 10]
    assert 'href="/slots/rolling/balance"' in failed_tick.client.get("/slots", params={"job": "rolling"}).text
    page = failed_tick.client.get("/slots/rolling/balance").text
    assert 'id="slot-balance">40 ids' in page and html.escape(api["recommendation"]) in page
    assert page.count("<td class=\"n\">10</td>") == 4
    assert failed_tick.client.get("/slots/nope/balance").status_code == 404


def test_closed_periods_not_done_records_are_on_the_job_page(failed_tick: Dashboard) -> None:
    get = failed_tick.client.get
    status = get("/api/status").json()
    entry = next(each for each in status["not_done"] if each["job"] == "rolling" and each["period"] == "2026-11-20")
    # slot 0 and 1 ran (record 13 failed), slots 2 and 3 never did
    assert entry["not_done"] == 21 and entry["slots"] == {"1": 1, "2": 10, "3": 10} and entry["closed"]
    preview = get("/api/slots/rolling/backfill-preview", params={"period": "2026-11-20"}).json()
    assert preview == failed_tick.cli_json("slots", "backfill", "rolling", "--period", "2026-11-20", "--dry-run")
    assert preview["not_done"] == 21
    page = get("/slots", params={"job": "rolling"}).text
    assert 'id="slot-not-done"' in page and 'data-period="2026-11-20"' in page
    assert "vardiya slots backfill rolling --period 2026-11-20" in page
    assert 'href="/slots/rolling/ticks/2026-11-20/2">2</a> (10)' in page
    assert failed_tick.client.get("/api/slots/rolling/report", params={"period": "2026-11-20"}).json()["not_done"] == 21


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/api/slots/rolling/ticks/2026-11-20/4", 400, "slot 4 is out of range"),
    ("/api/slots/rolling/ticks/December/1", 400, "is not a period of this scheme"),
    ("/api/slots/rolling/ticks/2026-11-20/-1", 422, "greater than or equal to 0"),
    ("/api/slots/rolling/ticks/2026-11-20/1?limit=0", 422, "greater than or equal to 1"),
    ("/api/slots/nope/ticks/2026-11-20/1", 404, "no slot job 'nope'"),
    ("/slots/nope/ticks/2026-11-20/1", 404, "no slot job &#39;nope&#39;"),
    ("/slots/rolling/ticks/2026-11-20/9", 400, "slot 9 is out of range"),
    ("/api/slots/nope/balance", 404, "no slot job 'nope'"),
    ("/api/slots/rolling/backfill-preview", 422, "period"),
    ("/api/slots/rolling/backfill-preview?period=2099-01-01", 400, "2099-01-01"),
    ("/api/slots/rolling/backfill-preview?period=soon", 400, "is not a period of this scheme"),
])
def test_bad_slot_requests_are_a_4xx_with_a_message(failed_tick: Dashboard, path: str, status: int, says: str) -> None:
    answer = failed_tick.client.get(path)
    assert answer.status_code == status, answer.text
    assert says in answer.text
