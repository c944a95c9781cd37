"""The dashboard's planner: the batch-size sweep and the model comparison of a workload and a profile
given by path, as ``vardiya plan`` replays and draws them; files outside the working directory are refused."""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.cli import run_cli
from tests.support.dashboard import TOKEN
from vardiya.store import open_store
from vardiya.ui import Guard, create_app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "meter_validation"
SIZES = "1,10,100,1000"


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Path]]:
    """A dashboard started in a directory holding a small night (600 readings) and the example profile."""
    root = tmp_path_factory.mktemp("planner")
    night = (EXAMPLE / "validation-night.csv").read_text(encoding="utf-8").splitlines()
    (root / "inputs").mkdir()
    (root / "inputs" / "night.csv").write_text("\n".join(night[:601]) + "\n", encoding="utf-8")
    shutil.copy(EXAMPLE / "profile.toml", root / "inputs" / "profile.toml")
    guard = Guard.for_server(host="127.0.0.1", environment_token=TOKEN)
    with open_store(f"sqlite:///{root / 'v.db'}", create=True) as store, TestClient(
        create_app(store, None, guard, root=root), base_url="http://127.0.0.1:8765"
    ) as client:
        yield client, root


def _cli(root: Path, *args: str) -> dict:
    result = run_cli("plan", *args, "--workload", "inputs/night.csv", "--profile", "inputs/profile.toml", "--json", cwd=root)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


PATHS = {"workload": "inputs/night.csv", "profile": "inputs/profile.toml"}


def test_the_api_is_plan_batch_sweep_and_compare(planner: tuple[TestClient, Path]) -> None:
    client, root = planner
    swept = client.get("/api/plan/batch-sweep", params={**PATHS, "sizes": SIZES, "policy": "bisect"}).json()
    assert swept == _cli(root, "batch-sweep", "--sizes", SIZES, "--policy", "bisect")
    assert [row["batch_size"] for row in swept["rows"]] == [1, 10, 100, 1000] and swept["policy"] == "bisect"
    compared = client.get("/api/plan/compare", params={**PATHS, "batch_size": 50}).json()
    assert compared == _cli(root, "compare", "--batch-size", "50")
    assert [row["model"] for row in compared["models"]] == ["sync", "async", "stream"]
    # an absolute path under the working directory is as good as a relative one
    absolute = {"workload": str(root / "inputs" / "night.csv"), "profile": str(root / "inputs" / "profile.toml")}
    assert client.get("/api/plan/compare", params={**absolute, "batch_size": 50}).json() == compared


def test_the_page_draws_both_charts(planner: tuple[TestClient, Path]) -> None:
    client, _root = planner
    empty = client.get("/planner")
    assert empty.status_code == 200 and 'name="workload"' in empty.text and "<svg" not in empty.text
    page = client.get("/planner", params={**PATHS, "sizes": SIZES})
    assert page.status_code == 200
    sweep_chart = page.text.split('id="sweep-chart">', 1)[1]
    assert sweep_chart.lstrip().startswith("<?xml") and "cost against batch size" in sweep_chart
    assert "models and stream policies compared" in page.text.split('id="compare-chart">', 1)[1]
    assert page.text.count("data-size=") == 4 and 'data-model="sync"' in page.text
    swept = client.get("/api/plan/batch-sweep", params={**PATHS, "sizes": SIZES}).json()
    assert f"<strong>{swept['cheapest']}</strong>" in page.text


@pytest.mark.parametrize(("query", "status", "says"), [
    ({"workload": "../../etc/passwd", "profile": "inputs/profile.toml"}, 400, "outside the dashboard's working directory"),
    ({"workload": "/etc/passwd", "profile": "inputs/profile.toml"}, 400, "outside the dashboard's working directory"),
    ({"workload": "inputs/night.csv", "profile": "/etc/hostname"}, 400, "outside the dashboard's working directory"),
    ({"workload": "inputs/none.csv", "profile": "inputs/profile.toml"}, 400, "is not a file under"),
    ({"workload": "inputs", "profile": "inputs/profile.toml"}, 400, "is not a file under"),
    ({"workload": "inputs/profile.toml", "profile": "inputs/profile.toml"}, 400, "line 1: expected the header"),
    ({"workload": "inputs/night.csv", "profile": "inputs/night.csv"}, 400, "night.csv is not valid TOML"),
    ({"workload": "inputs/night.csv"}, 422, "profile"),
    ({**PATHS, "sizes": "1,x"}, 400, "whole numbers separated by commas"),
    ({**PATHS, "sizes": "0"}, 400, "sizes"),
    ({**PATHS, "sizes": ",".join(["1"] * 51)}, 400, "at most 50 batch sizes"),
    ({**PATHS, "policy": "yolo"}, 422, "pattern"),
])
def test_bad_plan_requests_are_a_4xx_with_a_message(planner: tuple[TestClient, Path], query: dict, status: int, says: str) -> None:
    client, _root = planner
    answer = client.get("/api/plan/batch-sweep", params=query)
    assert answer.status_code == status, answer.text
    assert says in answer.text


