"""The client's address and scheme behind a reverse proxy.

``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed only from a
peer listed in ``dgs_web_trusted_proxies``; from anyone else they are
ignored, so no local user can put another address in the audit log or
escape the sign-in backoff by sending them. Of ``X-Forwarded-For`` the page
takes the right-most address that is not itself a trusted proxy: the last
hop a trusted proxy saw.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(proxies: Iterable[str]) -> tuple[Network, ...]:
    """The networks of ``proxies`` (addresses, or networks such as ``10.0.0.0/8``);
    a ``ValueError`` naming a value that is neither."""
    return tuple(ipaddress.ip_network(p.strip(), strict=False) for p in proxies)


class TrustedProxies:
    """ASGI middleware: from a trusted proxy, the client address and scheme
    it forwards replace the connection's."""

    def __init__(self, app: Any, proxies: Iterable[str]) -> None:
        self.app = app
        self.networks = networks(proxies)

    def trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.strip().removeprefix("[").removesuffix("]"))
        except ValueError:
            return False
        return any(ip in net for net in self.networks)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        client = scope.get("client")
        if scope["type"] == "http" and client and self.trusted(client[0]):
            scope = dict(scope)
            forwarded_for: list[str] = []
            for key, value in scope.get("headers") or []:
                if key == b"x-forwarded-for":
                    forwarded_for += bytes(value).decode("latin-1").split(",")
                elif key == b"x-forwarded-proto":
                    proto = bytes(value).decode("latin-1").strip().lower()
                    if proto in ("http", "https"):
                        scope["scheme"] = proto
            hops = [h.strip() for h in forwarded_for if h.strip()]
            while hops and self.trusted(hops[-1]):
                hops.pop()
            if hops:
                scope["client"] = (hops[-1][:64], 0)
        await self.app(scope, receive, send)
