"""Overload policies: what the greedy order does when demand exceeds capacity (pure).

Plain deadline order (``greedy``) always serves the eligible schedule with the
lowest ``should_start_by``. Under overload that is a schedule that is already
late: started now it ends after its deadline anyway, and the slot it takes
makes the next schedule late too, so one late job cascades into many.

``shed`` serves schedules that can still finish on time and are due soon
first (``now <= should_start_by <= now + horizon``), in deadline order;
schedules that are already late come next, oldest deadline first; early runs
of on-time schedules (``should_start_by`` further ahead) last. Under
overload the set that stays on time stays on time and the rest is shed
instead of every schedule going late in turn; at normal load, when nothing
is late, the order is plain deadline order. The horizon matters: without it
(infinite), early runs of on-time schedules take every slot and late ones
starve even at load 0.9 (measured, ``docs/simulator.md``).

Operator run requests (``should_start_by`` pushed :data:`RUN_REQUEST_PRIORITY_S`
below ``can_start_by``) are never demoted.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from .index import DeadlineIndex

#: Operator-requested runs (``celery dgs run``) go ahead of all scheduled work:
#: beat indexes them with ``should_start_by = requested_at - RUN_REQUEST_PRIORITY_S``.
RUN_REQUEST_PRIORITY_S = 1e12

OVERLOAD_POLICIES = ("greedy", "shed")
#: ``shed``: an on-time schedule whose ``should_start_by`` is within this many
#: seconds goes before late ones; later ones (early runs) only after them.
DEFAULT_SHED_HORIZON_S = 600.0


class SheddingIndex(DeadlineIndex):
    """A :class:`DeadlineIndex` that serves on-time schedules before late ones.

    A schedule whose ``should_start_by`` has passed moves from *ready* to a
    third heap, *late* (same key); it stays late until it is removed or
    upserted, since ``should_start_by`` only changes then. O(log N) per move.
    """

    def __init__(self, horizon_s: float = DEFAULT_SHED_HORIZON_S) -> None:
        super().__init__()
        self._late: list[tuple[float, float, str, int]] = []
        self.horizon_s = horizon_s

    @staticmethod
    def _is_late(item: tuple[float, float, str, int], now: float) -> bool:
        should, can = item[0], item[1]
        return should < now and can - should < RUN_REQUEST_PRIORITY_S / 2

    def _top(self, now: float) -> list[tuple[float, float, str, int]] | None:
        """The heap whose top is the next choice (ready, else late), cleaned."""
        self.promote(now)
        ready, late, version = self._ready, self._late, self._version
        while ready:
            item = ready[0]
            if version.get(item[2]) != item[3]:
                heapq.heappop(ready)
            elif self._is_late(item, now):
                heapq.heappush(late, heapq.heappop(ready))
            else:
                break
        if ready and ready[0][0] <= now + self.horizon_s:
            return ready
        while late and version.get(late[0][2]) != late[0][3]:
            heapq.heappop(late)
        return late or ready or None

    def peek(self, now: float) -> str | None:
        heap = self._top(now)
        return heap[0][2] if heap else None

    def pop(self, now: float) -> str | None:
        heap = self._top(now)
        if not heap:
            return None
        name = heapq.heappop(heap)[2]
        self.remove(name)
        return name

    def pop_placeable(
        self, now: float, can_place: Callable[[str], bool], *, max_skips: int = 1000
    ) -> str | None:
        skipped: list[tuple[list[tuple[float, float, str, int]], tuple[float, float, str, int]]]
        skipped = []
        try:
            while len(skipped) <= max_skips:
                heap = self._top(now)
                if not heap:
                    return None
                item = heapq.heappop(heap)
                if can_place(item[2]):
                    self.remove(item[2])
                    return item[2]
                skipped.append((heap, item))
            return None
        finally:
            for heap, item in skipped:
                heapq.heappush(heap, item)

    def ready_count(self, now: float) -> int:
        self.promote(now)
        version = self._version
        return sum(1 for h in (self._ready, self._late) for i in h if version.get(i[2]) == i[3])

    def late_count(self, now: float) -> int:
        """Eligible schedules already past their ``should_start_by`` (being shed)."""
        self._top(now)
        version = self._version
        return sum(1 for i in self._late if version.get(i[2]) == i[3])

    def _compact_if_bloated(self) -> None:
        super()._compact_if_bloated()
        late = getattr(self, "_late", None)
        if late is not None and len(late) > 4 * len(self._times) + 1024:
            version = self._version
            self._late = [i for i in late if version.get(i[2]) == i[3]]
            heapq.heapify(self._late)


def make_index(policy: str, shed_horizon_s: float = DEFAULT_SHED_HORIZON_S) -> DeadlineIndex:
    """The index for an overload policy: ``greedy`` (plain deadline order) or ``shed``."""
    if policy == "greedy":
        return DeadlineIndex()
    if policy == "shed":
        return SheddingIndex(shed_horizon_s)
    raise ValueError(f"overload policy must be one of {OVERLOAD_POLICIES}, got {policy!r}")
