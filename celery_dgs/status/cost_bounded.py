"""A read kept and repeated only as often as its cost allows: a small store
is read every time, a scan of millions of rows at most every few seconds."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

logger = logging.getLogger("celery_dgs.status")

T = TypeVar("T")


class CostBoundedRead(Generic[T]):
    """The last result of ``read``, read again only once it is older than
    ``ttl_s`` and than ``cost_factor`` times the seconds that reading took
    (on the ``monotonic`` clock). A failed read is logged (naming ``what``)
    and the last result served again (``None`` before any). One reader at a
    time: concurrent callers wait for it."""

    def __init__(
        self,
        read: Callable[[], T],
        ttl_s: float = 0.0,
        *,
        cost_factor: float = 0.0,
        what: str = "a cached read",
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read, self.ttl_s, self.cost_factor = read, ttl_s, cost_factor
        self.what = what
        self.monotonic = monotonic
        self._value: T | None = None
        self._fresh_until: float | None = None
        self._lock = threading.Lock()

    def get(self) -> T | None:
        with self._lock:
            started = self.monotonic()
            if self._fresh_until is not None and started < self._fresh_until:
                return self._value
            try:
                self._value = self.read()
            except Exception:
                logger.exception("celery-dgs: reading %s failed", self.what)
            took = self.monotonic() - started
            self._fresh_until = started + max(self.ttl_s, self.cost_factor * took)
            return self._value
