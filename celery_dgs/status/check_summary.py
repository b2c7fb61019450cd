"""The pending deferred checks per task, read again only as often as their
reading's cost allows (the metrics and the status page)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..store.check_types import CheckSummary

logger = logging.getLogger("celery_dgs.status")


class CachedCheckSummary:
    """Pending deferred checks per task (``read``: the store's one grouped
    query, ``check_summary``), read again only once the last reading is older
    than ``ttl_s`` and than ``cost_factor`` times the seconds that reading
    took (on the ``monotonic`` clock): a small store is read every time, a
    million checks (a scan of them all) at most every few seconds. A failed
    read is logged and the last summary served again (``None`` before any)."""

    def __init__(
        self,
        read: Callable[[], CheckSummary],
        ttl_s: float = 0.0,
        *,
        cost_factor: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read, self.ttl_s, self.cost_factor = read, ttl_s, cost_factor
        self.monotonic = monotonic
        self._summary: CheckSummary | None = None
        self._fresh_until: float | None = None
        self._lock = threading.Lock()  # one reader; concurrent callers wait for it

    def get(self) -> CheckSummary | None:
        with self._lock:
            started = self.monotonic()
            if self._fresh_until is not None and started < self._fresh_until:
                return self._summary
            try:
                self._summary = self.read()
            except Exception:
                logger.exception("celery-dgs: reading the deferred-check summary failed")
            took = self.monotonic() - started
            self._fresh_until = started + max(self.ttl_s, self.cost_factor * took)
            return self._summary
