"""The status page's reads (the overview's snapshot, each table page), read
again only once they are stale, in the background: a request waits for a
re-read a tenth of a second at most (a small fleet's read is done by then)."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

logger = logging.getLogger("celery_dgs.web")

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

#: How long a request that finds its read stale waits for the new read.
QUICK_READ_S = 0.1


class SnapshotCache(Generic[T]):
    """The last result of ``read`` (a :class:`~.snapshot.Snapshot`, a table
    page, a fleet-wide figure), read again once it is stale: older than
    ``max_age`` seconds, and than ``cost_factor`` times its own read time (a
    read taking seconds then costs at most one ``cost_factor``-th of the
    time) unless that is more than ``longest`` seconds (``None``: no bound).
    A request that finds it stale starts the new read in a thread and waits
    for it up to ``wait_s``: it gets the new result if the read was that
    quick (so a page looked at after a while shows the present, not the
    state of the last look), else, like every request meanwhile, the
    current one; only the first read, and :meth:`refresh`, wait for it
    whole. A failed read is logged and the current result kept."""

    def __init__(
        self,
        read: Callable[[], T],
        max_age: float,
        cost_factor: float = 4.0,
        longest: float | None = None,
        wait_s: float = QUICK_READ_S,
    ) -> None:
        self._read = read
        self.max_age = max_age
        self.cost_factor = cost_factor
        self.longest = longest
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._snap: T | None = None
        self._at = 0.0
        self._took = 0.0

    def _stale(self) -> bool:
        kept = self.cost_factor * self._took
        if self.longest is not None:
            kept = min(kept, self.longest)
        return time.monotonic() - self._at > max(self.max_age, kept)

    def _reread(self) -> T:
        started = time.monotonic()
        snap = self._read()
        self._snap, self._at, self._took = snap, time.monotonic(), time.monotonic() - started
        return snap

    def get(self) -> T:
        snap = self._snap
        if snap is None:
            return self.refresh()
        if self._stale() and self._lock.acquire(blocking=False):
            reader = threading.Thread(target=self._reread_in_background, daemon=True)
            reader.name = "dgs-web-snapshot"
            reader.start()
            reader.join(self.wait_s)
        return self._snap or snap

    def _reread_in_background(self) -> None:
        """:meth:`_reread` if still stale; the lock (taken by :meth:`get`) released."""
        try:
            if self._stale():
                self._reread()
        except Exception:
            logger.exception("celery-dgs: reading the status page's state failed")
        finally:
            self._lock.release()

    def refresh(self) -> T:
        """Read a new snapshot now (after an action, so its page shows the change)."""
        with self._lock:
            return self._reread()


class KeyedCaches(Generic[K, T]):
    """A :class:`SnapshotCache` per key (a table page's filters), of ``read(key)``;
    the :data:`~KeyedCaches.size` most recently used are kept."""

    def __init__(self, read: Callable[[K], T], max_age: float, size: int = 64) -> None:
        self._read = read
        self.max_age = max_age
        self.size = size
        self._lock = threading.Lock()
        self._caches: OrderedDict[K, SnapshotCache[T]] = OrderedDict()

    def get(self, key: K) -> T:
        with self._lock:
            cache = self._caches.get(key)
            if cache is None:
                cache = self._caches[key] = SnapshotCache(lambda: self._read(key), self.max_age)
                while len(self._caches) > self.size:
                    self._caches.popitem(last=False)
            else:
                self._caches.move_to_end(key)
        return cache.get()

    def forget(self) -> None:
        """Drop every kept result (after an action: the next read shows its change)."""
        with self._lock:
            self._caches.clear()
