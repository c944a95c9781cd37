"""``vardiya invoke status`` names the queue a call waits in, as a user runs it (issue 16)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.support.cli import run_cli

APP = '''
from vardiya.app import App

app = App("office")

@app.handler("send_mail", queue="mail")
def send_mail(message, context):
    return {"sent": message["to"]}

@app.handler("render_report")
def render_report(request, context):
    return {"pages": 3}
'''


def test_invoke_status_shows_the_calls_queue(tmp_path: Path) -> None:
    (tmp_path / "office.py").write_text(textwrap.dedent(APP))
    options = ["--db", f"sqlite:///{tmp_path / 'v.db'}", "--app", "office.py:app"]
    assert run_cli("invoke", "submit", "send_mail", "--payload", '{"to": "a@example.com"}', *options, cwd=tmp_path).code == 0
    assert run_cli("invoke", "submit", "render_report", "--payload", '{"month": 11}', *options, cwd=tmp_path).code == 0
    mail = json.loads(run_cli("invoke", "status", "1", "--json", *options, cwd=tmp_path).stdout)
    assert (mail["handler"], mail["queue"], mail["state"]) == ("send_mail", "mail", "pending")
    report = json.loads(run_cli("invoke", "status", "2", "--json", *options, cwd=tmp_path).stdout)
    assert (report["handler"], report["queue"]) == ("render_report", "default")
    text = run_cli("invoke", "status", "1", *options, cwd=tmp_path, env={"COLUMNS": "200"})
    assert text.code == 0 and "call 1 of send_mail (queue mail): pending" in text.stdout
