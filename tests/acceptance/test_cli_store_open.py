"""Opening the store from the command line: read commands never create one, bad URLs are one line.

A read command on a store that does not exist (a mistyped ``--db``) used to create an empty store and
answer that all was healthy. It now refuses with one line and exit 2, creating nothing: no SQLite
file, no tables in a PostgreSQL database. ``db upgrade``, the services and the commands that store
work still create one.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vardiya.errors import InvalidDatabaseURL, StoreNotFound
from vardiya.store import open_store

from ..support.cli import assert_one_line_error, run_cli
from ..support.postgres import fresh_database, table_names

REPO = Path(__file__).resolve().parents[2]
PIPELINE = f"{REPO}/examples/meter_pipeline.py:pipeline"
PROFILE = f"{REPO}/examples/meter_validation/profile.toml"

APP = """
from datetime import timedelta
from vardiya import App, SlotScheme
from vardiya.slots.sources import IterableSource

app = App("reads")

def echo(record, context):
    return record

app.handler("echo", model="async")(echo)

@app.slot_job("job", scheme=SlotScheme(slots=4), source=IterableSource(range(8)))
def job(record, context):
    return None
"""

#: Every read command, with what it needs besides --db.
READS = {
    "status": ["status"],
    "status --json": ["status", "--json"],
    "dlq list": ["dlq", "list"],
    "dlq show": ["dlq", "show", "1"],
    "dlq redrive": ["dlq", "redrive", "--dry-run"],
    "dlq purge": ["dlq", "purge", "--handler", "echo", "--dry-run"],
    "invoke status": ["invoke", "status", "1"],
    "invoke metrics": ["invoke", "metrics", "echo", "--app", "{app}"],
    "slots report": ["slots", "report", "job", "--period", "2026-12-01", "--app", "{app}"],
    "pipeline status": ["pipeline", "status", PIPELINE],
    "pipeline triggers": ["pipeline", "triggers", PIPELINE],
    "plan --history": ["plan", "invocation", "--history", "echo", "--model", "async", "--profile", PROFILE,
                       "--app", "{app}"],
}


def _app(directory: Path) -> str:
    path = directory / "reads_app.py"
    path.write_text(textwrap.dedent(APP))
    return f"{path}:app"


def _args(name: str, app: str) -> list[str]:
    return [part.format(app=app) for part in READS[name]]


def test_every_read_command_refuses_a_missing_sqlite_store_and_creates_nothing(tmp_path: Path) -> None:
    app = _app(tmp_path)
    before = set(tmp_path.iterdir())
    for name in sorted(READS):
        result = run_cli("--db", "sqlite:///prod-typo.db", *_args(name, app), cwd=tmp_path)
        assert_one_line_error(result, "no vardiya store at prod-typo.db", "db upgrade")
        assert {path for path in tmp_path.iterdir() if path.name != "__pycache__"} == before, name


def test_the_default_store_is_not_created_by_a_read_either(tmp_path: Path) -> None:
    result = run_cli("status", cwd=tmp_path)
    assert_one_line_error(result, "no vardiya store at vardiya.db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.postgres
def test_a_read_command_refuses_a_postgres_database_without_vardiya_tables(tmp_path: Path) -> None:
    app = _app(tmp_path)
    with fresh_database() as url:
        for name in ("status", "dlq list", "invoke status", "invoke metrics", "pipeline status"):
            result = run_cli("--db", url, *_args(name, app), cwd=tmp_path)
            assert_one_line_error(result, "no vardiya store at", "db upgrade")
        assert table_names(url) == set()
        with pytest.raises(StoreNotFound):
            open_store(url, create=False)
        assert table_names(url) == set()


def test_writes_and_db_upgrade_still_create_the_store(tmp_path: Path) -> None:
    app = _app(tmp_path)
    submitted = run_cli("--db", "sqlite:///new.db", "invoke", "submit", "echo", "--payload", "{}", "--app", app, cwd=tmp_path)
    assert submitted.code == 0, submitted.stderr
    assert (tmp_path / "new.db").exists()
    assert run_cli("--db", "sqlite:///new.db", "status", cwd=tmp_path).code in (0, 1)
    worker = run_cli("--db", "sqlite:///fleet.db", "worker", "--until-idle", "--app", app, cwd=tmp_path)
    assert worker.code == 0, worker.stderr
    assert "first run: created a new vardiya store at sqlite:///fleet.db" in worker.stderr
    again = run_cli("--db", "sqlite:///fleet.db", "worker", "--until-idle", "--app", app, cwd=tmp_path)
    assert again.code == 0 and "first run" not in again.stderr, again.stderr
    upgraded = run_cli("db", "upgrade", "--db", "sqlite:///other.db", cwd=tmp_path)
    assert upgraded.code == 0, upgraded.stderr
    assert run_cli("dlq", "list", "--db", "sqlite:///other.db", cwd=tmp_path).code == 0


def test_the_python_api_refuses_a_missing_store_only_when_asked(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFound, match="no vardiya store at"):
        open_store(f"sqlite:///{tmp_path}/missing.db", create=False)
    assert list(tmp_path.iterdir()) == []
    open_store(f"sqlite:///{tmp_path}/made.db").close()  # created and migrated on first use, as before
    open_store(f"sqlite:///{tmp_path}/made.db", create=False).close()


BAD_URLS = {
    "postgresql://postgres@127.0.0.1:notaport/x": "port",
    "postgresql://postgres:secret@127.0.0.1:/x": "port",
    "postgresql://postgres@127.0.0.1:70000/x": "between 1 and 65535",
    "": "empty",
    "   ": "empty",
}


def test_a_bad_url_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    for n, (url, fragment) in enumerate(sorted(BAD_URLS.items())):
        command = ["db", "upgrade"] if n % 2 else ["status"]  # a read and the command that creates
        line = assert_one_line_error(run_cli(*command, "--db", url, cwd=tmp_path), fragment)
        assert "secret" not in line
        with pytest.raises(InvalidDatabaseURL, match=fragment):
            open_store(url)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_vardiya_db_is_an_error_not_the_default(tmp_path: Path) -> None:
    result = run_cli("db", "upgrade", cwd=tmp_path, env={"VARDIYA_DB": ""})
    assert_one_line_error(result, "VARDIYA_DB is set but empty")
    assert list(tmp_path.iterdir()) == []
