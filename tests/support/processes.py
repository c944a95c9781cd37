"""Running worker functions in real processes (spawned, never forked) and collecting what they report."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any

import pytest

SPAWN = multiprocessing.get_context("spawn")


def receive(conn: Connection, process: SpawnProcess, *, timeout: float) -> Any:
    """The value a worker reports; fails the test with the worker's traceback, or when it stays silent."""
    if not conn.poll(timeout):
        pytest.fail(f"worker {process.name} (pid {process.pid}) reported nothing within {timeout} s", pytrace=False)
    status, value = conn.recv()
    if status != "ok":
        pytest.fail(f"worker {process.name} (pid {process.pid}) failed:\n{value}", pytrace=False)
    return value


def stop(process: SpawnProcess, *, grace: float = 10.0) -> None:
    """Let a process this test started exit (killing it after ``grace`` seconds), and reap it."""
    process.join(timeout=grace)
    if process.is_alive():
        process.kill()
        process.join(timeout=30)
    process.close()


def run_then_kill(target: Callable[..., None], arguments: tuple[Any, ...], *, name: str, timeout: float) -> Any:
    """Run ``target(*arguments, conn)`` in a process, wait for its report, then SIGKILL it.

    Returns the report; fails the test when the process dies before reporting.
    """
    import os
    import signal

    receiving, sending = SPAWN.Pipe(duplex=False)
    process = SPAWN.Process(target=target, args=(*arguments, sending), name=name, daemon=True)
    process.start()
    sending.close()  # the child holds its own copy
    try:
        try:
            report = receive(receiving, process, timeout=timeout)
        except EOFError:
            process.join(timeout=30)
            pytest.fail(f"{name} died before it reported (exit code {process.exitcode})", pytrace=False)
        os.kill(process.pid, signal.SIGKILL)  # type: ignore[arg-type]
        process.join(timeout=30)
        assert process.exitcode == -signal.SIGKILL
    finally:
        receiving.close()
        stop(process, grace=0)
    return report


def run_racing(target: Callable[..., None], argument_sets: Sequence[tuple[Any, ...]], *, timeout: float) -> list[Any]:
    """Run ``target(*arguments, start_barrier, conn)`` once per argument set, all in parallel.

    The processes wait at a shared barrier before their work starts, so they really run at the same time.
    Returns what each reported, in the order of ``argument_sets``.
    """
    start = SPAWN.Barrier(len(argument_sets))
    running: list[tuple[SpawnProcess, Connection]] = []
    failed = True
    try:
        for index, arguments in enumerate(argument_sets):
            receiving, sending = SPAWN.Pipe(duplex=False)
            process = SPAWN.Process(
                target=target, args=(*arguments, start, sending), name=f"{target.__name__}-{index}", daemon=True
            )
            process.start()
            sending.close()  # the child holds its own copy
            running.append((process, receiving))
        reports = [receive(conn, process, timeout=timeout) for process, conn in running]
        failed = False
        return reports
    finally:
        for process, conn in running:
            conn.close()
            stop(process, grace=10.0 if not failed else 0.0)
