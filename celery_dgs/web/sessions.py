"""The operator sessions the page holds: each ends ``lifetime`` seconds after
sign-in, or at sign-out, whatever its cookie says. They live in the
server's memory, so a restart of the page ends them all."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

#: The most sessions held at once; a new one beyond it ends the oldest.
MAX_SESSIONS = 1000


class Sessions:
    """Live session nonces and when each expires (``clock``'s seconds)."""

    def __init__(self, lifetime: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.lifetime = lifetime
        self._clock = clock
        self._lock = threading.Lock()
        #: nonce -> expiry, oldest first (dicts keep insertion order).
        self._expires: dict[str, float] = {}

    def start(self) -> str:
        """A new session's nonce."""
        nonce = secrets.token_hex(16)
        now = self._clock()
        with self._lock:
            for old in [n for n, at in self._expires.items() if at <= now]:
                del self._expires[old]
            while len(self._expires) >= MAX_SESSIONS:
                del self._expires[next(iter(self._expires))]
            self._expires[nonce] = now + self.lifetime
        return nonce

    def alive(self, nonce: str) -> bool:
        """Whether ``nonce`` is a session started here, not ended nor expired."""
        with self._lock:
            expires = self._expires.get(nonce)
            if expires is None:
                return False
            if expires <= self._clock():
                del self._expires[nonce]
                return False
            return True

    def end(self, nonce: str) -> None:
        """End a session (sign-out): its cookie is worth nothing from now on."""
        with self._lock:
            self._expires.pop(nonce, None)
