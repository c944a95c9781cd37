"""Every code block of README.md and examples/*/README.md runs, as written, the way a reader runs it.

A small collector rather than a plugin: pytest-markdown-docs and phmdoctest run Python blocks only, and
most of these READMEs are shell. The rules, which the READMEs follow:

- The blocks of one section (a ``##`` or ``###`` heading) run in order in one fresh directory, so a
  later block can use the files an earlier one made; sections run side by side. The directory holds a copy of ``examples/``, as a
  clone of the repository does; nothing of the repository is changed.
- ``sh`` blocks run with ``bash -e -o pipefail`` and the test venv's ``bin`` first on PATH (the README
  says to activate the venv once); ``python`` blocks run as files: one whose first line is
  ``# NAME.py`` is written as NAME.py (later blocks import it) and run, the others run as a script.
  Any other language (``ini`` units, the layout tree) is not code to run.
- A command a README documents as failing, ``cmd  # exit 1``, must exit with exactly that code.
- A block is left out only with a visible reason right above it: ``<!-- not run: REASON -->``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "examples").glob("*/README.md"))]
RUN = ("sh", "python")
_FENCE = re.compile(r"^```(\w*)\s*$")
_HEADING = re.compile(r"^(#{2,3}) (.+)$")
_NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int
    not_run: str | None


@dataclass(frozen=True)
class Section:
    document: Path
    title: str
    blocks: tuple[Block, ...]

    @property
    def id(self) -> str:
        return f"{self.document.relative_to(ROOT)}::{self.title}"


def sections(document: Path) -> list[Section]:
    """The sections of a Markdown file that hold code blocks, each with its blocks in order."""
    found: list[Section] = []
    title, blocks = "(top)", []
    lines = document.read_text(encoding="utf-8").splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        heading = _HEADING.match(line)
        fence = _FENCE.match(line)
        if heading:
            if blocks:
                found.append(Section(document, title, tuple(blocks)))
            title, blocks = heading.group(2).strip(), []
        elif fence:
            start = number
            number += 1
            body = []
            while not lines[number].startswith("```"):
                body.append(lines[number])
                number += 1
            above = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
            mark = _NOT_RUN.match(above.strip())
            blocks.append(Block(fence.group(1), "\n".join(body) + "\n", start + 1, mark.group(1) if mark else None))
        number += 1
    if blocks:
        found.append(Section(document, title, tuple(blocks)))
    return found


ALL = [section for document in DOCUMENTS for section in sections(document)]
RUNNABLE = [section for section in ALL if any(b.language in RUN and not b.not_run for b in section.blocks)]


def _environment(directory: Path) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("VARDIYA_")}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    environment["HOME"] = str(directory / "home")  # nothing of the tester's own setup leaks in
    environment["COLUMNS"] = "100"
    for name in ("PYTHONPATH", "VIRTUAL_ENV"):
        environment.pop(name, None)
    return environment


_EXIT = re.compile(r"^(?P<command>\S.*?)\s+#\s*exit (?P<code>\d+)\b.*$")


def _with_exit_checks(code: str) -> str:
    """A command documented as ``cmd  # exit 1`` must exit with exactly that code (and not stop the block)."""
    lines = []
    for number, line in enumerate(code.splitlines(), 1):
        said = _EXIT.match(line)
        if said is None:
            lines.append(line)
            continue
        expected = said.group("code")
        lines.append(
            f"{{ {said.group('command')} ; }} && __rc=0 || __rc=$?; [ \"$__rc\" = {expected} ] || "
            f"{{ echo \"block line {number}: expected exit {expected}, got $__rc\" >&2; exit 1; }}"
        )
    return "\n".join(lines) + "\n"


def run_block(block: Block, directory: Path, number: int, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if block.language == "sh":
        # One reader's shell: what a block exports and where it cds carry over to the next block.
        environment = {**environment, "README_STATE": str(directory.parent / f"{directory.name}.shell-state")}
        script = (
            '[ -f "$README_STATE" ] && . "$README_STATE"\n'
            'trap \'{ export -p; printf "cd %q\\n" "$PWD"; } > "$README_STATE"\' EXIT\n' + _with_exit_checks(block.code)
        )
        command = ["bash", "-e", "-o", "pipefail", "-c", script]
    else:
        first = block.code.splitlines()[0] if block.code.strip() else ""
        named = re.match(r"^# ([\w./-]+\.py)\b", first)
        path = directory / (named.group(1) if named else f"block_{number}.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.code, encoding="utf-8")
        command = [sys.executable, str(path)]
    return subprocess.run(
        command, cwd=directory, env=environment, capture_output=True, text=True, timeout=600, check=False
    )


def run_section(section: Section, directory: Path) -> str | None:
    """Run a section's blocks in order in ``directory``; the first failure, described, or None."""
    shutil.copytree(ROOT / "examples", directory / "examples", ignore=shutil.ignore_patterns("*.db", "__pycache__"))
    (directory / "home").mkdir()
    environment = _environment(directory)
    for number, block in enumerate(section.blocks, 1):
        if block.language not in RUN or block.not_run:
            continue
        done = run_block(block, directory, number, environment)
        if done.returncode != 0:
            return (
                f"{section.document.name} line {block.line} ({block.language}) exited {done.returncode}\n"
                f"--- block\n{block.code}--- stdout\n{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}"
            )
    return None


@pytest.fixture(scope="module")
def section_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[str | None]]]:
    """Every section started at once, each in its own directory: most of their time is waiting (a
    worker's real 60 s retries in the meter_validation walk-through), so they overlap well."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        yield {
            section.id: pool.submit(run_section, section, tmp_path_factory.mktemp("readme"))
            for section in sorted(RUNNABLE, key=_slowest_first)
        }


def _slowest_first(section: Section) -> int:
    return -sum(block.code.count("worker") + block.code.count("replay") for block in section.blocks)


@pytest.mark.parametrize("section", RUNNABLE, ids=[section.id for section in RUNNABLE])
def test_readme_section_runs_as_written(section: Section, section_runs: dict[str, Future[str | None]]) -> None:
    failure = section_runs[section.id].result(timeout=1800)
    assert failure is None, failure


def test_every_block_is_run_or_says_why() -> None:
    """No block slips out quietly: each is run, is not code (ini, a tree), or names its reason."""
    for section in ALL:
        for block in section.blocks:
            assert block.language in (*RUN, "ini", ""), f"{section.id} line {block.line}: unknown language {block.language!r}"
            if block.not_run:
                assert len(block.not_run) > 10, f"{section.id} line {block.line}: say why the block is not run"
    marked = [block for section in ALL for block in section.blocks if block.not_run]
    assert len(marked) <= 3, f"{len(marked)} blocks are not run; marks must stay rare"


def test_the_collector_finds_the_known_sections() -> None:
    """The parse itself: the sections the issue names are collected, with their shell blocks."""
    ids = {section.id for section in RUNNABLE}
    for expected in (
        "README.md::Invocation models, end to end", "README.md::A slot job, end to end",
        "README.md::Using the primitives directly", "README.md::Run it in production",
        "examples/meter_validation/README.md::Running it by hand",
        "examples/meter_validation/README.md::Planning it first",
    ):
        assert expected in ids, sorted(ids)


def test_the_primitives_snippet_runs_twice(tmp_path: Path) -> None:
    """A reader runs a snippet again: the primitives one must not fail on a store it made itself."""
    [section] = [section for section in RUNNABLE if section.title == "Using the primitives directly"]
    environment = _environment(tmp_path)
    for _ in range(2):
        done = run_block(section.blocks[0], tmp_path, 1, environment)
        assert done.returncode == 0, done.stderr
