"""``vardiya worker --queue`` as a user runs it: only the named queues are worked, bad names and bad
rate limits are one line, exit 2, and nothing is written."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.support.cli import assert_one_line_error, run_cli

APP = '''
from vardiya.app import App

app = App("office")

@app.handler("send_mail", queue="mail", rate_limit="{rate}")
def send_mail(message, context):
    return {{"sent": message["to"]}}

@app.handler("render_report", queue="reports")
def render_report(request, context):
    return {{"pages": 3}}
'''


def _setup(tmp_path: Path, rate: str = "50/s") -> list[str]:
    (tmp_path / "office.py").write_text(textwrap.dedent(APP.format(rate=rate)))
    return ["--db", f"sqlite:///{tmp_path / 'v.db'}", "--app", "office.py:app"]


def test_a_worker_of_one_queue_leaves_the_other(tmp_path: Path) -> None:
    options = _setup(tmp_path)
    assert run_cli("invoke", "submit", "send_mail", "--payload", '{"to": "a@example.com"}', *options, cwd=tmp_path).code == 0
    assert run_cli("invoke", "submit", "render_report", "--payload", '{"month": 11}', *options, cwd=tmp_path).code == 0
    worked = run_cli("worker", "--queue", "mail", "--until-idle", "--json", *options, cwd=tmp_path)
    assert worked.code == 0, worked.stderr
    assert json.loads(worked.stdout)["succeeded"] == 1
    assert "in the queues mail" in worked.stderr
    report = json.loads(run_cli("invoke", "status", "2", "--json", *options, cwd=tmp_path).stdout)
    assert report["state"] == "pending"
    worked = run_cli("worker", "--queue", "reports", "--queue", "mail", "--until-idle", "--json", *options, cwd=tmp_path)
    assert json.loads(worked.stdout)["succeeded"] == 1
    assert json.loads(run_cli("invoke", "status", "2", "--json", *options, cwd=tmp_path).stdout)["state"] == "succeeded"


def test_a_bad_queue_name_is_one_line_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    options = _setup(tmp_path)
    result = run_cli("worker", "--queue", "no space", "--until-idle", *options, cwd=tmp_path)
    assert_one_line_error(result, "a queue name (--queue)", "'no space'")
    assert not (tmp_path / "v.db").exists()


def test_a_bad_rate_limit_is_refused_when_the_app_loads(tmp_path: Path) -> None:
    options = _setup(tmp_path, rate="50/fortnight")
    result = run_cli("worker", "--until-idle", *options, cwd=tmp_path)
    assert_one_line_error(result, "handler 'send_mail'", "unknown unit 'fortnight'", "'100/s'")
    assert not (tmp_path / "v.db").exists()
