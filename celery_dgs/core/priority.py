"""Priority classes with elevator aging, over an overload policy's index (pure).

Every schedule has a ``priority`` (0-99, lower first). Priority decides *who
waits* when not every due schedule can start; it must not cost freshness when
every schedule can be fresh. So it orders only *due* work: a schedule is due
once both its ``can_start_by`` and its ``should_start_by`` have passed
(``due_at = max(can_start_by, should_start_by)``). Everything else keeps the
order of the overload policy's own index (``main``: relative laxity by
default), which is what keeps every schedule fresh below capacity, where
nothing is due (``docs/simulator.md``).

The choice: take ``main``'s choice ``x``, unless a due schedule ``y`` of
another class sits in a strictly better *place* than ``x``'s class, or in the
same place and due longer; then the best such ``y``. A place is ``(level,
rank)``:

- ``level``: the index of the schedule's class among the classes that have
  due work right now (empty classes are skipped; the top class, the highest
  with indexed schedules, always keeps level 0), minus the elevator steps it
  has waited.
- ``rank``: at its own class's level a schedule is native and goes first;
  elevated work (moved up from a lower level) goes after it.

Among due schedules of one place, the one due longest goes first. With one
class (no priorities set) the choice is always ``main``'s.

**Elevator** (:mod:`~celery_dgs.core.elevator`). Every ``elevator_interval_s``
(since the Unix epoch, shifted by ``clock_offset_s``) each due schedule
moves up one level, to the next non-empty class. At the top level it waits
:data:`TOP_HOLD_STEPS` further step behind the top class's own due work, then
goes ahead of it. A schedule of the lowest of ``k`` classes is therefore
ahead of every class's own due work after ``k - 1 + TOP_HOLD_STEPS + 1``
steps, the first within one interval: low-priority work is delayed but never
starves.

**Capacity short.** The classes order due work only while capacity is
short: while some due schedule has waited ``short_when_waited_s`` past its
``due_at`` (``None``: always short), or while ``overloaded()`` (beat: some
pool's demand exceeds the live slots that serve it,
:func:`~celery_dgs.core.pool_slots.overloaded_pools`, seen as soon as half
the workers die, say, not after the first long wait), for
``short_hold_s`` after the last moment either held (a backlog being worked
off does not flip the order back and forth), and while an operator's run
request is due (indexed with ``should_start_by`` pushed back by
``RUN_REQUEST_PRIORITY_S``: it goes in its asked class). Otherwise every
choice is ``main``'s: below capacity no due schedule waits that long and the
demand fits the slots, so priorities change no decision and the freshness
the deadline order wins there is kept (``docs/simulator.md``, "Priorities").

**Lead.** A due top-class schedule starts with only its margin left (a run
longer than that is in ERROR even if served first), so with ``lead_s``
(beat: :func:`~celery_dgs.core.ranking.top_lead_s`) it counts as due
``lead_s`` before its ``should_start_by`` while capacity is short.

Cost: one heap of due schedules per non-empty class, ordered by ``due_at``
(its top is the class's longest-waiting, hence most elevated, schedule), and
one heap of not-yet-due schedules by the time they count as due: O(log N)
per upsert or move, O(classes + log N) per decision (at most 100 classes);
no schedule is touched when the elevator steps.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Iterable

from .elevator import ElevatorState, elevator_steps
from .elevator import effective_priority as effective_priority
from .elevator import level_classes as level_classes
from .index import DeadlineIndex, IndexOver, live_heap
from .late_order import is_run_request

#: Default ``dgs_elevator_interval``: seconds between two elevator steps.
DEFAULT_ELEVATOR_INTERVAL_S = 7200.0
#: Elevator steps work waits at the top level behind the top class's own
#: due work before it goes ahead of it.
TOP_HOLD_STEPS = 1


def short_after_s(elevator_interval_s: float | None) -> float:
    """How long a due schedule waits before beat counts capacity as short (the
    classes order due work, the top class gets its lead): half an elevator
    interval (of the default one without the elevator)."""
    return (elevator_interval_s or DEFAULT_ELEVATOR_INTERVAL_S) / 2


#: A due schedule in its class heap: due_at, name, version.
_Due = tuple[float, str, int]
#: A candidate place and its schedule: level, rank, due_at, name, its class.
_Candidate = tuple[int, int, float, str, int]
#: A class's place: level, rank and the due_at of its longest-waiting schedule.
_Place = tuple[int, int, float]


class PriorityIndex(IndexOver):
    """``main`` (an overload policy's index) with priority classes and the elevator.

    ``priority_of(name)`` is read when a schedule is upserted (its spec does not
    change while it is indexed). Every other method answers for ``main``."""

    def __init__(
        self,
        main: DeadlineIndex,
        priority_of: Callable[[str], int],
        *,
        elevator_interval_s: float | None = DEFAULT_ELEVATOR_INTERVAL_S,
        clock_offset_s: float = 0.0,
        lead_s: Callable[[str], float] | None = None,
        short_when_waited_s: float | None = None,
        overloaded: Callable[[], bool] | None = None,
        short_hold_s: float = 0.0,
    ) -> None:
        super().__init__(main)
        self.lead_s = lead_s
        self.short_when_waited_s = short_when_waited_s
        self.overloaded = overloaded
        self.short_hold_s = short_hold_s
        #: capacity counts as short until then (``short_hold_s`` past the last
        #: long wait or overload)
        self._short_until = -math.inf
        #: schedules popped by the class order over ``main``'s choice
        self.class_picks = 0
        #: indexed run requests, and how many of them are due
        self._requests: set[str] = set()
        self._due_requests = 0
        if elevator_interval_s is not None and not (
            math.isfinite(elevator_interval_s) and elevator_interval_s > 0
        ):
            raise ValueError(
                f"elevator interval must be > 0 seconds or None, got {elevator_interval_s!r}"
            )
        self.priority_of = priority_of
        self.elevator_interval_s = elevator_interval_s
        self.clock_offset_s = clock_offset_s
        self._class: dict[str, int] = {}
        #: indexed schedules per class: with one class, every choice is main's
        self._class_sizes: dict[int, int] = {}
        self._ver: dict[str, int] = {}
        self._due_at: dict[str, float] = {}
        #: not yet due: (due_at, version, name)
        self._upcoming: list[tuple[float, int, str]] = []
        #: class -> heap of its due schedules
        self._due: dict[int, list[_Due]] = {}
        #: due schedule -> its class; live due schedules per class
        self._due_class: dict[str, int] = {}
        self._due_count: dict[int, int] = {}
        self._levels: list[int] | None = []
        self._seq = 0
        #: entries pushed into the heaps since the last compaction (>= their size)
        self._pushed = 0

    # -- what main answers --------------------------------------------------------
    def ready_count(self, now: float) -> int:
        return self.main.ready_count(now)

    def next_wakeup(self) -> float | None:
        return self.main.next_wakeup()

    def promote(self, now: float) -> int:
        return self.main.promote(now)

    # -- tracking -----------------------------------------------------------------
    def _track(self, name: str, can_start_by: float, should_start_by: float) -> tuple[float, int]:
        self._undue(name)
        self._seq += 1
        self._ver[name] = self._seq
        self._unclass(name)
        cls = self._class[name] = self.priority_of(name)
        self._class_sizes[cls] = self._class_sizes.get(cls, 0) + 1
        if is_run_request(can_start_by, should_start_by):
            self._requests.add(name)
        else:
            self._requests.discard(name)
        due_at = self._due_at[name] = max(can_start_by, should_start_by)
        if self.lead_s is None:
            return due_at, self._seq
        return max(can_start_by, should_start_by - self.lead_s(name)), self._seq

    def upsert(self, name: str, can_start_by: float, should_start_by: float) -> None:
        self.main.upsert(name, can_start_by, should_start_by)
        due_at, version = self._track(name, can_start_by, should_start_by)
        heapq.heappush(self._upcoming, (due_at, version, name))
        self._pushed += 1
        self._compact_if_bloated()

    def upsert_many(self, entries: Iterable[tuple[str, float, float]]) -> None:
        entries = list(entries)
        self.main.upsert_many(entries)
        upcoming = self._upcoming
        for name, can, should in entries:
            due_at, version = self._track(name, can, should)
            upcoming.append((due_at, version, name))
        self._pushed += len(entries)
        heapq.heapify(upcoming)
        self._compact_if_bloated()

    def remove(self, name: str) -> bool:
        self._forget(name)
        return self.main.remove(name)

    def _forget(self, name: str) -> None:
        self._undue(name)
        self._requests.discard(name)
        self._ver.pop(name, None)
        self._unclass(name)
        self._due_at.pop(name, None)

    def _unclass(self, name: str) -> None:
        cls = self._class.pop(name, None)
        if cls is not None:
            left = self._class_sizes[cls] - 1
            if left:
                self._class_sizes[cls] = left
            else:
                del self._class_sizes[cls]

    def _undue(self, name: str) -> None:
        cls = self._due_class.pop(name, None)
        if cls is not None:
            self._due_requests -= name in self._requests
            left = self._due_count[cls] - 1
            if left:
                self._due_count[cls] = left
            else:
                del self._due_count[cls]
                self._levels = None

    def _make_due(self, now: float) -> None:
        upcoming, ver = self._upcoming, self._ver
        while upcoming and upcoming[0][0] <= now:
            _, version, name = heapq.heappop(upcoming)
            if ver.get(name) != version:
                continue
            cls = self._class[name]
            due_at = self._due_at[name]
            heapq.heappush(self._due.setdefault(cls, []), (due_at, name, version))
            self._pushed += 1
            self._due_class[name] = cls
            self._due_requests += name in self._requests
            count = self._due_count.get(cls, 0)
            self._due_count[cls] = count + 1
            if not count:
                self._levels = None

    def _tops(self, now: float) -> list[tuple[int, _Due]]:
        """Per class in the due heaps, highest first: its longest-due entry.
        Without a lead every such entry is due; with one, an entry may still be
        ahead of its ``due_at`` (inside its lead)."""
        self._make_due(now)
        if self._levels is None:
            self._levels = sorted(self._due_count)
        ver, tops = self._ver, []
        for cls in self._levels:
            heap = self._due[cls]
            while heap and ver.get(heap[0][1]) != heap[0][2]:
                heapq.heappop(heap)
            if heap:  # empty while its items are out for a moment (pop_placeable)
                tops.append((cls, heap[0]))
        return tops

    def _capacity_short(self, now: float, tops: list[tuple[int, _Due]]) -> bool:
        """Whether capacity counts as short (module docstring): some due
        schedule has waited ``short_when_waited_s`` past its ``due_at``, or
        ``overloaded()``, or either held less than ``short_hold_s`` ago, or a
        run request is due; always without ``short_when_waited_s``."""
        if self.short_when_waited_s is None or self._due_requests:
            return True
        oldest = min((top[0] for _, top in tops), default=math.inf)
        if oldest <= now - self.short_when_waited_s or (
            self.overloaded is not None and self.overloaded()
        ):
            self._short_until = now + self.short_hold_s
            return True
        return now < self._short_until

    def _due_tops(
        self, now: float, tops: list[tuple[int, _Due]], short: bool
    ) -> list[tuple[int, _Due]]:
        """``tops`` that count as due: those past their ``due_at``, and while
        capacity is ``short`` the top class's inside its lead."""
        if self.lead_s is None or not short or not self._class_sizes:
            return [(cls, top) for cls, top in tops if top[0] <= now]
        top_class = min(self._class_sizes)
        return [(cls, top) for cls, top in tops if top[0] <= now or cls == top_class]

    def _level_classes(self, due_tops: list[tuple[int, _Due]]) -> list[int]:
        """:func:`level_classes` of the classes with due work; the top class is
        the highest with indexed schedules."""
        top = min(self._class_sizes) if self._class_sizes else None
        return level_classes((cls for cls, _ in due_tops), top)

    def due_classes(self, now: float) -> list[int]:
        """The classes the elevator's levels count at ``now``, highest (lowest
        number) first: those with due work, and the top class."""
        return list(self.elevator_state(now).levels)

    def elevator_state(self, now: float) -> ElevatorState:
        """The classes the levels count at ``now``, whether capacity is short,
        and the elevator's settings: what ``status`` needs to show the class
        of any schedule as this index serves it."""
        tops = self._tops(now)
        short = self._capacity_short(now, tops)
        levels = self._level_classes(self._due_tops(now, tops, short))
        return ElevatorState(tuple(levels), short, self.elevator_interval_s, self.clock_offset_s)

    def effective_priority(self, name: str, now: float) -> int | None:
        """The class ``name`` is served in at ``now`` (None: not indexed)."""
        cls = self._class.get(name)
        if cls is None:
            return None
        levels = self.due_classes(now)
        due_at = self._due_at[name] if name in self._due_class else None
        return effective_priority(
            cls, due_at, now, levels, self.elevator_interval_s, self.clock_offset_s
        )

    # -- the choice ---------------------------------------------------------------
    def _place(self, level_of_class: int, due_at: float | None, now: float) -> tuple[int, int]:
        steps = (
            0
            if due_at is None
            else elevator_steps(due_at, now, self.elevator_interval_s, self.clock_offset_s)
        )
        level = level_of_class - steps
        if level < 0:  # at the top level: held behind its own work, then above it
            level = min(0, level + TOP_HOLD_STEPS)
        return level, int(level < level_of_class)

    def _best_due(
        self, now: float, due_tops: list[tuple[int, _Due]]
    ) -> tuple[_Candidate | None, dict[int, _Place], list[int]]:
        """The due schedule in the best place (longest due among equals); each
        class with due work's place and its longest wait (``(level, rank,
        due_at)`` of its longest-waiting due schedule); the classes the levels
        count, highest first."""
        tops = due_tops
        levels = self._level_classes(tops)
        shift = len(levels) - len(tops)
        best: _Candidate | None = None
        places: dict[int, _Place] = {}
        for i, (cls, (due_at, name, _)) in enumerate(tops, start=shift):
            level, rank = self._place(i, due_at, now)
            places[cls] = (level, rank, due_at)
            candidate = (level, rank, due_at, name, cls)
            if best is None or candidate < best:
                best = candidate
        return best, places, levels

    def _choose(self, now: float) -> tuple[str, _Candidate | None] | None:
        """``main``'s choice, or the due schedule of another class in a better
        place, or in the same place and due longer (with its entry). Within a
        class, and while capacity is not short, ``main`` decides."""
        x = self.main.peek(now)
        if x is None:
            return None
        tops = self._tops(now)
        short = self._capacity_short(now, tops)
        if not short:
            return x, None
        best, places, levels = self._best_due(now, self._due_tops(now, tops, short))
        if best is None or best[3] == x:
            return x, None
        cls = self._class[x]
        place = places.get(cls)
        if place is None:  # no due work in its class: where its class would stand
            place = (bisect.bisect_left(levels, cls), 0, math.inf)
        if best[4] != cls and best[:3] < place:
            return best[3], best
        return x, None

    def peek(self, now: float) -> str | None:
        if len(self._class_sizes) <= 1:
            return self.main.peek(now)
        chosen = self._choose(now)
        return None if chosen is None else chosen[0]

    def pop(self, now: float) -> str | None:
        if len(self._class_sizes) <= 1:  # one class: main decides
            name = self.main.pop(now)
            if name is not None:
                self._forget(name)
            return name
        chosen = self._choose(now)
        if chosen is None:
            return None
        name, best = chosen
        self.class_picks += best is not None
        self.remove(name)
        return name

    def pop_placeable(
        self, now: float, can_place: Callable[[str], bool], *, max_skips: int = 1000
    ) -> str | None:
        if len(self._class_sizes) <= 1:  # one class: main decides
            name = self.main.pop_placeable(now, can_place, max_skips=max_skips)
            if name is not None:
                self._forget(name)
            return name
        skipped: list[tuple[int, _Due]] = []
        try:
            while len(skipped) <= max_skips:
                chosen = self._choose(now)
                if chosen is None:
                    return None
                name, best = chosen
                if best is None:  # main's choice: main skips what cannot be placed
                    name_or_none = self.main.pop_placeable(
                        now, can_place, max_skips=max_skips - len(skipped)
                    )
                    if name_or_none is not None:
                        self._forget(name_or_none)
                    return name_or_none
                heap = self._due[best[4]]
                skipped.append((best[4], heapq.heappop(heap)))  # put back if can_place raises
                if can_place(name):
                    skipped.pop()
                    self.class_picks += 1
                    self.remove(name)
                    return name
            return None
        finally:
            for cls, item in skipped:
                heapq.heappush(self._due[cls], item)

    def _compact_if_bloated(self) -> None:
        if self._pushed <= 4 * len(self._ver) + 1024:  # O(1): runs on every upsert
            return
        self._upcoming = live_heap(self._upcoming, self._ver, 2, 1)
        for cls, heap in list(self._due.items()):
            self._due[cls] = live_heap(heap, self._ver, 1, 2)
        self._pushed = len(self._upcoming) + sum(len(h) for h in self._due.values())
