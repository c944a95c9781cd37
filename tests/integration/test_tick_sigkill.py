"""A tick killed with SIGKILL halfway loses nothing and duplicates nothing.

The nightly-users example (2,400 users, so 100 in each of the 24 slots) runs the tick planned for
2026-12-01 05:01 Europe/Istanbul (slot 5) in a spawned process, slowed to one record at a time, and is
SIGKILLed once some but not all of the slot's files exist. The next run, in the test process, finishes
the slot (and then the backlog of slots 0-4, as every tick does): every user ends with exactly one
complete file and exactly one ``done`` ledger row, the files written before the kill are not rewritten,
and no slot after 5 is touched.

The last tests simulate the crash that a process kill cannot place exactly: inside ``atomic_write``,
between writing the temp file and renaming it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from vardiya import files
from vardiya.examples.nightly_users import JOB, create_users_db
from vardiya.slots.runner import run_tick
from vardiya.slots.sinks import atomic_write, output_path
from vardiya.store import LedgerRow, LedgerStatus, open_store

from ..support.processes import run_then_kill
from ..support.ticks import nightly_job, output_files, tick_until_killed

USERS = 2_400
SLOTS = 24
PLANNED = datetime(2026, 12, 1, 5, 1, tzinfo=ZoneInfo("Europe/Istanbul"))
PERIOD = "2026-12-01"
SLOT = 5
SLOT_USERS = {user for user in range(1, USERS + 1) if user % SLOTS == SLOT}
BACKLOG_USERS = {user for user in range(1, USERS + 1) if user % SLOTS < SLOT}
# Small batches and flushes, so the kill lands after some ledger flushes and inside a batch.
BATCH_SIZE = 10
FLUSH_EVERY = 20


def _user_of(path: Path) -> int:
    return int(path.name.removesuffix(".json"))


def _read_outputs(out_dir: Path) -> dict[int, dict[str, Any]]:
    """Every published output file, parsed; fails on a file that is not complete JSON."""
    documents: dict[int, dict[str, Any]] = {}
    for path in output_files(out_dir):
        user = _user_of(path)
        assert user not in documents, f"user {user} has two output files"
        assert path == output_path(out_dir, PERIOD, user), f"{path} is not where the user's output belongs"
        text = path.read_text(encoding="utf-8")
        try:
            documents[user] = json.loads(text)
        except json.JSONDecodeError as error:
            pytest.fail(f"{path} is partial ({len(text)} bytes): {error}", pytrace=False)
    return documents


def _leftover_temporaries(out_dir: Path) -> list[Path]:
    return sorted(path for path in out_dir.rglob("*") if path.is_file() and not path.name.endswith(".json"))


def _ledger(store_url: str) -> dict[int, LedgerRow]:
    with open_store(store_url) as store:
        return {int(row.record): row for row in store.ledger.rows(JOB, PERIOD)}


def _users_table(users_db: Path) -> dict[int, tuple[str, int]]:
    connection = sqlite3.connect(users_db)
    try:
        rows = connection.execute("SELECT id, plan, signups FROM users")
        return {user: (plan, signups) for user, plan, signups in rows}
    finally:
        connection.close()


def _wait_until_free(store, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Wait (on the store's real clock) until no live claim holds a record of the period."""
    ends = time.monotonic() + timeout
    while store.ledger.claims.held(JOB, PERIOD, store.clock.now()):
        if time.monotonic() > ends:
            pytest.fail(f"the killed tick's claims were still live after {timeout} s", pytrace=False)
        time.sleep(0.05)


def _kill_mid_tick(tmp_path: Path, store_url: str, *, kill_after: int, hang: bool) -> int:
    """Run the slowed tick in a child and SIGKILL it once ``kill_after`` files exist; returns the count it saw."""
    arguments = (
        store_url, str(tmp_path / "users.db"), str(tmp_path / "out"), PLANNED.isoformat(),
        BATCH_SIZE, FLUSH_EVERY, kill_after, 0.005, hang,
    )
    return int(run_then_kill(tick_until_killed, arguments, name="doomed-tick", timeout=60))