def test_a_symlink_out_of_the_working_directory_is_refused(planner: tuple[TestClient, Path], tmp_path: Path) -> None:
    client, root = planner
    outside = tmp_path / "secret.csv"
    outside.write_text("record,outcome\n1,ok\n", encoding="utf-8")
    link = root / "inputs" / "link.csv"
    link.symlink_to(outside)
    try:
        answer = client.get("/api/plan/compare", params={"workload": "inputs/link.csv", "profile": PATHS["profile"]})
        assert answer.status_code == 400 and "outside the dashboard's working directory" in answer.json()["error"]
        page = client.get("/planner", params={"workload": "inputs/link.csv", "profile": PATHS["profile"]})
        assert page.status_code == 400 and "outside the dashboard" in page.text
    finally:
        link.unlink()


def _upload(client: TestClient, root: Path, workload: tuple[str, bytes] | None = None,
            profile: tuple[str, bytes] | None = None, **fields: str) -> Any:
    files = {
        "workload_file": workload or ("night.csv", (root / "inputs" / "night.csv").read_bytes(), "text/csv"),
        "profile_file": profile or ("profile.toml", (root / "inputs" / "profile.toml").read_bytes(), "application/toml"),
    }
    return client.post("/planner", files=files, data=fields)


def test_an_upload_replays_as_the_same_files_by_path_do(planner: tuple[TestClient, Path]) -> None:
    client, root = planner
    by_path = client.get("/planner", params={**PATHS, "sizes": SIZES, "batch_size": "50"})
    uploaded = _upload(client, root, sizes=SIZES, batch_size="50")
    assert uploaded.status_code == 200, uploaded.text
    assert 'id="uploaded">Replayed the uploads night.csv and profile.toml' in uploaded.text
    swept = _cli(root, "batch-sweep", "--sizes", SIZES)
    assert f"<strong>{swept['cheapest']}</strong>" in uploaded.text and uploaded.text.count("data-size=") == 4

    def tables(text: str) -> str:
        return "".join(text.split(f'id="{table}">', 1)[1].split("</table>", 1)[0] for table in ("sweep-rows", "compare-rows"))

    assert tables(uploaded.text) == tables(by_path.text)  # the same replay, to the last figure
    assert "models and stream policies compared (stream batch size 50)" in uploaded.text
    assert sorted(path.name for path in (root / "inputs").iterdir()) == ["night.csv", "profile.toml"]  # nothing written


@pytest.mark.parametrize(("workload", "profile", "status", "says"), [
    (("chart.png", b"\x89PNG\r\n\x1a\n", "image/png"), None, 415, "the workload upload 'chart.png' is not a .csv or .txt file"),
    (None, ("profile.json", b"{}", "application/json"), 415, "the profile upload 'profile.json' is not a .toml file"),
    (("night.csv", b"record,outcome\n1,ok\n\xff\xfe\n", "text/csv"), None, 400, "night.csv, line 3: byte 0xff is not UTF-8 text"),
    (("night.csv", b"id;result\n1;ok\n", "text/csv"), None, 400, "night.csv, line 1: expected the header"),
    (("night.csv", b"", "text/csv"), None, 400, "the workload upload 'night.csv' is empty"),
    (None, ("profile.toml", b"[stream\n", "application/toml"), 400, "profile.toml is not valid TOML"),
    (None, ("profile.toml", b"[nonsense]\nx = 1\n", "application/toml"), 400, "profile.toml"),
    (("big.csv", b"record,outcome\n" + b"1,ok\n" * (2 * 1024 * 1024 + 1), "text/csv"), None, 413, "over 10 MB"),
])
def test_bad_uploads_are_a_4xx_page_with_one_line(
    planner: tuple[TestClient, Path], workload: Any, profile: Any, status: int, says: str
) -> None:
    client, root = planner
    answer = _upload(client, root, workload=workload, profile=profile)
    assert answer.status_code == status, answer.text[:500]
    message = html.unescape(answer.text.split('id="error">', 1)[1].split("</p>", 1)[0])
    assert says in message and "\n" not in message
    assert sorted(path.name for path in (root / "inputs").iterdir()) == ["night.csv", "profile.toml"]


def test_an_upload_without_its_files_or_over_the_body_limit_is_refused(planner: tuple[TestClient, Path]) -> None:
    client, _root = planner
    missing = client.post("/planner", data={"sizes": "1"})
    assert missing.status_code == 422 and "workload_file" in missing.text
    huge = client.post("/planner", content=b"x" * 10, headers={"content-length": str(30 * 1024 * 1024)})
    assert huge.status_code == 413 and "over 20 MB" in huge.text
    files = {"workload_file": ("a.csv", b"record,outcome\n1,ok\n"), "profile_file": ("p.toml", b"")}
    forged = client.post("/planner", files=files, headers={"origin": "http://evil.example"})
    assert forged.status_code == 403
