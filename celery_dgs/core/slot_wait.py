"""Schedules waiting for a slot of their busy workers, out of the index (pure).

One ranking index holds every pool's schedules, and a dispatch plan looks at
most ``max_skips`` refused schedules deep
(:func:`~celery_dgs.core.placement.plan_dispatches`). When more eligible
schedules than that, ahead of the others, cannot be placed because every
live worker that may run them is busy (an overloaded pool), the plan would
never reach another pool's work while that pool's slots are free.
:func:`~celery_dgs.core.placement.choose_dispatches` then hands them to a
:class:`SlotWait`, which holds them out of the index by placement class
(:class:`~celery_dgs.core.placement.Constraints`), so the next plan looks
past them.

At the start of each round, every class one of whose workers has a slot
free gives back its most urgent waiting schedules, by ``should_start_by``
(then ``can_start_by``, then name): :data:`RELEASE_PER_SLOT` per free slot,
at least :data:`RELEASE_MIN`. They go back into the index at the times they
had, and the order chooses among them as before; those a round does not
take stay in the index (skipped as any other it cannot place, until a plan
looks past too many again). The rest of a class waits behind them, in
``should_start_by`` order, so a round costs a few re-insertions per free
slot, whatever the backlog; the overload policy's order (relative laxity,
restore) chooses among the released ones, not among the whole backlog.

Cost: O(log n) per schedule set aside or released; a schedule dropped while
waiting (its row changed, it was held or forgotten) leaves a stale heap entry,
skipped on release and compacted away once stale entries dominate.

**A bound with a window of schedules.** Beat with a window holds what is due,
not the fleet, but a busy pool's eligible backlog would all come to wait
here as the window reads on to find the other pools' work. :meth:`over`
takes the least urgent of a class past a bound out (beat lets go of them,
as of schedules past its window), once the class holds a quarter more than
the bound (so a round pays for it rarely: O(n log n) per trim of n, about
O(log n) per schedule set aside); :meth:`wants_refill` says when a trimmed
class has fewer than half the bound left, so that they are read again.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Iterable, Iterator

from .index import DeadlineIndex, live_heap
from .placement import Constraints

#: How many waiting schedules a class gives back per round, per free slot of
#: its workers, and at least.
RELEASE_PER_SLOT = 4
RELEASE_MIN = 64

#: The least bound :meth:`SlotWait.over` is given (a window's size, or this):
#: a class trimmed to it is read again every half of it dispatched, so a
#: small window does not read its busy backlog again every few runs.
WAIT_BOUND_MIN = 256


def wait_bound(window_size: int) -> int:
    """How many schedules of a class may wait for a slot with a window of
    ``window_size`` schedules."""
    return max(window_size, WAIT_BOUND_MIN)


#: A waiting schedule in its class heap: should_start_by, can_start_by, name, version.
_Entry = tuple[float, float, str, int]


class SlotWait:
    """The schedules set aside until a worker that may run them has a slot free."""

    def __init__(self, per_slot: int = RELEASE_PER_SLOT, least: int = RELEASE_MIN) -> None:
        self.per_slot, self.least = per_slot, least
        self._heaps: dict[Constraints, list[_Entry]] = {}
        #: name -> (its class, the version of its live heap entry).
        self._waiting: dict[str, tuple[Constraints, int]] = {}
        #: waiting schedules per class, and the classes :meth:`over` trimmed
        self._counts: dict[Constraints, int] = {}
        self._trimmed: set[Constraints] = set()
        #: per class, the count past which :meth:`over` looks again (it looked
        #: at fewer, and could let go of none or some)
        self._look_past: dict[Constraints, int] = {}
        self._counter = 0
        self._entries = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, name: object) -> bool:
        return name in self._waiting

    def __iter__(self) -> Iterator[str]:
        return iter(self._waiting)

    def wait(
        self, name: str, constraints: Constraints, can_start_by: float, should_start_by: float
    ) -> None:
        """Hold ``name`` (out of the index: the caller removed it) with the
        times it had there, until its class can be placed again."""
        self._counter += 1
        self._forget(name)
        self._waiting[name] = (constraints, self._counter)
        self._counts[constraints] = self._counts.get(constraints, 0) + 1
        heap = self._heaps.setdefault(constraints, [])
        heapq.heappush(heap, (should_start_by, can_start_by, name, self._counter))
        self._entries += 1
        self._compact_if_bloated()

    def take(
        self,
        index: DeadlineIndex,
        names: Iterable[str],
        constraints_of: Callable[[str], Constraints],
    ) -> list[str]:
        """:meth:`wait` for each of ``names`` still in ``index``, taken out of
        it with the times it had there; returns those taken."""
        taken = []
        for name in names:
            times = index.times(name)
            if times is None:
                continue
            index.remove(name)
            self.wait(name, constraints_of(name), times.can_start_by, times.should_start_by)
            taken.append(name)
        return taken

    def discard(self, name: str) -> bool:
        """Stop holding ``name`` (it is indexed, held or forgotten elsewhere)."""
        return self._forget(name)

    def _forget(self, name: str) -> bool:
        found = self._waiting.pop(name, None)
        if found is None:
            return False
        self._counts[found[0]] -= 1
        return True

    def over(self, bound: int, may_let_go: Callable[[str], bool]) -> list[str]:
        """Once a class holds more than ``bound`` and a quarter (at least
        :data:`RELEASE_MIN` more), take out its least urgent past ``bound``
        of those ``may_let_go`` allows; returns them (the class is marked
        for :meth:`wants_refill`)."""
        taken: list[str] = []
        slack = max(bound // 4, self.least)
        for constraints, heap in list(self._heaps.items()):
            count = self._counts.get(constraints, 0)
            if count <= max(bound + slack, self._look_past.get(constraints, 0)):
                continue
            live = sorted(e for e in heap if self._waiting.get(e[2], (None, 0))[1] == e[3])
            out = [e for e in live[bound:] if may_let_go(e[2])]
            # none (or not all) past the bound may go: look again a quarter later
            self._look_past[constraints] = len(live) - len(out) + slack
            if not out:
                continue
            gone = {e[2] for e in out}
            kept = [e for e in live if e[2] not in gone]  # sorted: a heap
            self._heaps[constraints] = kept
            self._entries -= len(heap) - len(kept)
            for name in gone:
                self._forget(name)
            taken += [e[2] for e in out]
            self._trimmed.add(constraints)
        return taken

    @property
    def trimmed(self) -> bool:
        """Whether a class :meth:`over` trimmed has not been refilled yet."""
        return bool(self._trimmed)

    def wants_refill(self, bound: int) -> bool:
        """Whether a class :meth:`over` trimmed holds fewer than half ``bound``
        now (its schedules taken out are due to be read again); each such
        class counts once."""
        low = [c for c in self._trimmed if self._counts.get(c, 0) < bound // 2]
        self._trimmed.difference_update(low)
        return bool(low)

    def release(self, free_for: Callable[[Constraints], int]) -> list[tuple[str, float, float]]:
        """For each class whose workers have ``free_for(constraints)`` slots
        free, take its most urgent waiting schedules out: :attr:`per_slot` per
        free slot, at least :attr:`least`; returns them as ``(name,
        can_start_by, should_start_by)`` for the index, classes in the order
        first set aside."""
        released: list[tuple[str, float, float]] = []
        for constraints, heap in list(self._heaps.items()):
            free = free_for(constraints)
            if free <= 0:
                continue
            taken, size = 0, max(self.least, self.per_slot * free)
            while heap and taken < size:
                should, can, name, version = heapq.heappop(heap)
                self._entries -= 1
                if self._waiting.get(name, (None, None))[1] != version:
                    continue  # dropped or set aside again since
                self._forget(name)
                released.append((name, can, should))
                taken += 1
            if not heap:
                del self._heaps[constraints]
        return released

    def _compact_if_bloated(self) -> None:
        if self._entries <= 4 * len(self._waiting) + 1024:
            return
        versions = {name: version for name, (_, version) in self._waiting.items()}
        for constraints, heap in list(self._heaps.items()):
            live = live_heap(heap, versions, 2, 3)
            if live:
                self._heaps[constraints] = live
            else:
                del self._heaps[constraints]
        self._entries = sum(len(heap) for heap in self._heaps.values())


def still_blocked(
    released: Iterable[str],
    index: Container[str],
    constraints_of: Callable[[str], Constraints],
    free_for: Callable[[Constraints], int],
) -> list[str]:
    """Of the schedules a round's :meth:`SlotWait.release` gave back, those
    still in ``index`` when it ends whose class has no slot free any more:
    they wait again (a plan would only skip them)."""
    return [n for n in released if n in index and free_for(constraints_of(n)) <= 0]
