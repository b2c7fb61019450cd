"""The pending deferred checks per task, read again only as often as their
reading's cost allows (the metrics and the status page)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..store.check_types import CheckSummary
from .cost_bounded import CostBoundedRead


class CachedCheckSummary(CostBoundedRead[CheckSummary]):
    """Pending deferred checks per task (``read``: the store's one grouped
    query, ``check_summary``), read again only once the last reading is older
    than ``ttl_s`` and than ``cost_factor`` times the seconds that reading
    took: a small store is read every time, a million checks (a scan of them
    all) at most every few seconds."""

    def __init__(
        self,
        read: Callable[[], CheckSummary],
        ttl_s: float = 0.0,
        *,
        cost_factor: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            read,
            ttl_s,
            cost_factor=cost_factor,
            what="the deferred-check summary",
            monotonic=monotonic,
        )
