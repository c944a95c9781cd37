"""The command line as a user meets it: version, db upgrade/current, one-line errors with exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

import vardiya
from tests.support.cli import assert_one_line_error, run_cli
from vardiya.store.migrate import head_revision


def test_version(tmp_path: Path) -> None:
    result = run_cli("--version", cwd=tmp_path)
    assert result.code == 0
    assert vardiya.__version__ in result.stdout


def test_db_current_on_a_missing_file_writes_nothing(tmp_path: Path) -> None:
    result = run_cli("db", "current", "--json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["current"] is None and document["state"] == "empty"
    assert list(tmp_path.iterdir()) == []


def test_db_upgrade_then_current(tmp_path: Path) -> None:
    upgraded = run_cli("db", "upgrade", "--json", cwd=tmp_path)
    assert upgraded.code == 0, upgraded.stderr
    assert json.loads(upgraded.stdout) == {"from": None, "to": head_revision(), "head": head_revision()}
    assert (tmp_path / "vardiya.db").exists()
    current = run_cli("db", "current", "--json", cwd=tmp_path)
    assert json.loads(current.stdout)["state"] == "current"
    again = run_cli("db", "upgrade", cwd=tmp_path)
    assert "current" in again.stdout


def test_db_option_after_the_command_and_from_the_environment(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    result = run_cli("db", "upgrade", "--db", f"sqlite:///{target}", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert target.exists()
    other = tmp_path / "from-env.db"
    result = run_cli("db", "upgrade", cwd=tmp_path, env={"VARDIYA_DB": f"sqlite:///{other}"})
    assert result.code == 0 and other.exists()


@pytest.mark.parametrize("url", ["mysql://root@localhost/test", "vardiya.db", "sqlite:///:memory:"])
def test_unusable_url_is_refused(tmp_path: Path, url: str) -> None:
    result = run_cli("--db", url, "db", "upgrade", cwd=tmp_path)
    assert_one_line_error(result, "sqlite:///")
    assert list(tmp_path.iterdir()) == []


def test_unreachable_postgres(tmp_path: Path) -> None:
    result = run_cli("--db", "postgresql://postgres@127.0.0.1:5999/nothing", "db", "upgrade", cwd=tmp_path)
    assert_one_line_error(result, "cannot reach the store", "5999")


def test_file_that_is_not_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 10)
    before = path.read_bytes()
    result = run_cli("--db", f"sqlite:///{path}", "db", "upgrade", cwd=tmp_path)
    assert_one_line_error(result, "is not a SQLite database")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_store_migrated_by_a_newer_vardiya(tmp_path: Path) -> None:
    path = tmp_path / "vardiya.db"
    assert run_cli("db", "upgrade", cwd=tmp_path).code == 0
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    engine.dispose()
    size, mtime = path.stat().st_size, os.stat(path).st_mtime_ns
    result = run_cli("db", "upgrade", cwd=tmp_path)
    assert_one_line_error(result, "newer vardiya", "9999")
    assert (path.stat().st_size, os.stat(path).st_mtime_ns) == (size, mtime)
    current = run_cli("db", "current", "--json", cwd=tmp_path)
    assert json.loads(current.stdout)["state"] == "too_new"


def test_unknown_command_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("frobnicate", cwd=tmp_path)
    assert_one_line_error(result, "frobnicate")


def test_python_dash_m_and_help(tmp_path: Path) -> None:
    result = run_cli("--help", cwd=tmp_path)
    assert result.code == 0
    assert "demo" in result.stdout and "db" in result.stdout