@pytest.mark.parametrize("hang", [True, False], ids=["killed-inside-a-batch", "killed-while-running"])
def test_tick_killed_halfway_loses_nothing_and_duplicates_nothing(tmp_path: Path, hang: bool) -> None:
    users_db = create_users_db(tmp_path / "users.db", users=USERS)
    out_dir = tmp_path / "out"
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    open_store(store_url).close()  # migrated once, before the child opens it
    kill_after = 35 if hang else 30

    seen = _kill_mid_tick(tmp_path, store_url, kill_after=kill_after, hang=hang)

    # The killed tick: part of slot 5 written, nothing of any other slot, and every `done` has its file.
    before = _read_outputs(out_dir)
    assert seen >= kill_after
    assert kill_after <= len(before) < len(SLOT_USERS), "the kill did not land in the middle of slot 5"
    assert set(before) <= SLOT_USERS
    ledger_before = _ledger(store_url)
    assert set(ledger_before) <= set(before), "the ledger has a user done whose file does not exist"
    assert {(row.status, row.slot, row.attempts) for row in ledger_before.values()} <= {(LedgerStatus.DONE, SLOT, 1)}
    leftovers = _leftover_temporaries(out_dir)
    if hang:
        # Batches 1-2 flushed, batch 3 buffered (lost with the process), batch 4 half written.
        assert len(before) == kill_after
        assert len(ledger_before) == FLUSH_EVERY
        assert leftovers == []
    else:
        # The kill may land between a temp file and its rename: at most that one hidden temp file,
        # which no reader takes for an output (nothing sweeps it up either).
        assert len(leftovers) <= 1 and all(path.name.startswith(".") for path in leftovers), leftovers
    inodes = {user: output_path(out_dir, PERIOD, user).stat().st_ino for user in before}

    # The killed tick's claims on its last chunk stay until their lease runs out; then the next run,
    # unslowed and with the example's own settings, finishes the slot and then the backlog.
    job = nightly_job(users_db, out_dir)
    with open_store(store_url) as store:
        assert store.ledger.claims.held(JOB, PERIOD, store.clock.now()), "the killed tick held no claim"
        _wait_until_free(store)
        report = run_tick(store, job, PLANNED, within_window=False)
    assert (report.period, report.slot) == (PERIOD, SLOT)
    assert report.already_done == len(ledger_before)
    assert report.started == len(SLOT_USERS) - len(ledger_before)
    assert (report.failed, report.held, report.cut) == (0, 0, None)
    assert report.backlog == len(BACKLOG_USERS)
    assert report.done == report.started + report.backlog

    # Every user of slot 5 (and of the backlog slots) has exactly one complete file; slots 6-23 none.
    after = _read_outputs(out_dir)
    assert set(after) == SLOT_USERS | BACKLOG_USERS
    users = _users_table(users_db)
    for user, document in after.items():
        plan, signups = users[user]
        assert document == {"user": user, "day": PERIOD, "plan": plan, "signups": signups, "slot": user % SLOTS}
    # Files written before the kill were skipped, not rewritten; the rerun left no temp file of its own.
    assert {user: output_path(out_dir, PERIOD, user).stat().st_ino for user in before} == inodes
    assert _leftover_temporaries(out_dir) == leftovers

    # Exactly one `done` row per user; none for any other slot. Attempts count ledger marks, and the
    # killed tick's unflushed records never reached the ledger, so they show 1 like the rest.
    ledger_after = _ledger(store_url)
    assert set(ledger_after) == SLOT_USERS | BACKLOG_USERS
    for user, row in ledger_after.items():
        assert (row.status, row.slot, row.rows) == (LedgerStatus.DONE, user % SLOTS, 1), row
        assert row.bytes == output_path(out_dir, PERIOD, user).stat().st_size, row
        assert row.attempts in (1, 2), row
    retried = {user for user, row in ledger_after.items() if row.attempts == 2}
    assert len(retried) <= FLUSH_EVERY + BATCH_SIZE  # at most what was unflushed when the kill came
    assert retried == set(), f"records marked twice: {sorted(retried)}"
    for user, row in ledger_before.items():
        assert ledger_after[user].last_attempt_at == row.last_attempt_at, "a done record was run again"


# -- a crash inside atomic_write, between the temp file and the rename ---------------------------------


class SimulatedCrash(OSError):
    """What the patched step raises in place of the process dying there."""


@pytest.mark.parametrize("old", [None, '{"user": 42, "version": "old"}'], ids=["new-file", "existing-file"])
@pytest.mark.parametrize(
    ("step", "durable"),
    [("replace", True), ("replace", False), ("fsync", True)],
    ids=["before-rename-durable", "before-rename-fast", "at-fsync"],
)
def test_crash_inside_atomic_write_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, durable: bool, old: str | None
) -> None:
    target = output_path(tmp_path / "out", PERIOD, 42)
    if old is not None:
        atomic_write(target, old)
    new = json.dumps({"user": 42, "version": "new", "padding": "x" * 100_000})
    reached: list[Path] = []

    def crash(*arguments: Any) -> None:
        temporaries = [path for path in target.parent.iterdir() if path.name.endswith(".tmp")]
        assert len(temporaries) == 1, temporaries
        assert temporaries[0].read_text(encoding="utf-8") == new  # the crash comes after the whole write
        reached.append(temporaries[0])
        raise SimulatedCrash(f"simulated crash at os.{step}")

    monkeypatch.setattr(files.os, step, crash)
    with pytest.raises(SimulatedCrash):
        atomic_write(target, new, durable=durable)
    monkeypatch.undo()

    (temporary,) = reached
    assert temporary.parent == target.parent and temporary.name.startswith(f".{target.name}.")
    assert not temporary.exists(), "the temp file was left behind"
    if old is None:
        assert not target.exists()
        assert list(target.parent.iterdir()) == []
    else:
        assert target.read_text(encoding="utf-8") == old
        assert list(target.parent.iterdir()) == [target]
