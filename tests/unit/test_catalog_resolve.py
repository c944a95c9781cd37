"""``catalog.resolve``: a typed name becomes one entry, or one line listing what the app has."""

from __future__ import annotations

from datetime import timedelta

import pytest

from vardiya.app import App
from vardiya.catalog import EntryKind, resolve
from vardiya.errors import InvalidInput


def _app() -> App:
    app = App("shop")

    @app.handler("nightly")
    def send(record: object, context: object) -> None:
        return None

    @app.every(timedelta(minutes=5), name="nightly")
    def beat() -> None:
        return None

    @app.every(timedelta(minutes=5))
    def rates() -> None:
        return None

    return app


def test_a_unique_name_resolves_and_a_shared_one_needs_its_kind() -> None:
    app = _app()
    assert resolve(app, "rates").kind is EntryKind.PERIODIC
    with pytest.raises(InvalidInput, match=r"more than one thing .*handler, periodic.*--kind"):
        resolve(app, "nightly")
    assert resolve(app, "nightly", EntryKind.HANDLER).kind is EntryKind.HANDLER
    assert resolve(app, "nightly", EntryKind.parse("periodic")).kind is EntryKind.PERIODIC


def test_unknown_names_and_kinds_say_what_there_is() -> None:
    app = _app()
    with pytest.raises(InvalidInput, match=r"nothing named 'ratez'.*rates \(periodic\)"):
        resolve(app, "ratez")
    with pytest.raises(InvalidInput, match=r"no slot job named 'rates'; it has: none"):
        resolve(app, "rates", EntryKind.SLOT_JOB)
    with pytest.raises(InvalidInput, match="is not one of: slot_job, handler"):
        EntryKind.parse("job")
    assert EntryKind.parse("Slot-Job") is EntryKind.SLOT_JOB
