"""Running the ``vardiya`` command as a user would: a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    """Run ``python -m vardiya ARGS`` in ``cwd``; VARDIYA_DB / VARDIYA_APP from the outside are dropped."""
    environment = {key: value for key, value in os.environ.items() if key not in ("VARDIYA_DB", "VARDIYA_APP")}
    environment.update(env or {})
    completed = subprocess.run(
        [sys.executable, "-m", "vardiya", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Result(completed.returncode, completed.stdout, completed.stderr)


def assert_one_line_error(result: Result, *fragments: str) -> str:
    """Bad input: exit 2, one ``vardiya: error:`` line on stderr holding every fragment, nothing on stdout."""
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("vardiya: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]
