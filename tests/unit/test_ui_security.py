"""The dashboard's guard: who may change the store, which Host names are answered."""

from __future__ import annotations

import pytest

from vardiya.errors import InvalidInput
from vardiya.ui.security import (
    COOKIE,
    CSRF_HEADER,
    Access,
    Guard,
    host_name,
    is_loopback,
)

TOKEN = "a-token-of-enough-length"


def test_loopback_without_a_token_generates_one_and_another_host_refuses() -> None:
    guard = Guard.for_server(host="127.0.0.1", environment_token=None)
    assert guard.generated and len(guard.token) >= 16
    assert Guard.for_server(host="127.0.0.1", environment_token=None).token != guard.token
    with pytest.raises(InvalidInput, match="VARDIYA_UI_TOKEN"):
        Guard.for_server(host="0.0.0.0", environment_token=None)
    with pytest.raises(InvalidInput, match="at least 16"):
        Guard.for_server(host="0.0.0.0", environment_token="short")
    chosen = Guard.for_server(host="0.0.0.0", environment_token=TOKEN, allowed_hosts=["Dash.Example.org"])
    assert not chosen.generated and chosen.token == TOKEN
    assert chosen.host_allowed("dash.example.org:8765") and not chosen.host_allowed("0.0.0.0")


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("10.0.0.5", False), ("example.org", False), ("::", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(("header", "name"), [
    ("127.0.0.1:8765", "127.0.0.1"), ("[::1]:8765", "::1"), ("LocalHost", "localhost"), ("::1", "::1"),
    ("evil.example:80", "evil.example"),
])
def test_host_name(header: str, name: str) -> None:
    assert host_name(header) == name


def test_the_host_check_refuses_a_rebound_name_and_a_missing_header() -> None:
    guard = Guard.for_server(host="127.0.0.1", environment_token=TOKEN)
    assert guard.host_allowed("localhost:8765") and guard.host_allowed("[::1]:1")
    assert not guard.host_allowed("evil.example:8765")
    assert not guard.host_allowed(None)
    assert guard.origin_allowed(None) and guard.origin_allowed("http://127.0.0.1:8765")
    assert not guard.origin_allowed("https://evil.example") and not guard.origin_allowed("null")


def test_access_bearer_cookie_and_csrf() -> None:
    guard = Guard.for_server(host="127.0.0.1", environment_token=TOKEN)
    assert guard.csrf != TOKEN and TOKEN not in guard.csrf
    assert guard.access(headers={}, cookies={}) is Access.MISSING
    assert guard.access(headers={"authorization": f"Bearer {TOKEN}"}, cookies={}) is Access.ALLOWED
    assert guard.access(headers={"authorization": "Bearer nope"}, cookies={}) is Access.WRONG
    assert guard.access(headers={"authorization": f"Basic {TOKEN}"}, cookies={}) is Access.WRONG
    assert guard.access(headers={}, cookies={COOKIE: "nope"}) is Access.WRONG
    assert guard.access(headers={}, cookies={COOKIE: TOKEN}) is Access.NO_CSRF
    assert guard.access(headers={}, cookies={COOKIE: TOKEN}, csrf_field="wrong") is Access.NO_CSRF
    assert guard.access(headers={}, cookies={COOKIE: TOKEN}, csrf_field=guard.csrf) is Access.ALLOWED
    assert guard.access(headers={CSRF_HEADER: guard.csrf}, cookies={COOKIE: TOKEN}) is Access.ALLOWED
