"""A per-client backoff on wrong sign-in tokens.

After a client's ``n``-th wrong token in a row, its sign-ins are refused
(429, the token not even compared) for ``min(FIRST_WAIT_S * 2 ** (n - 1),
MAX_WAIT_S)`` seconds: 1 s, 2 s, 4 s, ... up to a minute, so a guesser gets
about one try a minute. A right token clears the client's count; so does
:data:`FORGET_AFTER_S` without a wrong one. A client is an IP address (the
forwarded one behind a trusted proxy).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The wait after a first wrong token, doubled with each further one, at most
#: MAX_WAIT_S.
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 60.0
#: A client's count of wrong tokens is forgotten this long after its last one.
FORGET_AFTER_S = 900.0
#: The most clients remembered at once; beyond it the oldest is forgotten.
MAX_CLIENTS = 10_000


@dataclass
class _Record:
    failures: int
    last_failure: float
    until: float


class LoginThrottle:
    """Wrong-token counts per client, on ``clock``'s seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: dict[str, _Record] = {}

    def wait(self, client: str) -> float:
        """Seconds before ``client`` may try a token again (0: now)."""
        now = self._clock()
        with self._lock:
            record = self._clients.get(client)
            if record is None:
                return 0.0
            if now - record.last_failure >= FORGET_AFTER_S:
                del self._clients[client]
                return 0.0
            return max(0.0, record.until - now)

    def failed(self, client: str) -> float:
        """Count a wrong token of ``client``; the seconds it must now wait."""
        now = self._clock()
        with self._lock:
            record = self._clients.pop(client, None)
            if record is None or now - record.last_failure >= FORGET_AFTER_S:
                record = _Record(0, now, now)
            record.failures += 1
            wait = min(FIRST_WAIT_S * 2.0 ** min(record.failures - 1, 32), MAX_WAIT_S)
            record.last_failure, record.until = now, now + wait
            while len(self._clients) >= MAX_CLIENTS:
                del self._clients[next(iter(self._clients))]
            self._clients[client] = record
            return wait

    def succeeded(self, client: str) -> None:
        """A right token from ``client``: its count starts again."""
        with self._lock:
            self._clients.pop(client, None)
