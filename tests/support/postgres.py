"""PostgreSQL helpers for tests that need a database of their own, not the session's shared one."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

POSTGRES_ENV = "VARDIYA_TEST_POSTGRES"


def _admin_url() -> sa.URL:
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.fail(f"{POSTGRES_ENV} is not set; this test needs a PostgreSQL server", pytrace=False)
    return sa.make_url(server).set(drivername="postgresql+psycopg")


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty PostgreSQL database with a random name, as a ``postgresql://`` URL; dropped after."""
    admin_url = _admin_url()
    name = f"vardiya_empty_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield admin_url.set(drivername="postgresql", database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


def table_names(url: str) -> set[str]:
    """The tables in the public schema of the database at ``url``."""
    engine = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"))
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
