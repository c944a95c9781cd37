"""A ``DataArrival`` sensor's query on the user's database: which partitions have rows yet.

The sensor's SQL is the user's (``DataArrival.sql``, with a ``:partition`` parameter); its database is
the user's too, never the state store. One engine per sensor, made on the first check and kept (with
``pool_pre_ping``, so a database restarted between checks is reconnected) until ``close``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

__all__ = ["ArrivalQuery"]


class ArrivalQuery:
    """The query ``sql`` on the database at ``url``: a partition is present when its first value is true."""

    def __init__(self, url: str, sql: str) -> None:
        self.url = url
        self.sql = sql
        self._engine: sa.Engine | None = None

    def present(self, keys: Iterable[str]) -> set[str]:
        """The partitions among ``keys`` whose query returns a row with a true first value."""
        if self._engine is None:
            self._engine = sa.create_engine(self.url, pool_pre_ping=True)
        query = sa.text(self.sql)
        present = set()
        with self._engine.connect() as connection:
            for key in keys:
                row: Any = connection.execute(query, {"partition": key}).first()
                if row is not None and row[0]:
                    present.add(key)
        return present

    def close(self) -> None:
        """Release the engine's connections (a later ``present`` opens it again)."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
