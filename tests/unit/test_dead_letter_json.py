"""``DeadLetter.to_json`` names every field of the dead letter (it is written out field by field)."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

from vardiya.invoke.dlq import DeadLetter


def test_every_field_is_in_the_document_with_times_as_iso_text() -> None:
    moment = datetime(2026, 12, 1, 12, 30, tzinfo=UTC)
    letter = DeadLetter(
        id=7, handler="validate", model="stream", records=3, co_failed=2, attempts=4, error="ValueError: x",
        created_at=moment, dead_since=moment.replace(hour=13),
    )
    document = letter.to_json()
    assert list(document) == [field.name for field in fields(DeadLetter)]
    assert document == {
        "id": 7, "handler": "validate", "model": "stream", "records": 3, "co_failed": 2, "attempts": 4,
        "error": "ValueError: x", "created_at": "2026-12-01T12:30:00+00:00", "dead_since": "2026-12-01T13:30:00+00:00",
    }
