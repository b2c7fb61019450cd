"""The index orders of the ``shed`` and ``restore`` overload policies (pure).

:class:`SheddingIndex` (``shed``) serves on-time schedules due soon before late
ones; :class:`RestoringIndex` (``restore`` without relative laxity) serves late
ones first, shortest expected run first with aging. Why, and how they compare:
:mod:`~celery_dgs.core.overload`, which picks the index for a policy
(:func:`~celery_dgs.core.overload.make_index`); :mod:`~celery_dgs.core.laxity`
builds ``restore``'s default order on :class:`RestoringIndex`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Protocol

from .index import DeadlineIndex, live_heap
from .spec import ScheduleSpec
from .stats import ScheduleStats
from .timing import expected_duration

#: Operator-requested runs (``celery dgs run``) go ahead of all scheduled work:
#: beat indexes them with ``should_start_by = requested_at - RUN_REQUEST_PRIORITY_S``.
RUN_REQUEST_PRIORITY_S = 1e12


def is_run_request(can_start_by: float, should_start_by: float) -> bool:
    """Whether index times are an operator's run request's (``should_start_by``
    pushed back by :data:`RUN_REQUEST_PRIORITY_S`), not a schedule's own."""
    return can_start_by - should_start_by >= RUN_REQUEST_PRIORITY_S / 2


class _Tracked(Protocol):
    @property
    def spec(self) -> ScheduleSpec: ...
    @property
    def stats(self) -> ScheduleStats: ...


def expected_seconds(tracked: _Tracked | None) -> float:
    """A schedule's expected run time in seconds (0 when unknown): ``restore``'s
    measure of a run's cost."""
    if tracked is None:
        return 0.0
    return expected_duration(tracked.spec, tracked.stats).total_seconds()


#: ``shed``: an on-time schedule whose ``should_start_by`` is within this many
#: seconds goes before late ones; later ones (early runs) only after them.
DEFAULT_SHED_HORIZON_S = 600.0
#: ``restore``: seconds of lateness one second of expected run time is worth
#: among late schedules (0: plain deadline order).
DEFAULT_RESTORE_AGING = 10.0


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
        return should < now and not is_run_request(can, should)

    def _late_entry(
        self, name: str, should: float, can: float, version: int
    ) -> tuple[float, float, str, int]:
        """The *late* heap's entry for a schedule found late (key: should_start_by)."""
        return (should, can, name, version)

    def _move_late_from_ready(self, now: float) -> None:
        """Drop stale items from the top of *ready*, and move the late ones to *late*."""
        ready, late, version = self._ready, self._late, self._version
        while ready:
            item = ready[0]
            if version.get(item[2]) != item[3]:
                heapq.heappop(ready)
            elif self._is_late(item, now):
                heapq.heappop(ready)
                heapq.heappush(late, self._late_entry(item[2], item[0], item[1], item[3]))
            else:
                break

    def _clean_late_top(self) -> None:
        late, version = self._late, self._version
        while late and version.get(late[0][2]) != late[0][3]:
            heapq.heappop(late)

    def _top(self, now: float) -> list[tuple[float, float, str, int]] | None:
        """The heap whose top is the next choice (ready, else late), cleaned."""
        self.promote(now)
        self._move_late_from_ready(now)
        ready = self._ready
        if ready and ready[0][0] <= now + self.horizon_s:
            return ready
        self._clean_late_top()
        return self._late or ready or None

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
                skipped.append((heap, item))  # put back if can_place raises
                if can_place(item[2]):
                    skipped.pop()
                    self.remove(item[2])
                    return item[2]
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
            self._late = live_heap(late, self._version, 2, 3)


class RestoringIndex(SheddingIndex):
    """A :class:`DeadlineIndex` that serves late schedules shortest run first, with aging.

    On-time schedules keep plain deadline order, after every late one (as in
    ``greedy``, where late ones have the lowest ``should_start_by``). A
    schedule found late moves to the *late* heap keyed by ``should_start_by +
    aging * expected_s(name)`` (its expected run time in seconds, read once
    then: its stats do not change while it is indexed). Every schedule whose
    ``should_start_by`` is after that key sorts behind it, so once ``now``
    passes the key it waits only for the late schedules with a lower key: the
    ones already waiting, and those that become eligible with a
    ``should_start_by`` already that old (held back by a retry backoff or a
    blackout), each of which then runs and moves its deadline a period on.
    Nothing starves.
    """

    def __init__(
        self, expected_s: Callable[[str], float], aging: float = DEFAULT_RESTORE_AGING
    ) -> None:
        super().__init__(0.0)
        self.expected_s = expected_s
        self.aging = aging

    @staticmethod
    def _is_late(item: tuple[float, float, str, int], now: float) -> bool:
        return item[0] < now  # run requests too: their key stays ~ -1e12, first

    def _late_entry(
        self, name: str, should: float, can: float, version: int
    ) -> tuple[float, float, str, int]:
        """Key ``should_start_by + aging * expected run time``."""
        return (should + self.aging * max(self.expected_s(name), 0.0), can, name, version)

    def _top(self, now: float) -> list[tuple[float, float, str, int]] | None:
        self.promote(now)
        self._move_late_from_ready(now)
        self._clean_late_top()
        return self._late or self._ready or None
