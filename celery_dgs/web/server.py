"""How uvicorn serves the page: bounded in time, size and connections.

* A request's headers and body must all arrive within
  :data:`REQUEST_TIMEOUT_S` of its first byte (of the connection's opening,
  for the first request); a client that sends them slowly (slowloris) is
  disconnected then. :class:`TimedH11Protocol` adds this to uvicorn's
  HTTP/1.1 protocol.
* An idle kept-alive connection is closed after :data:`KEEP_ALIVE_S`.
* Headers are at most :data:`MAX_HEADER_BYTES`; bodies are bounded by
  :class:`~.limits.BodyLimit`; at most :data:`MAX_CONNECTIONS` at once
  (beyond: 503).
* uvicorn's own reading of ``X-Forwarded-*`` (which trusts 127.0.0.1) is off:
  the page believes them only from ``dgs_web_trusted_proxies``
  (:mod:`.proxies`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("celery_dgs.web")

#: Seconds a request (headers and body) may take to arrive.
REQUEST_TIMEOUT_S = 10.0
#: Seconds an idle kept-alive connection stays open.
KEEP_ALIVE_S = 5
#: The most bytes of a request's line and headers.
MAX_HEADER_BYTES = 16 * 1024
#: The most connections at once.
MAX_CONNECTIONS = 200


class TimedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol that closes a connection whose request
    has not fully arrived ``request_timeout`` seconds after it began."""

    request_timeout = REQUEST_TIMEOUT_S
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            self._disarm()  # all of the request is here (or the connection is ending)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "unknown client"
            log.warning(
                "status page: closed the connection of %s: no complete request within %.0f s",
                client,
                self.request_timeout,
            )
            self.transport.close()


def server_config(app: Any, host: str, port: int, **options: Any) -> uvicorn.Config:
    """The uvicorn configuration of the page ``app`` on ``host:port``;
    ``options`` go to :class:`uvicorn.Config` as well."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=TimedH11Protocol,
        proxy_headers=False,
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        limit_concurrency=MAX_CONNECTIONS,
        **options,
    )
