"""Real ``vardiya scheduler`` and ``vardiya worker`` processes for the service tests.

Each process runs ``python -m vardiya`` with the app of ``tests/support/service_app.py`` (configured by
the ``VT_*`` variables of the test), its stderr kept in a log file under the test's directory so a
failure shows what the processes said.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = f"{ROOT / 'tests' / 'support' / 'service_app.py'}:app"


class Fleet:
    """The service processes of one test, by name; started, killed and restarted at will."""

    def __init__(self, url: str, directory: Path, env: dict[str, str]) -> None:
        self.url = url
        self.directory = directory
        self.env = {key: value for key, value in os.environ.items() if key not in ("VARDIYA_DB", "VARDIYA_APP")}
        self.env.update(env)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.commands: dict[str, list[str]] = {}
        self.kills = 0

    def start(self, name: str, *args: str) -> None:
        command = [sys.executable, "-m", "vardiya", *args, "--app", APP, "--db", self.url]
        self.commands[name] = command
        self._launch(name)

    def _launch(self, name: str) -> None:
        log = (self.directory / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            self.commands[name], env=self.env, stdout=subprocess.DEVNULL, stderr=log, cwd=self.directory
        )
        log.close()

    def kill(self, name: str) -> None:
        process = self.processes[name]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        self.kills += 1

    def restart(self, name: str) -> None:
        self._launch(name)

    def terminate(self, name: str, *, timeout: float = 30) -> int:
        """SIGTERM: the process drains and exits; returns its exit code."""
        process = self.processes[name]
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=timeout)

    def alive(self, name: str) -> bool:
        return self.processes[name].poll() is None

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}" for path in sorted(self.directory.glob("*.log"))
        )


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str, fleet: Fleet | None = None) -> None:
    """Poll ``condition`` (test code, real time) until it holds; fail with the processes' logs if it does not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    logs = fleet.logs() if fleet is not None else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs}")
