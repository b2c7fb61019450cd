"""Which ``Host`` the status page answers to (DNS rebinding).

A web site can point a name of its own at 127.0.0.1 (or at the page's
address on a network): the operator's browser then sends the page's answers
to that site's scripts as if they were its own. The browser still sends the
site's name as ``Host``, so the page answers only to names that are its
own: loopback addresses and ``localhost`` (a name no foreign site can own),
and the names listed in ``dgs_web_allowed_hosts``. Any other ``Host`` gets
421 and nothing else.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from typing import Any

from starlette.responses import PlainTextResponse

log = logging.getLogger("celery_dgs.web")

#: Characters that never appear in a ``Host`` a browser sends (a user part,
#: a path, a space): such a header is refused as a whole.
_NOT_IN_HOST = frozenset("@/\\?# \t")


def is_loopback_name(name: str) -> bool:
    """Whether ``name`` is ``localhost`` or a loopback address (127.0.0.0/8,
    ``::1``; brackets around an IPv6 address allowed). ``127.0.0.1.evil.example``
    is not: it is a name, resolved by whoever owns it."""
    name = name.strip().lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def host_name(header: str | None) -> str | None:
    """The name of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``),
    lower-cased; ``None`` when it is missing or malformed."""
    if not header or any(c in _NOT_IN_HOST for c in header):
        return None
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not _is_port(rest)):
            return None
        return name.lower() or None
    name, colon, port = header.rpartition(":")
    if not colon:
        name = header
    elif not _is_port(":" + port) or ":" in name:
        return None
    return name.lower() or None


def _is_port(text: str) -> bool:
    return text.startswith(":") and text[1:].isascii() and text[1:].isdigit() and len(text) <= 6


def normalized(names: Iterable[str]) -> frozenset[str]:
    """Allowed host names as :func:`host_name` gives them (lower case, no brackets)."""
    return frozenset(n.strip().lower().removeprefix("[").removesuffix("]") for n in names)


class HostPolicy:
    """The names the page answers to: loopback names, and ``allowed``."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.allowed = normalized(allowed)

    def allows(self, header: str | None) -> bool:
        name = host_name(header)
        return name is not None and (is_loopback_name(name) or name in self.allowed)


class HostCheck:
    """ASGI middleware: a request whose ``Host`` the :class:`HostPolicy` does
    not allow gets 421 (misdirected request), before anything else runs."""

    def __init__(self, app: Any, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            host = _header(scope, b"host")
            if not self.policy.allows(host):
                log.warning(
                    "status page: refused a request for host %r (not a loopback name, "
                    "not in dgs_web_allowed_hosts)",
                    (host or "")[:200],
                )
                response = PlainTextResponse(
                    "misdirected request: this page answers to loopback names and "
                    "the names in dgs_web_allowed_hosts only\n",
                    status_code=421,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _header(scope: Any, name: bytes) -> str | None:
    """The first header ``name`` of an ASGI scope, or ``None``."""
    for key, value in scope.get("headers") or []:
        if key == name:
            return bytes(value).decode("latin-1")
    return None
