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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IndexedTimes:
    can_start_by: float
    should_start_by: float


def _version_of(entry: tuple[float, float, int] | None) -> int | None:
    return None if entry is None else entry[2]


class DeadlineIndex:
    def __init__(self) -> None:
        # name -> (can_start_by, should_start_by, version): one dict and one
        # tuple per schedule (a million of them at start-up).
        self._entries: dict[str, tuple[float, float, int]] = {}
        self._waiting: list[tuple[float, int, str]] = []
        self._ready: list[tuple[float, float, str, int]] = []
        self._counter = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def times(self, name: str) -> IndexedTimes | None:
        entry = self._entries.get(name)
        return None if entry is None else IndexedTimes(entry[0], entry[1])

    def upsert(self, name: str, can_start_by: float, should_start_by: float) -> None:
        """Insert ``name`` or replace its start times."""
        self._counter += 1
        version = self._counter
        self._entries[name] = (can_start_by, should_start_by, version)
        heapq.heappush(self._waiting, (can_start_by, version, name))
        self._compact_if_bloated()

    def upsert_many(self, entries: Iterable[tuple[str, float, float]]) -> None:
        """:meth:`upsert` of each ``(name, can_start_by, should_start_by)``, in
        order, with one heapify at the end instead of a push per entry (the
        start-up load of a million schedules)."""
        known, waiting = self._entries, self._waiting
        counter = self._counter
        for name, can_start_by, should_start_by in entries:
            counter += 1
            known[name] = (can_start_by, should_start_by, counter)
            waiting.append((can_start_by, counter, name))
        self._counter = counter
        heapq.heapify(waiting)
        self._compact_if_bloated()

    def remove(self, name: str) -> bool:
        """Drop ``name`` (its heap items become stale and are skipped later)."""
        return self._entries.pop(name, None) is not None

    def promote(self, now: float) -> int:
        """Move every schedule whose ``can_start_by <= now`` to *ready*; returns how many."""
        moved = 0
        waiting, ready = self._waiting, self._ready
        while waiting and waiting[0][0] <= now:
            _, version, name = heapq.heappop(waiting)
            entry = self._entries.get(name)
            if entry is None or entry[2] != version:
                continue
            heapq.heappush(ready, (entry[1], entry[0], name, version))
            moved += 1
        return moved

    def _clean_ready_top(self) -> None:
        ready = self._ready
        while ready and _version_of(self._entries.get(ready[0][2])) != ready[0][3]:
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
                item = heapq.heappop(self._ready)
                if can_place(name):
                    self.remove(name)
                    return name
                skipped.append(item)
            return None
        finally:
            for item in skipped:
                heapq.heappush(self._ready, item)

    def ready_count(self, now: float) -> int:
        """Eligible schedules (O(size of ready), for metrics and tests)."""
        self.promote(now)
        entries = self._entries
        return sum(1 for item in self._ready if _version_of(entries.get(item[2])) == item[3])

    def next_wakeup(self) -> float | None:
        """The earliest ``can_start_by`` among schedules not yet eligible."""
        waiting = self._waiting
        while waiting and _version_of(self._entries.get(waiting[0][2])) != waiting[0][1]:
            heapq.heappop(waiting)
        return waiting[0][0] if waiting else None

    def _compact_if_bloated(self) -> None:
        # Lazy deletion leaves stale items behind; rebuild when they dominate.
        entries = self._entries
        if len(self._waiting) + len(self._ready) <= 4 * len(entries) + 1024:
            return
        self._waiting = [w for w in self._waiting if _version_of(entries.get(w[2])) == w[1]]
        self._ready = [r for r in self._ready if _version_of(entries.get(r[2])) == r[3]]
        heapq.heapify(self._waiting)
        heapq.heapify(self._ready)
