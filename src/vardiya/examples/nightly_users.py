"""The nightly-users example: 28,742 users in a SQLite table, refreshed once a day, one hour-slot each.

Every user gets slot ``id mod 24``; ticks fire at minute 1 and minute 31 of every slot (the second is
a compensation run that only sees users not done), and each user's nightly summary is written to
``out/yyyy/MM/dd/{id}.json`` atomically, at a path that depends only on (day, user), so a rerun
rewrites nothing. ``examples/nightly_users/app.py`` exposes this as ``app`` for ``--app``.

Failures are scripted so the example shows the machinery: about 1 % of the users fail on the :01 run
of their slot (a flaky profile service) and pass on the :31 run.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..app import App
from ..slots.hashing import stable_hash
from ..slots.job import RecordResult, TickContext
from ..slots.scheme import SlotScheme
from ..slots.sinks import atomic_write, output_path
from ..slots.sql_source import SqlTableSource

__all__ = ["JOB", "USERS", "build_app", "create_users_db", "is_flaky"]

USERS = 28_742
JOB = "nightly_users"
ZONE = "Europe/Istanbul"
PLANS = ("free", "team", "business")


def create_users_db(path: Path, *, users: int = USERS) -> Path:
    """Create (once) the users table with deterministic rows; returns ``path``."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.unlink(missing_ok=True)
    connection = sqlite3.connect(temporary)
    try:
        connection.execute(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, "
            "plan TEXT NOT NULL, signups INTEGER NOT NULL)"
        )
        connection.executemany(
            "INSERT INTO users VALUES (?, ?, ?, ?, ?)",
            (
                (n, f"user {n}", f"user{n}@example.com", PLANS[stable_hash(n) % 3], stable_hash(n) % 1000)
                for n in range(1, users + 1)
            ),
        )
        connection.commit()
    finally:
        connection.close()
    temporary.rename(path)
    return path


def is_flaky(user_id: int) -> bool:
    """The users whose profile lookup fails on the first run of their slot (about 1 %)."""
    return stable_hash(user_id) % 97 == 0


def build_app(users_db: Path, out_dir: Path, *, durable: bool = True, flaky: bool = True) -> App:
    """The example's App: one slot job over the users table, writing one JSON file per user and day."""
    create_users_db(users_db)
    source_url = f"sqlite:///{users_db}"
    engine = sa.create_engine(source_url)
    users = sa.Table("users", sa.MetaData(), autoload_with=engine)
    app = App("nightly_users")

    @app.slot_job(
        JOB,
        scheme=SlotScheme(slots=24, tz=ZONE),
        source=SqlTableSource(source_url, "users", id_column="id"),
        runs_per_slot=2,
        offsets=[timedelta(minutes=1), timedelta(minutes=31)],
        backfill_limit=2_000,
        catch_up=1,
        batch_size=200,
    )
    def refresh(user_ids: list[int], context: TickContext) -> Mapping[int, Any]:
        """Write each user's nightly summary for the tick's period; skip users already written."""
        with engine.connect() as connection:
            rows = connection.execute(sa.select(users).where(users.c.id.in_(user_ids))).mappings().all()
        outcomes: dict[int, Any] = {}
        for row in rows:
            user_id = row["id"]
            if flaky and is_flaky(user_id) and context.planned_at.minute == 1:
                outcomes[user_id] = TimeoutError(f"profile service timed out for user {user_id}")
                continue
            summary = {
                "user": user_id,
                "day": context.period.key,
                "plan": row["plan"],
                "signups": row["signups"],
                "slot": context.slot,
            }
            document = json.dumps(summary, sort_keys=True)
            path = output_path(out_dir, context.period.key, user_id)
            atomic_write(path, document, skip_existing=True, durable=durable)
            outcomes[user_id] = RecordResult(rows=1, bytes=len(document))
        return outcomes

    return app
