"""The dashboard's slot job pages: a tick's records with their outcomes and errors, the balance report of
a job's ids and the not-done records of its closed periods; each JSON endpoint is the CLI's ``--json``."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.acceptance.test_ui_api import BASE, Dashboard, _serving, _without
from tests.support.cli import run_cli
from tests.support.dashboard import TOKEN, make_store
from vardiya.app import load_app
from vardiya.clock import VirtualClock
from vardiya.store import open_store
from vardiya.ui import Guard, create_app


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


@pytest.fixture(scope="module")
def at_seven(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """A dashboard whose store clock says 2026-12-01T07:00Z: its slot ticks of 00:00 and 06:00 ran (slot 0
    and 1 of 4, 10 records each), and no scheduler has run."""
    directory = tmp_path_factory.mktemp("seven")
    options = make_store(directory)
    store = open_store(options[1], clock=VirtualClock(datetime(2026, 12, 1, 7, tzinfo=UTC)), create=False)
    guard = Guard.for_server(host="127.0.0.1", environment_token=TOKEN)
    with store, TestClient(create_app(store, load_app(options[3]), guard), base_url=BASE) as client:
        yield Dashboard(client=client, guard=guard, options=options, cwd=directory, store=store)


def test_the_job_page_charts_the_current_and_the_previous_period_and_lists_the_next_ticks(at_seven: Dashboard) -> None:
    get = at_seven.client.get
    job = get("/api/slots/rolling").json()
    assert job["job"] == "rolling" and job["tz"] == "UTC" and job["current_period"] == "2026-12-01"
    assert [(each["role"], each["report"]["period"]) for each in job["periods"]] == [("current", "2026-12-01"), ("previous", "2026-11-30")]
    # each period is the CLI's slots report --json; the CLI's clock is the machine's (past 2026-12-01),
    # the dashboard's is 07:00 of it, so only what depends on now differs: the CLI sees the period closed
    for shown in job["periods"]:
        cli = at_seven.cli_json("slots", "report", "rolling", "--period", shown["report"]["period"])
        assert _without(shown["report"], "closed", "warnings") == _without(cli, "closed", "warnings") and cli["closed"]
    assert job["periods"][0]["report"]["closed"] is False and job["periods"][0]["report"]["warnings"] == []
    assert sum(slot["count"] for slot in job["periods"][0]["report"]["slots"]) == 10
    assert job["status"] == next(each for each in get("/api/status").json()["jobs"] if each["job"] == "rolling")
    # the scheduler has no cursor yet: the ticks after now (4 slots of 6 h, each ticking at its start)
    assert job["next_ticks"] == [
        {"planned_at": f"{day}T{hour}:00:00+00:00", "planned_at_utc": f"{day}T{hour}:00:00+00:00", "period": day, "slot": slot}
        for day, hour, slot in (("2026-12-01", "12", 2), ("2026-12-01", "18", 3), ("2026-12-02", "00", 0),
                                ("2026-12-02", "06", 1), ("2026-12-02", "12", 2))
    ]
    assert job["next_ticks"][0]["planned_at_utc"] == job["status"]["next_tick"]  # status's next tick is the first
    assert len(get("/api/slots/rolling", params={"ticks": 9}).json()["next_ticks"]) == 9
    other = get("/api/slots/rolling", params={"period": "2026-11-20"}).json()
    assert [(each["role"], each["report"]["period"]) for each in other["periods"]] == [("shown", "2026-11-20"), ("previous", "2026-11-19")]

    page = get("/slots", params={"job": "rolling"}).text
    current, previous = page.index('id="slot-chart-current"'), page.index('id="slot-chart-previous"')
    assert current < previous  # the current period first
    assert page[current:previous].count("<svg") == 1 and "<svg" in page[previous:]
    assert "Current period 2026-12-01" in page and "Previous period 2026-11-30" in page
    assert 'href="/slots/rolling/ticks/2026-12-01/1"' in page and 'href="/slots/rolling/ticks/2026-11-30/1"' in page
    ticks = page[page.index('id="slot-next-ticks"'):]
    assert "<td>2026-12-01T12:00:00+00:00</td>" in ticks and "<td>2026-12-02T12:00:00+00:00</td>" in ticks
    assert 'id="period-current"' not in page
    shown = get("/slots", params={"job": "rolling", "period": "2026-11-20"}).text
    assert "The period 2026-11-20" in shown and "Previous period 2026-11-19" in shown and 'id="period-current"' in shown


def test_next_ticks_start_at_the_schedulers_cursor_when_it_is_ahead_of_now(at_seven: Dashboard) -> None:
    from vardiya.slots.job import SlotJob
    from vardiya.ui.slot_job import next_ticks

    app = load_app(at_seven.options[3])
    job: SlotJob = app.get_slot_job("rolling")
    now = datetime(2026, 12, 1, 7, tzinfo=UTC)
    ahead = next_ticks(app, "rolling", now, datetime(2026, 12, 1, 18, tzinfo=UTC), count=2)
    assert [each["planned_at"] for each in ahead] == ["2026-12-02T00:00:00+00:00", "2026-12-02T06:00:00+00:00"]
    behind = next_ticks(app, "rolling", now, datetime(2026, 12, 1, 0, tzinfo=UTC), count=1)
    assert behind[0]["planned_at"] == "2026-12-01T12:00:00+00:00" and job.scheme.slots == 4


@pytest.mark.parametrize(("path", "status", "said"), [
    ("/api/slots/nope", 404, "no slot job 'nope'"),
    ("/api/slots/rolling?period=December", 400, "is not a period of this scheme"),
    ("/api/slots/rolling?ticks=0", 422, "greater than or equal to 1"),
    ("/api/slots/rolling?ticks=101", 422, "less than or equal to 100"),
    ("/slots?job=rolling&period=December", 400, "is not a period of this scheme"),
])
def test_a_bad_job_page_request_is_refused_with_a_message(at_seven: Dashboard, path: str, status: int, said: str) -> None:
    answer = at_seven.client.get(path)
    assert answer.status_code == status and said in answer.text, answer.text


def test_the_server_reads_the_closed_periods_once_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The start-up warm-up keeps the open records, so the first status reads no settled key again."""
    from vardiya.service.status import status_report
    from vardiya.store.ledger import Ledger

    options = make_store(tmp_path)
    reads: list[str] = []
    for name in ("settled_in_slot", "settled_by_slot"):
        real = getattr(Ledger, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            reads.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Ledger, name, counted)
    app = load_app(options[3])
    with open_store(options[1], create=False) as store:
        guard = Guard.for_server(host="127.0.0.1", environment_token=TOKEN)
        with TestClient(create_app(store, app, guard), base_url=BASE):
            pass  # start-up and shut-down: the shut-down waits for the warm-up
        assert reads, "the warm-up read no closed period"
        warmed = len(reads)
        assert status_report(store, app)["not_done"]  # the seeded day has never-done records
        assert len(reads) == warmed
