"""The checks of what an enqueue or a claim is given: payloads that serialise, attempts, leases.

Bad input is refused before anything is written (``InvalidInput``, one line saying what would work).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from ..clock import to_seconds
from ..errors import InvalidInput
from ..limits import check_key, check_kind
from .types import json_text

__all__ = ["check_max_attempts", "check_payload", "checked_payloads", "lease_seconds"]


def check_payload(kind: str, key: str, payload: Any) -> str:
    """The payload's JSON text (what the store keeps); a payload that has none, or holds a NUL, is bad
    input. The key is checked too (``limits.check_key``): both go in the same row."""
    check_key(key, f"the key of a {kind} item")
    return json_text(payload, f"payload of {kind} item {key!r}")


def checked_payloads(kind: str, items: Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
    """(key, payload JSON text) of every item, each key once: a key given twice keeps its first
    payload, as two separate enqueues would."""
    check_kind(kind)
    texts: dict[str, str] = {}
    for key, payload in items:
        if key not in texts:
            texts[key] = check_payload(kind, key, payload)
    return list(texts.items())


def check_max_attempts(max_attempts: int) -> None:
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidInput(f"max_attempts must be a whole number of at least 1, got {max_attempts!r}")


def lease_seconds(lease: float | timedelta) -> float:
    seconds = to_seconds(lease)
    if seconds <= 0:
        raise InvalidInput(f"a lease must be longer than 0 s, got {seconds} s")
    return seconds
