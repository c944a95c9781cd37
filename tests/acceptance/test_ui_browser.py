"""The dashboard in a real browser: Debian's chromium driven by Playwright, against a real ``vardiya ui``
process on a free port. Screenshots of a failing test are saved under ``artefacts/`` of its tmp path
(and in ``$VARDIYA_ARTEFACTS`` when set, which CI keeps)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.dashboard import TOKEN, make_store

playwright_api = pytest.importorskip("playwright.sync_api")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "meter_validation"
CHROMIUM = os.environ.get("VARDIYA_CHROMIUM", "/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists() and os.environ.get("CI") != "true",
    reason=f"no chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it)",
)


def _serve(directory: Path, options: list[str]) -> tuple[subprocess.Popen[str], str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("VARDIYA_DB", "VARDIYA_APP")}
    environment["VARDIYA_UI_TOKEN"] = TOKEN
    process = subprocess.Popen(
        [sys.executable, "-m", "vardiya", "ui", "--port", "0", *options], cwd=directory, env=environment,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"(http://\S+/)", line)
    if found is None:
        process.kill()
        _out, err = process.communicate(timeout=10)
        raise AssertionError(f"vardiya ui did not say where it listens: {line!r} {err}")
    return process, found.group(1)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, list[str], Path]]:
    options = make_store(tmp_path)
    process, url = _serve(tmp_path, options)
    try:
        yield url, options, tmp_path
    finally:
        process.terminate()
        process.communicate(timeout=10)  # waits, and closes its pipes


@pytest.fixture
def page(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        opened = context.new_page()
        failed_before = request.session.testsfailed
        yield opened
        if request.session.testsfailed > failed_before:  # this test's call failed (reported before teardown)
            artefacts = tmp_path / "artefacts"
            artefacts.mkdir(exist_ok=True)
            shot = artefacts / f"{request.node.name}.png"
            opened.screenshot(path=str(shot), full_page=True)
            if os.environ.get("VARDIYA_ARTEFACTS"):
                Path(os.environ["VARDIYA_ARTEFACTS"]).mkdir(parents=True, exist_ok=True)
                shutil.copy(shot, os.environ["VARDIYA_ARTEFACTS"])
        browser.close()


def test_overview_has_live_counts_and_a_dead_letter_redriven_from_the_page_runs_and_disappears(
    served: tuple[str, list[str], Path], page: playwright_api.Page,
) -> None:
    url, options, directory = served
    expect = playwright_api.expect
    page.goto(f"{url}?token={TOKEN}")  # the start URL: the token moves into a cookie, the URL loses it
    assert "token" not in page.url
    expect(page.locator("#verdict")).to_have_text("UNHEALTHY")
    expect(page.locator("#total-dead")).to_have_text("2")
    expect(page.locator("#signed-in")).to_be_visible()
    # live: new work appears without a reload (htmx polls the overview)
    (directory / "more.jsonl").write_text('{"id": 101}\n')
    assert run_cli("invoke", "submit", "validate", "--payloads", "more.jsonl", *options, cwd=directory).code == 0
    expect(page.locator("#total-due")).to_have_text("1", timeout=15_000)

    page.click("text=Handlers")
    expect(page.locator("#dead-letters tr[data-letter]")).to_have_count(2)
    page.fill("input[name=error]", "reading 10")
    page.click("button:has-text('Filter')")
    expect(page.locator("#dead-letters tr[data-letter]")).to_have_count(1)
    page.click("#redrive-preview")
    expect(page.locator("#preview")).to_contain_text("Would redrive 1 dead letter(s), 1 record(s)")
    page.click("#redrive-confirm")
    expect(page.locator(".message")).to_contain_text("redrove 1 dead letter(s)")
    (directory / "broken").unlink()  # the fix is deployed: the redriven letter now succeeds
    worked = run_cli("worker", "--until-idle", "--json", *options, cwd=directory)
    assert worked.code == 0, worked.stderr
    page.goto(f"{url}handlers")
    expect(page.locator("#dead-letters tr[data-letter]")).to_have_count(1)
    assert "reading 10" not in page.locator("#dead-letters").inner_text()
    page.goto(url)
    expect(page.locator("#total-dead")).to_have_text("1")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_pages_fit_the_width(served: tuple[str, list[str], Path], page: playwright_api.Page, width: int) -> None:
    url, _options, _directory = served
    page.set_viewport_size({"width": width, "height": 800})
    for path in ("", "handlers", "errors", "slots", "pipelines", "pipelines/grid", "pipelines/grid/resume",
                 "pipelines/grid/rerun?task=clean@north", "pipelines/grid/tasks/clean@north", "controls", "planner"):
        page.goto(url + path)
        expect = playwright_api.expect
        expect(page.locator("header")).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"/{path} is {overflow}px wider than a {width}px window"
        assert page.locator("nav a:has-text('Errors')").is_visible()


def test_a_pipeline_rerun_from_the_grid_shows_its_blast_radius_first_then_the_task_turns_green(
    served: tuple[str, list[str], Path], page: playwright_api.Page,
) -> None:
    url, _options, directory = served
    expect = playwright_api.expect
    page.goto(f"{url}pipelines?token={TOKEN}")
    page.click("text=grid")
    expect(page.locator("#grid svg")).to_be_visible()
    expect(page.locator("tr[data-task='clean@north'] td[data-state]")).to_have_text("failed")
    page.click("tr[data-task='clean@north'] a:has-text('clean@north')")  # the task page
    expect(page.locator("#task-state")).to_have_text("failed")
    expect(page.locator("details pre").first).to_contain_text("north's readings do not parse")
    page.click("#task-blast-radius a:has-text('Rerun')")
    expect(page.locator("#blast-radius")).to_contain_text("Blast radius 1")
    expect(page.locator("#rerun-list li")).to_have_text(["clean@north", "report@north"])
    (directory / "broken_clean").unlink()  # the fix is in: the rerun succeeds
    page.click("#rerun-confirm")
    # the run goes on in the server's background: its status page follows it (htmx) until it is done
    assert re.search(r"/pipelines/grid/runs/\d+$", page.url), page.url
    expect(page.locator("#run-phase")).to_have_text("done", timeout=30_000)
    expect(page.locator("#run-result")).to_contain_text("2 succeeded, 0 failed")
    expect(page.locator("#grid svg")).to_be_visible()
    page.click("#run-grid")
    expect(page.locator("tr[data-task='clean@north'] td[data-state]")).to_have_text("succeeded")
    expect(page.locator("tr[data-task='report@north'] td[data-state]")).to_have_text("succeeded")
    expect(page.locator("#resume-link")).to_have_count(0)  # nothing is left to resume


def test_a_failed_pipeline_resumed_from_its_page_after_the_fix_shows_the_task_list_first_then_turns_green(
    served: tuple[str, list[str], Path], page: playwright_api.Page,
) -> None:
    url, _options, directory = served
    expect = playwright_api.expect
    page.goto(f"{url}pipelines/grid?token={TOKEN}")
    expect(page.locator("tr[data-task='report@north'] td[data-state]")).to_have_text("blocked")
    page.click("#resume-link")
    expect(page.locator("#resume-failed li")).to_have_text(["clean@north: blast radius 1"])
    expect(page.locator("#resume-list li")).to_have_text(["clean@north", "report@north"])
    (directory / "broken_clean").unlink()  # the fix is deployed
    page.click("#resume-confirm")
    expect(page.locator("#run-phase")).to_have_text("done", timeout=30_000)
    expect(page.locator("#run-result")).to_contain_text("resume 2: 2 succeeded, 0 failed, 0 blocked")
    page.click("#run-grid")
    expect(page.locator("tr[data-task='clean@north'] td[data-state]")).to_have_text("succeeded")
    expect(page.locator("tr[data-task='report@north'] td[data-state]")).to_have_text("succeeded")


def test_the_planner_replays_an_uploaded_workload_and_profile_and_refuses_a_bad_one(
    served: tuple[str, list[str], Path], page: playwright_api.Page, tmp_path: Path,
) -> None:
    url, _options, _directory = served
    expect = playwright_api.expect
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    night = (EXAMPLE / "validation-night.csv").read_text(encoding="utf-8").splitlines()
    (uploads / "night.csv").write_text("\n".join(night[:301]) + "\n", encoding="utf-8")
    shutil.copy(EXAMPLE / "profile.toml", uploads / "profile.toml")
    page.goto(f"{url}planner")
    page.set_input_files("input[name=workload_file]", str(uploads / "night.csv"))
    page.set_input_files("input[name=profile_file]", str(uploads / "profile.toml"))
    page.fill("#planner-upload input[name=sizes]", "1,10,100")
    page.click("#upload-replay")
    expect(page.locator("#uploaded")).to_contain_text("Replayed the uploads night.csv and profile.toml")
    expect(page.locator("#sweep-chart svg")).to_be_visible()
    expect(page.locator("#sweep-rows tr[data-size]")).to_have_count(3)
    expect(page.locator("#compare-rows tr[data-model='stream']").first).to_be_visible()
    page.goto(f"{url}planner")
    page.set_input_files("input[name=workload_file]", str(uploads / "profile.toml"))  # the wrong file
    page.set_input_files("input[name=profile_file]", str(uploads / "profile.toml"))
    page.click("#upload-replay")
    expect(page.locator("#error")).to_contain_text("the workload upload 'profile.toml' is not a .csv or .txt file")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_slot_jobs_page_shows_both_periods_charts_and_stacks_them_on_a_phone(
    served: tuple[str, list[str], Path], page: playwright_api.Page, width: int,
) -> None:
    url, _options, _directory = served
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(url + "slots?job=rolling&period=2026-12-01")
    expect = playwright_api.expect
    shown, previous = page.locator("#slot-chart-shown svg"), page.locator("#slot-chart-previous svg")
    expect(shown).to_be_visible()
    expect(previous).to_be_visible()
    first, second = shown.bounding_box(), previous.bounding_box()
    assert first is not None and second is not None
    assert first["width"] > 200 and second["width"] > 200 and first["height"] > 50  # drawn, not collapsed
    for box in (first, second):
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, f"a chart leaves the {width}px window: {box}"
    if width == 390:
        assert second["y"] >= first["y"] + first["height"], "on a phone the previous period comes below the shown one"
    else:
        assert second["y"] >= first["y"] or second["x"] > first["x"]  # below or beside, never before it
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the slot job page is {overflow}px wider than a {width}px window"
    expect(page.locator("#slot-next-ticks tr")).to_have_count(6)  # a header and the next 5 ticks
