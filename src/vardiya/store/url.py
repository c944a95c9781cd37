"""Reading a ``--db`` / ``VARDIYA_DB`` value into something the engine can open.

Pure: nothing here touches a file or a network.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL

from ..errors import InvalidDatabaseURL

__all__ = ["DEFAULT_URL", "Backend", "StoreURL", "parse_store_url", "resolve_store_url"]

DEFAULT_URL = "sqlite:///vardiya.db"

_EXAMPLES = "use sqlite:///path/to/vardiya.db or postgresql://user@host:5432/dbname"


class Backend(str, enum.Enum):
    """The database behind a store."""

    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


@dataclass(frozen=True, kw_only=True)
class StoreURL:
    """A validated store location."""

    backend: Backend
    url: URL
    given: URL
    path: Path | None = None

    @property
    def display(self) -> str:
        """The URL as the user wrote it, with any password hidden, for messages."""
        return self.given.render_as_string(hide_password=True)


def resolve_store_url(given: str | None) -> str:
    """The URL to use: the given one, else ``VARDIYA_DB``, else ``sqlite:///vardiya.db`` here.

    Only an absent value falls back: an empty ``--db ""`` or ``VARDIYA_DB=""`` is refused (it is a
    typo or an unset shell variable, and falling back would open, or create, ./vardiya.db).
    """
    if given is not None:
        if not given.strip():
            raise InvalidDatabaseURL(f"the database URL given is empty; {_EXAMPLES}")
        return given
    from_environment = os.environ.get("VARDIYA_DB")
    if from_environment is not None:
        if not from_environment.strip():
            raise InvalidDatabaseURL(f"VARDIYA_DB is set but empty; unset it or {_EXAMPLES}")
        return from_environment
    return DEFAULT_URL


def _hidden(text: str) -> str:
    """``text`` with the password of a ``scheme://user:password@host`` URL replaced, for messages that
    quote a URL SQLAlchemy could not read (and so cannot render with the password hidden)."""
    scheme, separator, rest = text.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not separator or not at or ":" not in credentials:
        return text
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"


def parse_store_url(text: str) -> StoreURL:
    """Validate a store URL and map it to the driver vardiya uses for its backend."""
    text = text.strip()
    if not text:
        raise InvalidDatabaseURL(f"the database URL is empty; {_EXAMPLES}")
    if "://" not in text:
        raise InvalidDatabaseURL(f"database URL {text!r} has no scheme; {_EXAMPLES}")
    try:
        url = sa.make_url(text)
    except sa.exc.ArgumentError as error:
        raise InvalidDatabaseURL(f"cannot read database URL {_hidden(text)!r} ({error}); {_EXAMPLES}") from None
    except ValueError:  # SQLAlchemy reads the port with int(): "host:notaport" or "host:" lands here
        raise InvalidDatabaseURL(
            f"the port in database URL {_hidden(text)!r} is not a number; {_EXAMPLES}"
        ) from None
    if url.port is not None and not 0 < url.port < 65536:
        raise InvalidDatabaseURL(
            f"the port {url.port} in database URL {url.render_as_string(hide_password=True)!r} is not "
            f"between 1 and 65535; {_EXAMPLES}"
        )
    scheme, _, driver = url.drivername.partition("+")
    if scheme == "sqlite":
        if driver not in ("", "pysqlite"):
            raise InvalidDatabaseURL(f"SQLite driver {driver!r} is not supported; {_EXAMPLES}")
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise InvalidDatabaseURL(
                f"{text!r} is not a SQLite file; an in-memory database cannot be shared between "
                "connections or processes; give a file such as sqlite:///vardiya.db"
            )
        return StoreURL(
            backend=Backend.SQLITE,
            url=url.set(drivername="sqlite+pysqlite"),
            given=url,
            path=Path(database),
        )
    if scheme in ("postgresql", "postgres"):
        if driver not in ("", "psycopg"):
            raise InvalidDatabaseURL(
                f"PostgreSQL driver {driver!r} is not supported; vardiya uses psycopg 3: "
                "write postgresql://… or postgresql+psycopg://…"
            )
        if not url.database:
            raise InvalidDatabaseURL(f"{url.render_as_string(hide_password=True)!r} names no database; {_EXAMPLES}")
        return StoreURL(backend=Backend.POSTGRESQL, url=url.set(drivername="postgresql+psycopg"), given=url)
    raise InvalidDatabaseURL(f"unknown database URL scheme {url.drivername!r} in --db / VARDIYA_DB; {_EXAMPLES}")
