"""Pause, resume and trigger from the dashboard: the API's JSON is ``vardiya pause/resume/trigger --json``,
names resolve as the CLI resolves them, and every change needs the token (and a browser's the CSRF token)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote_plus

import pytest

from tests.acceptance.test_ui_api import Dashboard, _serving
from tests.support.dashboard import TOKEN

BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with _serving(tmp_path_factory.mktemp("controls")) as serving:
        yield serving


def _state(dashboard: Dashboard, name: str) -> bool:
    entries = dashboard.client.get("/api/controls").json()["entries"]
    return next(entry["paused"] for entry in entries if entry["name"] == name)


def test_changes_need_the_token_and_a_browsers_csrf_token(dashboard: Dashboard) -> None:
    post = dashboard.client.post
    for path, body in (("/api/pause", {"name": "validate"}), ("/api/resume", {"name": "validate"}),
                       ("/api/trigger", {"name": "rolling"})):
        missing = post(path, json=body)
        assert missing.status_code == 401 and "send the token" in missing.json()["error"], path
        assert post(path, json=body, headers={"Authorization": "Bearer wrong-token-xxxxxxxx"}).status_code == 403
    for path in ("/controls/pause", "/controls/resume", "/controls/trigger"):
        assert post(path, data={"name": "rolling"}, follow_redirects=False).status_code == 401
    client = dashboard.signed_in()
    assert client.post("/api/pause", json={"name": "validate"}).status_code == 403  # cookie, no CSRF
    forged = client.post("/controls/pause", data={"name": "validate", "csrf": "forged"}, follow_redirects=False)
    assert forged.status_code == 403 and "CSRF" in forged.text
    assert not _state(dashboard, "validate")
    assert dashboard.client.get("/api/status").json()["paused"] == []


def test_pause_and_resume_are_the_cli_documents(dashboard: Dashboard) -> None:
    post = dashboard.client.post
    paused = post("/api/pause", json={"name": "validate", "reason": "vendor outage"}, headers=BEARER).json()
    assert paused["changed"] and paused["kind"] == "handler" and paused["pause"]["reason"] == "vendor outage"
    # the CLI sees the same pause (and changes nothing: it was paused already)
    assert dashboard.cli_json("pause", "validate", "--reason", "vendor outage") == {**paused, "changed": False}
    assert _state(dashboard, "validate")
    assert [entry["name"] for entry in dashboard.client.get("/api/status").json()["paused"]] == ["validate"]
    resumed = post("/api/resume", json={"name": "validate", "kind": "handler"}, headers=BEARER).json()
    assert resumed["changed"] and not resumed["paused"] and resumed["pause"] == paused["pause"]
    again = dashboard.cli_json("resume", "validate")
    assert again == {**resumed, "changed": False, "pause": None}
    assert post("/api/resume", json={"name": "validate"}, headers=BEARER).json() == again


def test_trigger_is_the_cli_document_and_queues_the_run_once(dashboard: Dashboard) -> None:
    body = {"name": "rolling", "at": "2026-12-01T06:30:00Z"}
    queued = dashboard.client.post("/api/trigger", json=body, headers=BEARER).json()
    assert queued["queued"] and queued["kind"] == "slot_job" and queued["state"] == "pending"
    assert "slot 1 of period 2026-12-01" in queued["what"]
    assert dashboard.cli_json("trigger", "rolling", "--at", "2026-12-01T06:30:00Z") == {**queued, "queued": False}
    dashboard.client.post("/api/pause", json={"name": "rolling"}, headers=BEARER)
    held = dashboard.client.post("/api/trigger", json={"name": "rolling"}, headers=BEARER)
    assert held.status_code == 400 and "is paused" in held.json()["error"] and "vardiya resume rolling" in held.json()["error"]


@pytest.mark.parametrize(("path", "body", "status", "says"), [
    ("/api/pause", {"name": "nope"}, 400, "has nothing named 'nope'; it has: rolling (slot job)"),
    ("/api/pause", {"name": "validate", "kind": "pipeline"}, 400, "has no pipeline named 'validate'"),
    ("/api/pause", {"name": "validate", "kind": "gadget"}, 400, "kind 'gadget' is not one of"),
    ("/api/pause", {"name": "validate", "reason": "x" * 501}, 422, "at most 500 characters"),
    ("/api/pause", {"name": ""}, 422, "at least 1 character"),
    ("/api/pause", {"name": "validate", "colour": "red"}, 422, "Extra inputs"),
    ("/api/resume", {"name": "nope"}, 400, "has nothing named 'nope'"),
    ("/api/trigger", {"name": "validate"}, 400, "runs on submit, not on a schedule"),
    ("/api/trigger", {"name": "grid"}, 400, "pipeline grid"),
    ("/api/trigger", {"name": "rolling", "at": "teatime"}, 400, "--at"),
])
def test_bad_names_and_options_are_a_4xx_with_a_message_and_write_nothing(
    dashboard: Dashboard, path: str, body: dict[str, object], status: int, says: str
) -> None:
    answer = dashboard.client.post(path, json=body, headers=BEARER)
    assert answer.status_code == status, answer.text
    assert says in answer.text
    assert dashboard.client.get("/api/status").json()["paused"] == []
    assert dashboard.client.get("/api/status").json()["items"].get("tick", {}).get("pending", 0) == 0


def test_the_buttons_pause_trigger_and_resume(dashboard: Dashboard) -> None:
    client, csrf = dashboard.signed_in(), dashboard.guard.csrf
    page = client.get("/slots", params={"job": "rolling"}).text
    assert 'data-controls="rolling"' in page and 'data-action="pause"' in page and 'data-action="trigger"' in page
    done = client.post("/controls/pause", data={"name": "rolling", "kind": "slot_job", "reason": "migration",
                                                "back": "/slots?job=rolling", "csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].startswith("/slots?job=rolling&done=paused+slot_job+rolling")
    page = client.get("/slots", params={"job": "rolling"}).text
    assert "<strong>paused</strong>" in page and "(migration)" in page and 'data-action="resume"' in page
    listed = client.get("/controls").text
    assert 'data-entry="rolling" data-state="paused"' in listed and 'data-entry="validate" data-state="running"' in listed
    refused = client.post("/controls/trigger", data={"name": "rolling", "csrf": csrf}, follow_redirects=False)
    assert refused.status_code == 400 and "is paused" in refused.text
    # back to a page of this dashboard only, never another site
    resumed = client.post("/controls/resume", data={"name": "rolling", "back": "//evil.example/x", "csrf": csrf},
                          follow_redirects=False)
    assert resumed.status_code == 303 and resumed.headers["location"].startswith("/controls?done=resumed+slot_job+rolling")
    queued = client.post("/controls/trigger", data={"name": "rolling", "at": "2026-12-01T06:30:00Z", "csrf": csrf},
                         follow_redirects=False)
    said = unquote_plus(queued.headers["location"])
    assert queued.status_code == 303 and "queued slot_job rolling: slot 1 of period 2026-12-01" in said
    assert dashboard.client.get("/api/status").json()["items"]["tick"]["pending"] == 1
    # what is paused can be resumed from the overview
    client.post("/api/pause", json={"name": "validate"}, headers={"X-CSRF-Token": csrf})
    overview = client.get("/fragments/overview").text
    assert 'data-paused="validate"' in overview and 'value="handler"><input type="hidden" name="back" value="/">' in overview
    again = client.post("/controls/resume", data={"name": "validate", "kind": "handler", "back": "/", "csrf": csrf},
                        follow_redirects=False)
    assert again.headers["location"].startswith("/?done=resumed+handler+validate") and not _state(dashboard, "validate")
    read_only = dashboard.client
    read_only.cookies.clear()
    assert 'data-action="pause"' not in read_only.get("/controls").text
