"""The status page's snapshot, read again only once it is stale, in the
background: no request waits for a re-read."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .snapshot import Snapshot

logger = logging.getLogger("celery_dgs.web")


class SnapshotCache:
    """The last :class:`~.snapshot.Snapshot`, read again once it is stale: older
    than ``max_age`` seconds, or than four times its own read time (a large
    fleet's read takes seconds; the page then spends at most a fifth of its
    time reading). A request that finds it stale starts the new read in a
    thread and, like every request meanwhile, gets the current one at once;
    only the first read, and :meth:`refresh`, wait. A failed read is logged
    and the current snapshot kept."""

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
            reader = threading.Thread(target=self._reread_in_background, daemon=True)
            reader.name = "dgs-web-snapshot"
            reader.start()
        return self._snap or snap

    def _reread_in_background(self) -> None:
        """:meth:`_reread` if still stale; the lock (taken by :meth:`get`) released."""
        try:
            if self._stale():
                self._reread()
        except Exception:
            logger.exception("celery-dgs: reading the status page's snapshot failed")
        finally:
            self._lock.release()

    def refresh(self) -> Snapshot:
        """Read a new snapshot now (after an action, so its page shows the change)."""
        with self._lock:
            return self._reread()
