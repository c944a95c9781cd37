"""Arbitrary text in the CLI's time, URL, name, key and workload parsers: exit 0 or 2, never a traceback,
never a file written on exit 2.

The command runs in-process (``vardiya.cli.main``, the same function the ``vardiya`` script calls, so
errors become the one line and the exit code exactly as they do there) under click's ``CliRunner``
isolation, which is what makes a hundred examples cost seconds instead of a hundred process starts.
An exception that ``main`` does not turn into exit 2 leaves the call and fails the test with it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vardiya.cli import main

APP = '''
from vardiya import App, IterableSource, SlotScheme

app = App("arbitrary")

@app.slot_job("nightly", scheme=SlotScheme(slots=24, tz="Europe/Istanbul"), source=IterableSource(range(1, 5)))
def refresh(user_id, context):
    pass

app.handler("plain", model="async")(lambda record, context: record)
'''

PROFILE = Path(__file__).resolve().parents[2] / "examples" / "meter_validation" / "profile.toml"
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
#: Text as people paste it: any characters (NUL and surrogates excluded: an argv cannot hold them).
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


def _run(directory: Path, *args: str) -> tuple[int, str]:
    """``vardiya ARGS`` in ``directory``: (exit code, stderr)."""
    runner = CliRunner()
    with contextlib.chdir(directory), runner.isolation(env={"VARDIYA_DB": None, "VARDIYA_APP": None}) as (_out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        return code, err.getvalue().decode("utf-8", "replace")


def _files(directory: Path) -> set[str]:
    return {str(path.relative_to(directory)) for path in directory.rglob("*") if path.is_file()}


@pytest.fixture(scope="module")
def project() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="vardiya-arbitrary-"))
    (directory / "app_module.py").write_text(textwrap.dedent(APP))
    (directory / "profile.toml").write_text(PROFILE.read_text(encoding="utf-8"), encoding="utf-8")
    return directory


def _check(project: Path, *args: str) -> None:
    before = _files(project)
    code, stderr = _run(project, *args)
    assert code in (0, 2), (args, code, stderr)
    assert "Traceback" not in stderr, stderr
    if code == 2:
        assert stderr.startswith("vardiya: error: ") and stderr.count("\n") == 1, stderr
        assert _files(project) == before, args
    else:
        for made in _files(project) - before:  # a good input may create the store: start each example afresh
            os.remove(project / made)


@SETTINGS
@given(text=TEXT)
def test_times(project: Path, text: str) -> None:
    store = f"sqlite:///{project / 'times.db'}"
    _check(project, "tick", "nightly", "--at", text, "--db", store, "--app", "app_module.py:app")
    _check(project, "slots", "at", text, "--slots", "24", "--tz", "Pacific/Kiritimati")


@SETTINGS
@given(zone=TEXT, period=TEXT)
def test_zones_and_periods(project: Path, zone: str, period: str) -> None:
    _check(project, "slots", "which", "5", "--slots", "24", "--at", "2026-12-01T10:00Z", "--tz", zone, "--period-length", period)


@SETTINGS
@given(url=TEXT.filter(lambda text: text.strip() != "" and "://" not in text))
def test_urls(project: Path, url: str) -> None:
    # Text without a scheme's "://": what a typo makes. (URLs of a known scheme with a bad host or port
    # are the store opener's own tests; a random host name would be looked up in DNS here.)
    _check(project, "--db", url, "invoke", "submit", "plain", "--payload", "{}", "--app", "app_module.py:app")


@SETTINGS
@given(user=TEXT, port=TEXT, database=TEXT)
def test_postgres_urls(project: Path, user: str, port: str, database: str) -> None:
    # Full URLs of a known scheme, the host kept on this machine (no DNS): arbitrary user, port and
    # database text reach the URL parser and the driver; a read command creates nothing either way.
    _check(project, "--db", f"postgresql://{user}@127.0.0.1:{port}/{database}", "status")
    _check(project, "--db", f"sqlite:///{database}", "status")


@SETTINGS
@given(name=TEXT, key=TEXT)
def test_names_and_keys(project: Path, name: str, key: str) -> None:
    store = f"sqlite:///{project / 'names.db'}"
    options = ["--db", store, "--app", "app_module.py:app"]
    _check(project, "invoke", "submit", name, "--payload", "{}", *options)
    _check(project, "tick", name, "--at", "2026-12-01T10:01Z", *options)
    _check(project, "invoke", "submit", "plain", "--payload", "{}", "--key", key, *options)


@SETTINGS
@given(content=st.binary(max_size=200) | TEXT.map(lambda text: ("record,outcome\n" + text).encode("utf-8", "replace")))
def test_workloads(project: Path, content: bytes) -> None:
    (project / "workload.csv").write_bytes(content)
    _check(project, "plan", "invocation", "--model", "async", "--workload", "workload.csv", "--profile", "profile.toml", "--json")
