"""The static checks run with the tests: ruff, mypy and lint-imports, as configured in pyproject.toml.

Run from the project root with the executables of the test run's own environment (next to
``sys.executable``), so ``./scripts/test`` fails on a lint finding, a type error or a broken import
contract the way it fails on a broken test, and CI needs no separate step. Each prints its findings in
the failure message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(tool: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    executable = BIN / tool
    if not executable.is_file():
        pytest.fail(f"{executable} is missing: install the dev extra (pip install -e '.[dev]')")
    return subprocess.run(
        [str(executable), *arguments], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def _passes(tool: str, *arguments: str) -> None:
    result = _run(tool, *arguments)
    assert result.returncode == 0, f"{tool} {' '.join(arguments)} exited {result.returncode}:\n{result.stdout}{result.stderr}"


def test_ruff_finds_nothing() -> None:
    _passes("ruff", "check", "--no-fix", ".")


@pytest.mark.slow  # about 8 s without its cache
def test_mypy_finds_nothing() -> None:
    _passes("mypy")  # the files and the strict modules: [tool.mypy] in pyproject.toml


def test_import_contracts_are_kept() -> None:
    _passes("lint-imports")


def test_a_finding_fails_the_check(tmp_path: Path) -> None:
    """The checks are not vacuous: the configured ruff and mypy report a planted bug in a file they check."""
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n\ndef half(n: int) -> int:\n    return n / 2\n", encoding="utf-8")
    ruff = _run("ruff", "check", "--no-fix", "--config", str(ROOT / "pyproject.toml"), str(planted))
    assert ruff.returncode == 1 and "F401" in ruff.stdout, ruff.stdout + ruff.stderr
    mypy = _run("mypy", "--config-file", str(ROOT / "pyproject.toml"), "--no-incremental", str(planted))
    assert mypy.returncode == 1 and "[return-value]" in mypy.stdout, mypy.stdout + mypy.stderr
