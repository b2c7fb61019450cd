"""The status page's snapshot, read again only once it is stale."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .snapshot import Snapshot


class SnapshotCache:
    """The last :class:`~.snapshot.Snapshot`, read again once it is stale: older
    than ``max_age`` seconds, or than four times its own read time (a large
    fleet's read takes seconds; the page then spends at most a fifth of its
    time reading). While one request reads a new snapshot the others get the
    current one at once; only the first read, and :meth:`refresh`, wait."""

    def __init__(self, read: Callable[[], Snapshot], max_age: float) -> None:
        self._read = read
        self.max_age = max_age
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self._at = 0.0
        self._took = 0.0

    def _stale(self) -> bool:
        return time.monotonic() - self._at > max(self.max_age, 4 * self._took)

    def _reread(self) -> Snapshot:
        started = time.monotonic()
        snap = self._read()
        self._snap, self._at, self._took = snap, time.monotonic(), time.monotonic() - started
        return snap

    def get(self) -> Snapshot:
        snap = self._snap
        if snap is None:
            return self.refresh()
        if self._stale() and self._lock.acquire(blocking=False):
            try:
                if self._stale():
                    return self._reread()
            finally:
                self._lock.release()
        return self._snap or snap

    def refresh(self) -> Snapshot:
        """Read a new snapshot now (after an action, so its page shows the change)."""
        with self._lock:
            return self._reread()
