"""The one exception tree of vardiya.

Every error vardiya raises on purpose is a ``VardiyaError``; the CLI prints its message as one line and
exits with code 2. Messages say what is wrong and how to fix it.

    VardiyaError
    ├── ConfigurationError          bad settings, options or declarations (fix the configuration)
    │   ├── InvalidDatabaseURL      a --db / VARDIYA_DB value vardiya cannot use
    │   ├── InvalidInput            a value, file or payload that does not fit (fix the input)
    │   │   └── InvalidRecord       one record of several given together (its index says which)
    │   ├── AppNotFound             --app / VARDIYA_APP does not import or lacks the attribute
    │   └── UndeclaredRead          a pipeline task read a partition its declared graph does not explain
    ├── StoreError                  the state store cannot do what was asked (driver errors wrapped here)
    │   ├── StoreUnavailable        the database cannot be reached or opened
    │   ├── NotAStore               the file or database is not something vardiya can use
    │   ├── StoreNotFound           no vardiya store there yet (a read refuses to create one)
    │   ├── SchemaTooNew            the store was migrated by a newer vardiya
    │   └── SchemaOutdated          the store needs ``vardiya db upgrade``
    ├── LeaseLost                   a worker acted on a work item it no longer holds
    └── CallError                   an async call waited on (``Handle.result``) did not give a result
        ├── CallDeadLettered        its last attempt failed: it is a dead letter (``vardiya dlq show``)
        ├── CallTimedOut            it had not finished when the wait's timeout passed (also a TimeoutError)
        └── ResultTooLarge          it succeeded, but its result was over the size the store keeps

Driver exceptions (sqlite3, psycopg, SQLAlchemy) never leave the store: they are wrapped in a
``StoreError`` subclass with the original chained as ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "AppNotFound",
    "CallDeadLettered",
    "CallError",
    "CallTimedOut",
    "ConfigurationError",
    "InvalidDatabaseURL",
    "InvalidInput",
    "InvalidRecord",
    "LeaseLost",
    "NotAStore",
    "ResultTooLarge",
    "SchemaOutdated",
    "SchemaTooNew",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "UndeclaredRead",
    "VardiyaError",
]


class VardiyaError(Exception):
    """Base of every error vardiya raises on purpose."""


class ConfigurationError(VardiyaError):
    """Settings, options or declarations that cannot work as given."""


class InvalidDatabaseURL(ConfigurationError):
    """A database URL with an unknown scheme or an unusable form."""


class InvalidInput(ConfigurationError):
    """A value, file or payload that does not fit what vardiya expects."""


class InvalidRecord(InvalidInput):
    """One record of a submit or append (of many, or of one) is bad input; nothing was stored.

    ``index`` is its position (0-based) among the records given, so a caller that read them from a
    file can name the line; ``reason`` is the message without the record's position.
    """

    def __init__(self, message: str, *, index: int, reason: str) -> None:
        super().__init__(message)
        self.index = index
        self.reason = reason


class AppNotFound(ConfigurationError):
    """The app named by --app / VARDIYA_APP cannot be imported or lacks the attribute."""


class UndeclaredRead(ConfigurationError):
    """A pipeline task read an upstream (stage, partition) that its stage's ``depends_on`` does not declare.

    Raised in strict mode (the task fails with it); otherwise the read is recorded and warned about.
    The message names the task, what it read and the dependency to add.
    """


class StoreError(VardiyaError):
    """The state store failed; the driver's exception is chained as ``__cause__``."""


class StoreUnavailable(StoreError):
    """The database server cannot be reached, or the database file cannot be opened."""


class NotAStore(StoreError):
    """The file or database exists but is not something vardiya can use as its store."""


class StoreNotFound(StoreError):
    """There is no vardiya store at the URL: no such SQLite file, or a database without vardiya's schema.

    Raised by ``open_store(..., create=False)`` (every read command) before anything is written.
    """


class SchemaTooNew(StoreError):
    """The store was migrated by a newer vardiya than this one; upgrade vardiya."""


class SchemaOutdated(StoreError):
    """The store's schema is older than this vardiya; run ``vardiya db upgrade``."""


class LeaseLost(VardiyaError):
    """A worker tried to complete, fail or heartbeat a work item whose lease it no longer holds.

    This happens when the lease expired (the worker was too slow or paused) and the item was reaped or
    claimed by another worker. The worker must drop the item: its result is not recorded.
    """


class CallError(VardiyaError):
    """An async call that a caller waited on (``Handle.result``, ``Invoker.wait``) gave no result.

    ``item_id`` is the call's handle id (its work item), ``handler`` the handler's name.
    """

    def __init__(self, message: str, *, item_id: int, handler: str) -> None:
        super().__init__(message)
        self.item_id = item_id
        self.handler = handler


class CallDeadLettered(CallError):
    """The call's last attempt failed, so it is a dead letter; ``error`` is the last error line.

    The traceback and every attempt are kept with the dead letter: ``vardiya dlq show ID``.
    """

    def __init__(self, message: str, *, item_id: int, handler: str, error: str | None, attempts: int) -> None:
        super().__init__(message, item_id=item_id, handler=handler)
        self.error = error
        self.attempts = attempts


class CallTimedOut(CallError, TimeoutError):
    """The call had not finished when the wait's timeout passed; it is still stored and may finish later.

    A ``TimeoutError`` too, so code written for ``concurrent.futures`` or Celery's ``get`` catches it.
    """


class ResultTooLarge(CallError):
    """The call succeeded, but its handler returned more JSON than the store keeps (``RESULT_MAX_BYTES``).

    The handler's work is done and is not retried; only its return value was dropped.
    """
