"""The dashboard's API and pages in-process (TestClient): its JSON is the CLI's ``--json``; mutations
need the token (and a browser's the CSRF token); only this server's Host names are answered."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.cli import assert_one_line_error, run_cli
from tests.support.dashboard import TOKEN, make_store
from vardiya.app import load_app
from vardiya.store import Store, open_store
from vardiya.ui import Guard, create_app
from vardiya.ui.security import COOKIE, CSRF_HEADER

BASE = "http://127.0.0.1:8765"


@dataclass
class Dashboard:
    client: TestClient
    guard: Guard
    options: list[str]
    cwd: Path
    store: Store

    def cli_json(self, *args: str, code: int = 0) -> Any:
        result = run_cli(*args, "--json", *self.options, cwd=self.cwd)
        assert result.code == code, result.stderr
        return json.loads(result.stdout)

    def signed_in(self) -> TestClient:
        self.client.cookies.set(COOKIE, TOKEN)
        return self.client


@contextlib.contextmanager
def _serving(directory: Path) -> Iterator[Dashboard]:
    options = make_store(directory)
    store = open_store(options[1], create=False)
    guard = Guard.for_server(host="127.0.0.1", environment_token=TOKEN)
    app = load_app(options[3])
    with store, TestClient(create_app(store, app, guard), base_url=BASE, raise_server_exceptions=True) as client:
        yield Dashboard(client=client, guard=guard, options=options, cwd=directory, store=store)


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    """A dashboard of its own, for a test that changes the store."""
    with _serving(tmp_path) as serving:
        yield serving


@pytest.fixture(scope="module")
def reading(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """One dashboard for the tests that only read (each starts signed out)."""
    with _serving(tmp_path_factory.mktemp("reading")) as serving:
        yield serving
        serving.client.cookies.clear()


@pytest.fixture
def readonly(reading: Dashboard) -> Dashboard:
    reading.client.cookies.clear()
    return reading


def _without(document: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in keys}


def test_the_api_json_is_the_cli_json(readonly: Dashboard) -> None:
    get = readonly.client.get
    # status: the same document but for the moment it was made (and what is measured from it)
    api, cli = get("/api/status").json(), readonly.cli_json("status", code=1)
    assert _without(api, "now", "late_items") == _without(cli, "now", "late_items")
    assert api["dead"] == 2 and not api["healthy"] and "2 dead work items (see vardiya dlq list)" in api["reasons"]
    assert get("/api/dlq").json() == readonly.cli_json("dlq", "list")
    assert get("/api/dlq", params={"handler": "validate", "error": "poison 10"}).json() == readonly.cli_json(
        "dlq", "list", "--handler", "validate", "--error", "poison 10")
    letter = get("/api/dlq").json()["dead_letters"][0]["id"]
    shown = get(f"/api/dlq/{letter}").json()
    assert shown == readonly.cli_json("dlq", "show", str(letter))
    assert shown["history"][0]["traceback"] and "ValueError" in shown["history"][0]["traceback"]
    assert get("/api/errors", params={"limit": 5}).json() == readonly.cli_json("errors", "--limit", "5")
    assert get("/api/handlers/validate/metrics").json() == readonly.cli_json("invoke", "metrics", "validate")
    assert get("/api/handlers").json() == {"handlers": [readonly.cli_json("invoke", "metrics", "validate")]}
    preview = readonly.client.post("/api/dlq/redrive", json={"dry_run": True}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert _without(preview.json(), "last_ready_at") == _without(readonly.cli_json("dlq", "redrive", "--dry-run"), "last_ready_at")


def test_mutations_need_the_token(dashboard: Dashboard) -> None:
    post = dashboard.client.post
    missing = post("/api/dlq/redrive", json={"dry_run": True})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert "send the token" in missing.json()["error"]
    assert post("/api/dlq/redrive", json={"dry_run": True}, headers={"Authorization": "Bearer wrong-token-xxxxxxxx"}).status_code == 403
    assert post("/api/dlq/purge", json={"handler": "validate"}).status_code == 401
    # a browser's cookie alone is not enough: the CSRF token must come with it
    client = dashboard.signed_in()
    no_csrf = client.post("/api/dlq/redrive", json={"dry_run": True})
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.json()["error"]
    allowed = client.post("/api/dlq/redrive", json={"dry_run": True}, headers={CSRF_HEADER: dashboard.guard.csrf})
    assert allowed.status_code == 200 and allowed.json()["items"] == 2
    assert dashboard.client.get("/api/dlq").json()["total"] == 2  # a dry run changed nothing


def test_the_redrive_form_needs_the_csrf_token_and_redrives(dashboard: Dashboard) -> None:
    anonymous = dashboard.client.post("/handlers/redrive", data={"handler": "validate"}, follow_redirects=False)
    assert anonymous.status_code == 401
    client = dashboard.signed_in()
    page = client.get("/handlers/redrive", params={"handler": "validate"})
    assert page.status_code == 200 and "Would redrive <strong>2</strong> dead letter(s)" in page.text
    form_csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert form_csrf is not None and form_csrf.group(1) == dashboard.guard.csrf
    forged = client.post("/handlers/redrive", data={"handler": "validate", "csrf": "forged"}, follow_redirects=False)
    assert forged.status_code == 403 and "CSRF" in forged.text
    assert dashboard.client.get("/api/dlq").json()["total"] == 2
    done = client.post("/handlers/redrive", data={"handler": "validate", "csrf": form_csrf.group(1)}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].startswith("/handlers?done=redrove+2+dead+letter")
    assert dashboard.client.get("/api/dlq").json()["total"] == 0
    assert sum(counts["pending"] for counts in dashboard.client.get("/api/status").json()["items"].values()) == 2


def test_the_purge_form_deletes_what_the_preview_showed(dashboard: Dashboard) -> None:
    client = dashboard.signed_in()
    letter = client.get("/api/dlq").json()["dead_letters"][0]["id"]
    page = client.get("/handlers/purge", params={"id": letter})
    assert "Would delete <strong>1</strong> dead letter(s)" in page.text
    done = client.post("/handlers/purge", data={"id": str(letter), "csrf": dashboard.guard.csrf}, follow_redirects=False)
    assert done.status_code == 303
    assert [each["id"] for each in client.get("/api/dlq").json()["dead_letters"]] != [letter]
    assert client.get("/api/dlq").json()["total"] == 1
    assert client.get(f"/api/dlq/{letter}").status_code == 404


def test_only_this_servers_names_and_origin_are_answered(readonly: Dashboard) -> None:
    get = readonly.client.get
    rebound = get("/api/status", headers={"Host": "evil.example:8765"})
    assert rebound.status_code == 400 and "answers only the names" in rebound.text
    assert get("/api/status", headers={"Host": "localhost:8765"}).status_code == 200
    cross_site = readonly.client.post(
        "/api/dlq/redrive", json={"dry_run": True},
        headers={"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"},
    )
    assert cross_site.status_code == 403 and "Origin" in cross_site.json()["error"]
    page = get("/")
    assert page.headers["x-frame-options"] == "DENY" and "default-src 'self'" in page.headers["content-security-policy"]


def test_the_start_url_moves_the_token_into_a_cookie(readonly: Dashboard) -> None:
    wrong = readonly.client.get("/?token=not-the-token", follow_redirects=False)
    assert wrong.status_code == 403 and COOKIE not in wrong.headers.get("set-cookie", "")
    opened = readonly.client.get(f"/handlers?token={TOKEN}", follow_redirects=False)
    assert opened.status_code == 303 and opened.headers["location"] == "/handlers"
    cookie = opened.headers["set-cookie"]
    assert f"{COOKIE}={TOKEN}" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert 'id="signed-in"' in readonly.client.get("/handlers").text
    assert 'id="read-only"' in TestClient(readonly.client.app, base_url=BASE).get("/handlers").text


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/api/errors?limit=0", 422, "greater than or equal to 1"),
    ("/api/errors?job=a&handler=b", 400, "at most one of job, handler and pipeline"),
    ("/api/errors?since=yesterday", 400, "since"),
    ("/api/dlq?older_than=banana", 400, "older_than"),
    ("/api/dlq?id=0", 400, "out of range"),
    ("/api/dlq?id=x", 422, "valid integer"),
    ("/api/dlq/999", 404, "no dead letter has id 999"),
    ("/api/dlq/99999999999999999999", 422, "less than or equal"),
    ("/api/handlers/nope/metrics", 404, "unknown handler 'nope'"),
    ("/api/handlers/validate/metrics?model=sync", 422, "pattern"),
    ("/api/pipelines/nope/status", 404, "no pipeline 'nope'"),
    ("/api/status?late_after_s=-1", 422, "greater than or equal to 0"),
])
def test_bad_input_is_a_4xx_with_a_message(readonly: Dashboard, path: str, status: int, says: str) -> None:
    answer = readonly.client.get(path)
    assert answer.status_code == status, answer.text
    assert says in answer.text


def test_bad_mutations_are_refused_and_write_nothing(readonly: Dashboard) -> None:
    post, bearer = readonly.client.post, {"Authorization": f"Bearer {TOKEN}"}
    assert post("/api/dlq/purge", json={}, headers=bearer).json()["error"].startswith("purge deletes for good")
    assert post("/api/dlq/redrive", json={"rate_per_s": -1}, headers=bearer).status_code == 422
    assert post("/api/dlq/redrive", json={"unknown": 1}, headers=bearer).status_code == 422
    assert post("/api/dlq/redrive", json={"older_than": "soon"}, headers=bearer).status_code == 400
    assert post("/api/dlq/redrive", content=b"{not json", headers={**bearer, "content-type": "application/json"}).status_code == 422
    assert readonly.client.get("/api/dlq").json()["total"] == 2


def test_the_pages_render_the_documents(readonly: Dashboard) -> None:
    get = readonly.client.get
    overview = get("/")
    assert overview.status_code == 200 and "UNHEALTHY" in overview.text and 'hx-trigger="every 5s"' in overview.text
    fragment = get("/fragments/overview").text
    assert re.search(r'id="total-dead">2<', fragment)
    # every column of the total row is filled: pending and succeeded are the sums of the families' rows
    families = get("/api/status").json()["items"]
    assert sum(counts["succeeded"] for counts in families.values()) > 0
    for column in ("pending", "succeeded"):
        total = sum(counts[column] for counts in families.values())
        assert f'id="total-{column}">{total}<' in fragment, column
    handlers = get("/handlers", params={"error": "reading 10"})
    assert 'data-handler="validate"' in handlers.text and handlers.text.count("data-letter=") == 1
    letter = get("/api/dlq").json()["dead_letters"][0]["id"]
    shown = get(f"/dead-letters/{letter}")
    assert "Traceback" in shown.text and "ValueError: reading 10 is poison" in shown.text
    errors = get("/errors", params={"family": "handler", "name": "validate"})
    assert errors.status_code == 200 and "reading 20 is poison" in errors.text
    refused = get("/errors", params={"limit": "0"})
    assert refused.status_code == 422 and 'id="error"' in refused.text
    assert get("/dead-letters/999").status_code == 404
    assert get("/static/htmx.min.js").status_code == 200


def test_vardiya_ui_refuses_to_start_unsafely(tmp_path: Path) -> None:
    open_host = run_cli("ui", "--host", "0.0.0.0", cwd=tmp_path, env={"VARDIYA_UI_TOKEN": ""})
    assert_one_line_error(open_host, "--host 0.0.0.0 is reachable from other machines", "VARDIYA_UI_TOKEN")
    short = run_cli("ui", cwd=tmp_path, env={"VARDIYA_UI_TOKEN": "short"})
    assert_one_line_error(short, "at least 16 characters")
    missing = run_cli("ui", "--db", f"sqlite:///{tmp_path / 'none.db'}", cwd=tmp_path, env={"VARDIYA_UI_TOKEN": TOKEN})
    assert missing.code == 2 and not (tmp_path / "none.db").exists()


def test_the_pipeline_pages_and_api_agree_with_the_cli(readonly: Dashboard) -> None:
    get, spec = readonly.client.get, f"{readonly.cwd / 'meters_app.py'}:grid"
    assert get("/api/pipelines/grid/status").json() == readonly.cli_json("pipeline", "status", spec)
    impact = get("/api/pipelines/grid/impact", params={"task": "clean@north"}).json()
    assert impact == readonly.cli_json("pipeline", "impact", spec, "--task", "clean@north")
    assert impact["rerun"] == ["clean@north", "report@north"] and impact["blast_radius"] == 1
    grid = get("/pipelines/grid")
    assert grid.status_code == 200 and "<svg" in grid.text and 'data-task="clean@north"' in grid.text
    preview = get("/pipelines/grid/rerun", params={"task": "clean@north"})
    assert "Blast radius <strong>1</strong>" in preview.text and "<li>report@north</li>" in preview.text
    assert "Read only" in preview.text and "rerun-confirm" not in preview.text
    assert "grid" in get("/pipelines").text
    assert get("/api/pipelines/grid/impact", params={"task": "nope@x"}).json()["error"].startswith("pipeline 'grid' has no task")
    assert get("/pipelines/nope").status_code == 404


def test_a_rerun_from_the_page_runs_exactly_the_listed_tasks(dashboard: Dashboard) -> None:
    client = dashboard.signed_in()
    assert client.post("/api/pipelines/grid/rerun", json={"task": "clean@north"}).status_code == 403  # no CSRF
    assert client.post("/pipelines/grid/rerun", data={"task": "clean@north"}, follow_redirects=False).status_code == 403
    (dashboard.cwd / "broken_clean").unlink()
    done = client.post("/pipelines/grid/rerun", data={"task": "clean@north", "csrf": dashboard.guard.csrf}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/pipelines/grid/runs/1"  # it runs in the background
    client.app.state.ui.runs.wait(60)  # type: ignore[attr-defined]
    assert "2 succeeded, 0 failed" in client.get(done.headers["location"]).text
    states = client.get("/api/pipelines/grid/status").json()["tasks"]
    assert states["clean@north"] == "succeeded" and states["report@north"] == "succeeded"


def test_a_task_page_shows_its_attempts_traceback_and_blast_radius(readonly: Dashboard) -> None:
    get = readonly.client.get
    task = get("/api/pipelines/grid/tasks/clean@north").json()
    assert task["state"] == "failed" and task["impact"]["rerun"] == ["clean@north", "report@north"]
    assert [each["state"] for each in task["attempts"]] == ["failed"]
    assert "ValueError: north's readings do not parse" in task["failures"][0]["traceback"]
    assert task["reads"] == []  # the stage reads nothing through context.read; the page says so
    page = get("/pipelines/grid/tasks/clean@north")
    assert page.status_code == 200 and "Blast radius 1" in page.text and "do not parse" in page.text
    assert "no reads recorded" in page.text
    assert get("/api/pipelines/grid/tasks/nope@x").status_code == 404
    assert get("/pipelines/grid/tasks/nope@x").status_code == 404


def test_the_slot_jobs_page_charts_the_ledger_by_slot_as_the_cli_reports_it(readonly: Dashboard) -> None:
    get = readonly.client.get
    api = get("/api/slots/rolling/report", params={"period": "2026-12-01"}).json()
    assert api == readonly.cli_json("slots", "report", "rolling", "--period", "2026-12-01")
    assert sum(slot["count"] for slot in api["slots"]) == 10  # the tick ran one slot of four: 10 of 40 records
    page = get("/slots", params={"job": "rolling", "period": "2026-12-01"})
    assert page.status_code == 200 and "<svg" in page.text and "period 2026-12-01" in page.text
    # the previous and next periods are one click away (the chart of the period before)
    assert 'id="period-previous" href="/slots?job=rolling&amp;period=2026-11-30"' in page.text
    assert 'id="period-next" href="/slots?job=rolling&amp;period=2026-12-02"' in page.text
    before = get("/slots", params={"job": "rolling", "period": "2026-11-30"})
    assert before.status_code == 200 and "period 2026-11-30" in before.text and "<svg" in before.text
    assert get("/slots").status_code == 200
    assert get("/api/slots/rolling/report", params={"period": "December"}).status_code == 400
    assert get("/api/slots/nope/report", params={"period": "2026-12-01"}).status_code == 404
    assert get("/slots", params={"job": "nope"}).status_code == 404


def test_the_overview_shows_what_is_paused_and_the_services_alive(dashboard: Dashboard) -> None:
    from vardiya.store.controls import ControlKind
    from vardiya.store.heartbeats import ServiceBeat, ServiceKind

    empty = dashboard.client.get("/fragments/overview")
    assert empty.status_code == 200 and "no scheduler or worker has beaten on this store" in empty.text
    dashboard.store.controls.pause(ControlKind.HANDLER, "validate", reason="vendor outage")
    ServiceBeat(
        dashboard.store, "worker-ui-1", ServiceKind.WORKER, interval_s=10, app="dashboard", runs=["call:validate"]
    ).start()
    page = dashboard.client.get("/fragments/overview").text
    assert 'data-paused="validate"' in page and "vendor outage" in page
    assert 'data-service="worker-ui-1"' in page and "alive" in page
    assert dashboard.client.get("/api/status").json()["services_alive"] == 1


def test_the_handlers_page_lists_the_dead_letters_a_page_at_a_time(
    dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vardiya.ui import pages

    monkeypatch.setattr(pages, "LETTERS_PER_PAGE", 1)
    ids = [each["id"] for each in dashboard.client.get("/api/dlq").json()["dead_letters"]]
    assert len(ids) == 2

    def listed(text: str) -> list[int]:
        return [int(found) for found in re.findall(r'data-letter="(\d+)"', text)]

    first = dashboard.client.get("/handlers", params={"handler": "validate"})
    assert listed(first.text) == ids[:1] and "page 1 of 2" in first.text
    assert 'href="/handlers?handler=validate&amp;letters_page=2" id="letters-next"' in first.text
    assert "2 dead letter(s)" in first.text  # the total covers every page
    second = dashboard.client.get("/handlers", params={"handler": "validate", "letters_page": 2})
    assert listed(second.text) == ids[1:] and 'id="letters-previous"' in second.text
    assert listed(dashboard.client.get("/handlers", params={"letters_page": 9}).text) == ids[1:]  # past the end: the last
    bad = dashboard.client.get("/handlers", params={"letters_page": 0})
    assert bad.status_code in (400, 422) and "letters_page" in bad.text
