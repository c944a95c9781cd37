"""Rerun and resume from the dashboard: a preview first (the CLI's dry run), then a POST that starts the
run in the server's background and sends the browser to its status page, one run per pipeline at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.test_ui_api import Dashboard, _serving
from tests.support.dashboard import TOKEN
from vardiya.app import App
from vardiya.errors import InvalidInput
from vardiya.pipeline import Pipeline, Static, Unpartitioned, all_partitions, run_pipeline, same, task_impact
from vardiya.store import Store
from vardiya.ui import reports
from vardiya.ui.runs import BackgroundRuns


@pytest.fixture
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with _serving(tmp_path_factory.mktemp("runs")) as serving:
        yield serving


def _runs(dashboard: Dashboard) -> BackgroundRuns:
    found: BackgroundRuns = dashboard.client.app.state.ui.runs  # type: ignore[attr-defined]
    return found


def test_a_resume_shows_the_clis_dry_run_first_then_runs_in_the_background(dashboard: Dashboard) -> None:
    spec = f"{dashboard.cwd / 'meters_app.py'}:grid"
    get = dashboard.client.get
    preview = get("/api/pipelines/grid/resume-preview").json()
    cli = dashboard.cli_json("pipeline", "resume", spec, "--dry-run")
    assert {key: value for key, value in preview.items() if key != "failed"} == {
        key: value for key, value in cli.items() if key != "failed"}
    assert cli["failed"] == ["clean@north"]  # the API adds each one's blast radius
    assert cli["to_run"] == ["clean@north", "report@north"] and cli["mode"] == "resume" and cli["resumes"] == 1
    assert preview["failed"] == [{"task": "clean@north", "blast_radius": 1}]
    assert dashboard.cli_json("pipeline", "status", spec)["tasks"]["clean@north"] == "failed"  # the dry run ran nothing
    assert 'id="resume-link"' in get("/pipelines/grid").text
    page = get("/pipelines/grid/resume")
    assert page.status_code == 200 and "<li>report@north</li>" in page.text and "blast radius <strong>1</strong>" in page.text
    assert "Read only" in page.text and "resume-confirm" not in page.text

    assert dashboard.client.post("/pipelines/grid/resume", follow_redirects=False).status_code == 401
    client = dashboard.signed_in()
    assert client.post("/pipelines/grid/resume", data={"csrf": "forged"}, follow_redirects=False).status_code == 403
    assert 'id="resume-confirm"' in client.get("/pipelines/grid/resume").text
    (dashboard.cwd / "broken_clean").unlink()  # the fix is in
    started = client.post("/pipelines/grid/resume", data={"csrf": dashboard.guard.csrf}, follow_redirects=False)
    assert started.status_code == 303
    location = started.headers["location"]
    assert location == "/pipelines/grid/runs/1"
    _runs(dashboard).wait(60)
    status = client.get(location).text
    assert 'id="run-phase" class="phase-done">done' in status and "2 succeeded, 0 failed, 0 blocked" in status
    assert "hx-trigger" not in status and "<svg" in status  # it stopped polling and shows the new grid
    states = client.get("/api/pipelines/grid/status").json()["tasks"]
    assert states["clean@north"] == "succeeded" and states["report@north"] == "succeeded"
    assert "Nothing to resume" in client.get("/pipelines/grid/resume").text
    assert 'id="resume-link"' not in client.get("/pipelines/grid").text


def test_a_second_run_of_a_pipeline_while_one_runs_is_409_and_the_status_page_polls_until_it_ends(
    dashboard: Dashboard,
) -> None:
    client = dashboard.signed_in()
    release = threading.Event()

    def held() -> dict[str, object]:
        release.wait(30)
        return {"run_id": 9, "succeeded": ["clean@north"], "failed": [], "blocked": [], "skipped": [], "errors": {}}

    running = _runs(dashboard).start("grid", "rerun", "clean@north", held)
    try:
        page = client.get(f"/pipelines/grid/runs/{running.id}").text
        assert "phase-running" in page and f'hx-get="/fragments/pipelines/grid/runs/{running.id}"' in page
        for path, data in (("/pipelines/grid/rerun", {"task": "load@south"}), ("/pipelines/grid/resume", {})):
            refused = client.post(path, data={**data, "csrf": dashboard.guard.csrf}, follow_redirects=False)
            assert refused.status_code == 409, path
            assert "pipeline &#39;grid&#39; is already running (rerun of clean@north" in refused.text
        api = client.post("/api/pipelines/grid/rerun", json={"task": "load@south"},
                          headers={"Authorization": f"Bearer {TOKEN}"})  # the API's rerun holds the same slot
        assert api.status_code == 409 and api.json()["error"].startswith("pipeline 'grid' is already running")
    finally:
        release.set()
        _runs(dashboard).wait(30)
    fragment = client.get(f"/fragments/pipelines/grid/runs/{running.id}").text
    assert "hx-get" not in fragment and "rerun 9: 1 succeeded, 0 failed" in fragment
    # nothing else ran: the refused requests wrote nothing
    assert client.get("/api/pipelines/grid/status").json()["tasks"]["clean@north"] == "failed"


def test_a_failed_run_shows_its_error_and_bad_requests_are_refused_before_a_thread_starts(dashboard: Dashboard) -> None:
    client = dashboard.signed_in()

    def broken() -> dict[str, object]:
        raise InvalidInput("the output directory is read-only")

    failed = _runs(dashboard).start("grid", "resume", None, broken)
    _runs(dashboard).wait(30)
    page = client.get(f"/pipelines/grid/runs/{failed.id}").text
    assert "phase-failed" in page and 'id="run-error">the output directory is read-only' in page
    unknown = client.post("/pipelines/grid/rerun", data={"task": "nope@x", "csrf": dashboard.guard.csrf}, follow_redirects=False)
    assert unknown.status_code == 400 and "has no task" in unknown.text
    assert client.get(f"/pipelines/grid/runs/{failed.id + 1}").status_code == 404
    assert client.get("/pipelines/nope/runs/1").status_code == 404
    assert client.get("/pipelines/nope/resume").status_code == 404
    assert client.get("/api/pipelines/nope/resume-preview").status_code == 404
    assert client.get(f"/fragments/pipelines/grid/runs/{failed.id + 1}").status_code == 404


def test_the_server_stops_only_after_its_running_runs_end(tmp_path_factory: pytest.TempPathFactory) -> None:
    release = threading.Event()
    with _serving(tmp_path_factory.mktemp("stopping")) as serving:
        runs = _runs(serving)
        running = runs.start("grid", "resume", None, lambda: {"run_id": release.wait(30) and 5})
        threading.Timer(2, release.set).start()
    # the TestClient's exit is the server's shutdown: it waited for the run
    ended = runs.get(running.id)
    assert ended is not None and ended.phase.value == "done" and ended.result == {"run_id": 5}


def _followed(dashboard: Dashboard, started: Any) -> dict[str, Any]:
    """The run a 202 started, polled at its ``status_url`` until it ends."""
    assert started.status_code == 202, started.text
    run = started.json()
    assert run["phase"] == "running" and run["result"] is None
    assert started.headers["location"] == run["status_url"] == f"/api/runs/{run['id']}"
    deadline = time.monotonic() + 60
    while run["phase"] == "running":
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
        polled = dashboard.client.get(run["status_url"])
        assert polled.status_code == 200
        run = polled.json()
    return run


def _same_run(api: dict[str, Any], cli: dict[str, Any]) -> None:
    """A run's ``--json`` from the API and from the CLI on a store of its own: one shape, and the same
    tasks, but for the run's id."""
    assert set(api) == set(cli)
    assert {key: value for key, value in api.items() if key != "run_id"} == {
        key: value for key, value in cli.items() if key != "run_id"}


