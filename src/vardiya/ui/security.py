"""Who may change the store through the dashboard, and which requests it answers at all.

The dashboard can redrive and purge dead letters (and rerun pipelines), so it is guarded like a
Jupyter server rather than like a read-only status page:

- **a token**: every mutation needs the operator's token (``VARDIYA_UI_TOKEN``, or one generated and
  printed at start). A script sends it as ``Authorization: Bearer TOKEN``; a browser gets it once from
  the start URL (``/?token=TOKEN``), which sets an HttpOnly, SameSite=Strict cookie. No token: 401;
  a wrong one: 403.
- **CSRF**: a request authenticated by the cookie alone (a browser's) must also carry the CSRF token
  that the page's forms hold (field ``csrf`` or header ``X-CSRF-Token``); another site's page cannot
  read it, so it cannot forge the form. It is an HMAC of the token, so showing it reveals nothing.
- **the Host header**: only the names the server was started for are answered (loopback names, the
  bound host, ``--allowed-host``), which defeats DNS rebinding (a hostile name pointed at 127.0.0.1).
  A POST whose ``Origin`` names another host is refused too.
- **binding**: loopback by default; another ``--host`` refuses to start without ``VARDIYA_UI_TOKEN``.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..errors import InvalidInput

__all__ = [
    "COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "Access",
    "Guard",
    "host_name",
    "is_loopback",
]

#: The cookie that holds the token in a browser.
COOKIE = "vardiya_ui_token"
#: The form field and the header that carry the CSRF token.
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: Names that always mean this machine.
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: The shortest token accepted from VARDIYA_UI_TOKEN: a guessable token is no guard.
TOKEN_MIN_LENGTH = 16


class Access(enum.Enum):
    """What a request may do, as ``Guard.access`` decides it."""

    #: a valid token (bearer, or cookie with the CSRF token): it may change the store
    ALLOWED = "allowed"
    #: no token at all (401)
    MISSING = "missing"
    #: a token that is not this server's (403)
    WRONG = "wrong"
    #: the cookie's token is right but the CSRF token is missing or wrong (403)
    NO_CSRF = "no_csrf"


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name part of a Host header (``[::1]:8765`` -> ``::1``, ``Example.org:80`` -> ``example.org``)."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _check_token(token: str) -> str:
    if len(token) < TOKEN_MIN_LENGTH or any(character.isspace() for character in token):
        raise InvalidInput(
            f"VARDIYA_UI_TOKEN must be at least {TOKEN_MIN_LENGTH} characters without spaces; "
            "make one with: python -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
    return token


@dataclass(frozen=True, kw_only=True)
class Guard:
    """The token, the CSRF token derived from it and the Host names answered, for one server."""

    token: str
    generated: bool
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def for_server(
        cls, *, host: str, environment_token: str | None, allowed_hosts: Iterable[str] = ()
    ) -> Guard:
        """The guard of a server bound to ``host``; refuses (``InvalidInput``) a non-loopback host without
        a token of the operator's choosing, since a generated one printed on a shared machine's terminal
        would be the only lock on a port open to the network."""
        if environment_token:
            token, generated = _check_token(environment_token), False
        elif is_loopback(host):
            token, generated = secrets.token_urlsafe(24), True
        else:
            raise InvalidInput(
                f"--host {host} is reachable from other machines: set VARDIYA_UI_TOKEN to a secret of at "
                "least 16 characters first (mutations need it), or keep the default --host 127.0.0.1"
            )
        names = {*_LOOPBACK_NAMES, *(host_name(name) for name in allowed_hosts)}
        if not _is_wildcard(host):
            names.add(host.strip("[]").lower())
        return cls(token=token, generated=generated, allowed_hosts=frozenset(names))

    @property
    def csrf(self) -> str:
        """The CSRF token the forms carry: an HMAC of the token (so it cannot be turned back into it)."""
        return hmac.new(self.token.encode(), b"vardiya-ui-csrf", hashlib.sha256).hexdigest()

    def host_allowed(self, header: str | None) -> bool:
        """Whether a request's Host header names this server (DNS rebinding sends another name)."""
        return header is not None and host_name(header) in self.allowed_hosts

    def origin_allowed(self, origin: str | None) -> bool:
        """Whether a request's Origin (when the browser sent one) is this server."""
        if origin is None:
            return True
        parts = urlsplit(origin)
        return parts.hostname is not None and parts.hostname.lower() in self.allowed_hosts

    def matches(self, given: str | None) -> bool:
        """Whether ``given`` is the token (constant time)."""
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def access(
        self, *, headers: Mapping[str, str], cookies: Mapping[str, str], csrf_field: str | None = None
    ) -> Access:
        """Whether a request may change the store: a bearer token, or the cookie plus the CSRF token."""
        authorization = headers.get("authorization")
        if authorization is not None:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                return Access.WRONG
            return Access.ALLOWED if self.matches(value.strip()) else Access.WRONG
        cookie = cookies.get(COOKIE)
        if cookie is None:
            return Access.MISSING
        if not self.matches(cookie):
            return Access.WRONG
        given = csrf_field if csrf_field is not None else headers.get(CSRF_HEADER)
        if given is None or not hmac.compare_digest(given.encode(), self.csrf.encode()):
            return Access.NO_CSRF
        return Access.ALLOWED


def _is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("0.0.0.0", "::", "")
