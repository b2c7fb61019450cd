"""The in-memory index behind the greedy choice (seed 000, "Scheduling algorithm").

Two heaps with lazy deletion:

- *waiting*: schedules whose ``can_start_by`` is still ahead, ordered by it;
- *ready*: schedules whose ``can_start_by`` has passed, ordered by
  ``should_start_by`` (then ``can_start_by``, then name, so ties are stable).

``promote(now)`` moves what became eligible from waiting to ready; the greedy
choice is the top of *ready*. Upserting or removing a schedule is O(log N); a
decision is O(log N) amortised. Times are float seconds since the epoch (UTC):
at a million schedules, datetimes would cost several times the memory and
comparison time.

The index holds only schedules that may be dispatched: the caller removes a
schedule while it is running, dispatched-but-not-started or paused, and
upserts it again with fresh start times when that ends.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

_T = TypeVar("_T", bound=tuple[Any, ...])


@dataclass(frozen=True, slots=True)
class IndexedTimes:
    can_start_by: float
    should_start_by: float


def live_heap(
    items: Iterable[_T], versions: Mapping[str, int], name_at: int, version_at: int
) -> list[_T]:
    """The items of a lazily deleted heap whose version (at ``version_at``) is
    still their name's (at ``name_at``) in ``versions``, as a heap again: the
    compaction every index runs once stale items dominate."""
    live = [i for i in items if versions.get(i[name_at]) == i[version_at]]
    heapq.heapify(live)
    return live


class DeadlineIndex:
    def __init__(self) -> None:
        self._times: dict[str, IndexedTimes] = {}
        self._version: dict[str, int] = {}
        self._waiting: list[tuple[float, int, str]] = []
        self._ready: list[tuple[float, float, str, int]] = []
        self._counter = 0

    def __len__(self) -> int:
        return len(self._times)

    def __contains__(self, name: object) -> bool:
        return name in self._times

    def __iter__(self) -> Iterator[str]:
        return iter(self._times)

    def times(self, name: str) -> IndexedTimes | None:
        return self._times.get(name)

    def upsert(self, name: str, can_start_by: float, should_start_by: float) -> None:
        """Insert ``name`` or replace its start times."""
        self._counter += 1
        version = self._counter
        self._version[name] = version
        self._times[name] = IndexedTimes(can_start_by, should_start_by)
        heapq.heappush(self._waiting, (can_start_by, version, name))
        self._compact_if_bloated()

    def upsert_many(self, entries: Iterable[tuple[str, float, float]]) -> None:
        """:meth:`upsert` of each ``(name, can_start_by, should_start_by)``, in
        order, with one heapify at the end instead of a push per entry (the
        start-up load of a million schedules)."""
        times, version, waiting = self._times, self._version, self._waiting
        counter = self._counter
        for name, can_start_by, should_start_by in entries:
            counter += 1
            version[name] = counter
            times[name] = IndexedTimes(can_start_by, should_start_by)
            waiting.append((can_start_by, counter, name))
        self._counter = counter
        heapq.heapify(waiting)
        self._compact_if_bloated()

    def remove(self, name: str) -> bool:
        """Drop ``name`` (its heap items become stale and are skipped later)."""
        if name not in self._times:
            return False
        del self._times[name]
        del self._version[name]
        return True

    def promote(self, now: float) -> int:
        """Move every schedule whose ``can_start_by <= now`` to *ready*; returns how many."""
        moved = 0
        waiting, ready = self._waiting, self._ready
        while waiting and waiting[0][0] <= now:
            _, version, name = heapq.heappop(waiting)
            if self._version.get(name) != version:
                continue
            times = self._times[name]
            heapq.heappush(ready, (times.should_start_by, times.can_start_by, name, version))
            moved += 1
        return moved

    def _clean_ready_top(self) -> None:
        ready = self._ready
        while ready and self._version.get(ready[0][2]) != ready[0][3]:
            heapq.heappop(ready)

    def peek(self, now: float) -> str | None:
        """The eligible schedule with the lowest ``should_start_by``, left in place."""
        self.promote(now)
        self._clean_ready_top()
        return self._ready[0][2] if self._ready else None

    def pop(self, now: float) -> str | None:
        """Remove and return the eligible schedule with the lowest ``should_start_by``."""
        name = self.peek(now)
        if name is not None:
            heapq.heappop(self._ready)
            self.remove(name)
        return name

    def pop_placeable(
        self, now: float, can_place: Callable[[str], bool], *, max_skips: int = 1000
    ) -> str | None:
        """Like :meth:`pop`, skipping (but keeping) schedules that ``can_place`` refuses.

        Used when the free slots are on workers a schedule may not run on
        (``dont_run_on_nodes``, another pool). At most ``max_skips`` refused
        schedules are looked at, so one decision stays bounded.
        """
        skipped: list[tuple[float, float, str, int]] = []
        try:
            while len(skipped) <= max_skips:
                name = self.peek(now)
                if name is None:
                    return None
                skipped.append(heapq.heappop(self._ready))  # put back if can_place raises
                if can_place(name):
                    skipped.pop()
                    self.remove(name)
                    return name
            return None
        finally:
            for item in skipped:
                heapq.heappush(self._ready, item)

    def ready_count(self, now: float) -> int:
        """Eligible schedules (O(size of ready), for metrics and tests)."""
        self.promote(now)
        return sum(1 for item in self._ready if self._version.get(item[2]) == item[3])

    def next_wakeup(self) -> float | None:
        """The earliest ``can_start_by`` among schedules not yet eligible."""
        waiting = self._waiting
        while waiting and self._version.get(waiting[0][2]) != waiting[0][1]:
            heapq.heappop(waiting)
        return waiting[0][0] if waiting else None

    def _compact_if_bloated(self) -> None:
        # Lazy deletion leaves stale items behind; rebuild when they dominate.
        live = len(self._times)
        if len(self._waiting) + len(self._ready) <= 4 * live + 1024:
            return
        self._waiting = live_heap(self._waiting, self._version, 2, 1)
        self._ready = live_heap(self._ready, self._version, 2, 3)


class IndexOver(DeadlineIndex):
    """An index that orders the schedules another one, ``main``, holds: its
    size, membership, iteration and times are ``main``'s (the wrapping
    orders of :mod:`~celery_dgs.core.priority` and
    :mod:`~celery_dgs.core.revisit_groups`)."""

    def __init__(self, main: DeadlineIndex) -> None:
        super().__init__()
        self.main = main

    def __len__(self) -> int:
        return len(self.main)

    def __contains__(self, name: object) -> bool:
        return name in self.main

    def __iter__(self) -> Iterator[str]:
        return iter(self.main)

    def times(self, name: str) -> IndexedTimes | None:
        return self.main.times(name)
