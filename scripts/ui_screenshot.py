"""The README's and the docs' pictures of the dashboard, taken in a real browser (run by ./scripts/ui-screenshot).

Fills a demo store in a temporary directory (the app and store of the dashboard's tests: a handler with
two dead letters, a slot job with one tick, a pipeline whose clean@north failed and blocked
report@north), starts a worker (so the overview shows a service alive) and ``vardiya ui`` on a free
port, and takes Playwright screenshots with Debian's chromium (``VARDIYA_CHROMIUM``, default
/usr/bin/chromium) at 1280 px wide: the overview into docs/images/dashboard-overview.png, the
pipeline's grid into docs/images/dashboard-pipeline.png and the slot job's page (the period of its
tick and the one before, its next ticks) into docs/images/dashboard-slots.png. Each must stay under
300 KB.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from playwright.sync_api import sync_playwright  # noqa: E402
from tests.support.dashboard import TOKEN, make_store  # noqa: E402

IMAGES = REPO / "docs" / "images"
CHROMIUM = os.environ.get("VARDIYA_CHROMIUM", "/usr/bin/chromium")
MAX_BYTES = 300 * 1024
WIDTH = 1280


def _environment() -> dict[str, str]:
    found = {key: value for key, value in os.environ.items() if key not in ("VARDIYA_DB", "VARDIYA_APP")}
    found["VARDIYA_UI_TOKEN"] = TOKEN
    return found


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vardiya-screenshot-") as temporary:
        directory = Path(temporary)
        options = make_store(directory)
        worker = subprocess.Popen([sys.executable, "-m", "vardiya", "worker", *options], cwd=directory,
                                  env=_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = subprocess.Popen([sys.executable, "-m", "vardiya", "ui", "--port", "0", *options], cwd=directory,
                                  env=_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            found = re.search(r"(http://\S+/)", line)
            if found is None:
                raise SystemExit(f"vardiya ui did not say where it listens: {line!r}")
            url = found.group(1)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                page = browser.new_context(viewport={"width": WIDTH, "height": 900}).new_page()
                page.goto(f"{url}?token={TOKEN}")
                deadline = time.monotonic() + 30
                while "alive" not in page.locator("#live").inner_text():  # the worker's first heartbeat
                    if time.monotonic() > deadline:
                        raise SystemExit("the worker's heartbeat did not reach the overview in 30 s")
                    page.wait_for_timeout(500)
                    page.reload()
                shots = {"dashboard-overview.png": "", "dashboard-pipeline.png": "pipelines/grid",
                         "dashboard-slots.png": "slots?job=rolling&period=2026-12-01"}
                for name, path in shots.items():
                    page.goto(url + path)
                    page.wait_for_load_state("networkidle")
                    target = IMAGES / name
                    page.screenshot(path=str(target), full_page=True)
                    size = target.stat().st_size
                    print(f"{target.relative_to(REPO)}: {size / 1024:.0f} KB")
                    if size > MAX_BYTES:
                        raise SystemExit(f"{target} is {size} bytes, over {MAX_BYTES}: shrink the page or the window")
                browser.close()
        finally:
            for process in (server, worker):
                process.terminate()
                process.communicate(timeout=15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