def test_the_apis_rerun_and_resume_run_in_the_background_and_end_with_the_clis_document(
    dashboard: Dashboard, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    post, bearer = dashboard.client.post, {"Authorization": f"Bearer {TOKEN}"}
    assert post("/api/pipelines/grid/resume").status_code == 401
    assert post("/api/pipelines/grid/rerun", json={"task": "clean@north"}).status_code == 401
    (dashboard.cwd / "broken_clean").unlink()  # the fix is in
    resumed = _followed(dashboard, post("/api/pipelines/grid/resume", headers=bearer))
    assert resumed["action"] == "resume" and resumed["task"] is None and resumed["error"] is None
    assert resumed["phase"] == "done" and resumed["result"]["succeeded"] == ["clean@north", "report@north"]
    states = dashboard.client.get("/api/pipelines/grid/status").json()["tasks"]
    assert states["clean@north"] == "succeeded" and states["report@north"] == "succeeded"
    rerun = _followed(dashboard, post("/api/pipelines/grid/rerun", json={"task": "load@south"}, headers=bearer))
    assert rerun["action"] == "rerun" and rerun["task"] == "load@south" and rerun["phase"] == "done"
    assert rerun["result"]["succeeded"][0] == "load@south"

    # the CLI on a store of its own, fixed the same way, says the same
    with _serving(tmp_path_factory.mktemp("cli-runs")) as other:
        (other.cwd / "broken_clean").unlink()
        spec = f"{other.cwd / 'meters_app.py'}:grid"
        _same_run(resumed["result"], other.cli_json("pipeline", "resume", spec))
        _same_run(rerun["result"], other.cli_json("pipeline", "rerun", spec, "--task", "load@south"))


def test_the_run_api_refuses_before_a_thread_starts_and_knows_only_its_own_runs(dashboard: Dashboard) -> None:
    post, get, bearer = dashboard.client.post, dashboard.client.get, {"Authorization": f"Bearer {TOKEN}"}
    unknown = post("/api/pipelines/grid/rerun", json={"task": "nope@x"}, headers=bearer)
    assert unknown.status_code == 400 and "has no task" in unknown.json()["error"]
    assert post("/api/pipelines/nope/resume", headers=bearer).status_code == 404
    assert post("/api/pipelines/grid/rerun", json={"task": ""}, headers=bearer).status_code == 422
    assert _runs(dashboard).get(1) is None  # none of them started a run
    missing = get("/api/runs/1")
    assert missing.status_code == 404 and "started no run 1" in missing.json()["error"]
    assert get("/api/runs/0").status_code == 422 and get(f"/api/runs/{2**63}").status_code == 422

    release = threading.Event()
    running = _runs(dashboard).start("grid", "rerun", "clean@north", lambda: {"run_id": release.wait(30) and 4})
    try:
        shown = get(f"/api/runs/{running.id}").json()
        assert shown == {**running.to_json(), "status_url": f"/api/runs/{running.id}"} and shown["phase"] == "running"
        busy = post("/api/pipelines/grid/resume", headers=bearer)
        assert busy.status_code == 409 and busy.json()["error"].startswith("pipeline 'grid' is already running (rerun of clean@north")
    finally:
        release.set()
        _runs(dashboard).wait(30)
    assert get(f"/api/runs/{running.id}").json()["result"] == {"run_id": 4}
    failed = _runs(dashboard).start("grid", "resume", None, lambda: (_ for _ in ()).throw(InvalidInput("disk full")))
    _runs(dashboard).wait(30)
    assert get(f"/api/runs/{failed.id}").json() | {"status_url": None} == {
        "id": failed.id, "pipeline": "grid", "action": "resume", "task": None, "phase": "failed", "result": None,
        "error": "disk full", "status_url": None}


def test_the_run_endpoints_are_in_the_openapi_document(dashboard: Dashboard) -> None:
    paths = dashboard.client.get("/api/openapi.json").json()["paths"]
    assert "202" in paths["/api/pipelines/{name}/rerun"]["post"]["responses"]
    assert "202" in paths["/api/pipelines/{name}/resume"]["post"]["responses"]
    assert "409" in paths["/api/pipelines/{name}/resume"]["post"]["responses"]
    assert "get" in paths["/api/runs/{run_id}"]


def test_the_resume_previews_blast_radii_are_each_failed_tasks_impact(store: Store, tmp_path: Path) -> None:
    """Counted once for the whole graph (``descendant_counts``), each one what ``pipeline impact`` says:
    here through fan-out (every partition reads all of ``load``) and a report over every partition."""
    keys = Static(keys=[f"p{number}" for number in range(6)])
    built = Pipeline("fan")
    built.stage(name="load", partitions=keys)(lambda context: [])
    built.stage(name="mix", partitions=keys, depends_on={"load": all_partitions()})(lambda context: [])
    built.stage(name="clean", partitions=keys, depends_on={"mix": same()})(lambda context: [])
    built.stage(name="report", partitions=Unpartitioned(), depends_on={"clean": all_partitions()})(lambda context: [])
    app = App("fan")
    app.add_pipeline(built, root=str(tmp_path))
    drills = ["load@p2", "clean@p4", "mix@p0"]
    run_pipeline(store, built, root=tmp_path, inject_failure=drills)
    document = reports.pipeline_resume_preview_document(store, app, "fan")
    graph = reports.pipeline_graph(app, "fan")
    assert [failed["task"] for failed in document["failed"]] == ["load@p2"]  # the others were blocked by it
    assert document["failed"] == [{"task": "load@p2", "blast_radius": task_impact(graph, "load@p2").blast_radius}]
    assert document["failed"][0]["blast_radius"] == 6 + 6 + 1
    run_pipeline(store, built, root=tmp_path, tasks=["load@p0", "load@p1", "load@p2", "load@p3", "load@p4", "load@p5"])
    run_pipeline(store, built, root=tmp_path, inject_failure=["clean@p4", "mix@p1"])
    document = reports.pipeline_resume_preview_document(store, app, "fan")
    assert document["failed"] == [
        {"task": task, "blast_radius": task_impact(graph, task).blast_radius} for task in ("mix@p1", "clean@p4")
    ]
    assert [failed["blast_radius"] for failed in document["failed"]] == [2, 1]
