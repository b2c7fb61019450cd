"""Seed 001's revisit groups: which adaptive schedule takes a slot that the
deadline order gives to adaptive work (pure).

An adaptive schedule is in one of three groups, in this order:

1. ``never_visited`` (no good run yet): oldest first, by the lister's
   last-modified hint, else by its registration;
2. ``modified_since_visit`` (a hint newer than the last good run's start):
   the largest gap between that start and the hint first;
3. ``other``: the earliest next visit target first.

(The groups of the ``dgs_adaptive_schedules`` metric.)

:class:`GroupIndex` wraps the overload policy's index. When that index's
choice is an adaptive schedule, the pick goes to adaptive work, and the
groups decide which eligible adaptive schedule takes it; any other choice
(and an operator's run request) is the wrapped index's. The schedule the
groups chose leaves its place in the wrapped index to the one it was
chosen over, so the k-th adaptive pick is made where the k-th adaptive
schedule stands in the wrapped index's order: other kinds of schedule
keep their order, and adaptive work as a whole keeps its places.

**Shares.** The picks go to the groups in set shares
(:class:`GroupShares`, ``dgs_adaptive_group_shares``), over every run of
consecutive picks whatever the size of each dispatch round: start-time fair
queueing over the three groups (:class:`GroupTurns`). The turns of a group
with no eligible schedule go to the other groups in proportion to their
shares: no pick is lost. A group that was empty starts level with the group
served last, and among level groups the first in the order goes first: a
source its lister just added is the next adaptive pick unless the
never-visited group has just had more than its share (then it waits its
turn, as a backlog of new sources shares the slots with the others).

The default shares are swh-scheduler's ``DEFAULT_POLICY``
(``swh/scheduler/celery_backend/recurrent_visits.py``): 40 % to
``never_visited_oldest_update_first``, 40 % to
``already_visited_order_by_lag``, 20 % to ``origins_without_last_update``.
Its weights for version-control origins (hg, svn, cvs, bzr, git) are
49/49/2.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .adaptive import target, upstream_changed
from .index import DeadlineIndex, IndexedTimes, IndexOver, live_heap
from .late_order import is_run_request
from .spec import AdaptiveSpec, ScheduleSpec
from .stats import ScheduleStats
from .tz import ensure_utc

#: The groups, in their order.
NEVER_VISITED, MODIFIED_SINCE_VISIT, OTHER = 0, 1, 2
#: Their names (the keys of ``dgs_adaptive_group_shares``).
GROUP_NAMES = ("never_visited", "modified_since_visit", "other")
_GROUPS = range(len(GROUP_NAMES))


@dataclass(frozen=True)
class GroupShares:
    """The weight of each group's picks (numbers >= 0, not all 0; only their
    ratios count)."""

    never_visited: float
    modified_since_visit: float
    other: float

    def __post_init__(self) -> None:
        for name, value in zip(GROUP_NAMES, self.weights(), strict=True):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"the share of {name} must be a number, got {value!r}")
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"the share of {name} must be a finite number >= 0, got {value!r}")
        if not sum(self.weights()) > 0:
            raise ValueError("at least one share must be > 0")

    def weights(self) -> tuple[float, float, float]:
        return (self.never_visited, self.modified_since_visit, self.other)

    def fractions(self) -> tuple[float, ...]:
        """Each group's share of the picks while every group has work."""
        total = sum(self.weights())
        return tuple(w / total for w in self.weights())

    def describe(self) -> str:
        return "/".join(f"{100 * f:g}" for f in self.fractions())


#: swh-scheduler's default weights (module docstring).
DEFAULT_GROUP_SHARES = GroupShares(never_visited=40, modified_since_visit=40, other=20)
#: swh-scheduler's weights for version-control origins.
VCS_GROUP_SHARES = GroupShares(never_visited=49, modified_since_visit=49, other=2)


def parse_group_shares(value: object) -> GroupShares:
    """``value`` as :class:`GroupShares`: one already, or a mapping of the three
    group names to their weights. Raises :class:`ValueError` naming what is wrong."""
    if isinstance(value, GroupShares):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(
            f"must be a mapping of {', '.join(GROUP_NAMES)} to weights, e.g. "
            f"{{'never_visited': 40, 'modified_since_visit': 40, 'other': 20}}, got {value!r}"
        )
    unknown = sorted(str(k) for k in value if k not in GROUP_NAMES)
    missing = [k for k in GROUP_NAMES if k not in value]
    if unknown or missing:
        raise ValueError(
            f"must name exactly the groups {', '.join(GROUP_NAMES)}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            + (f"; missing: {', '.join(missing)}" if missing else "")
        )
    return GroupShares(**{k: value[k] for k in GROUP_NAMES})


@dataclass(frozen=True, slots=True)
class RevisitKey:
    """An adaptive schedule's group and its key within it (lowest first)."""

    group: int
    key: float


def revisit_key(spec: ScheduleSpec, stats: ScheduleStats) -> RevisitKey | None:
    """An adaptive schedule's group and key (times as epoch seconds); ``None``
    for a schedule of another kind."""
    if not isinstance(spec, AdaptiveSpec):
        return None
    last, hint = stats.last_good_start_at, stats.upstream_modified_at
    if last is None:
        oldest = hint or stats.registered_at
        when = -math.inf if oldest is None else ensure_utc(oldest, what="oldest").timestamp()
        return RevisitKey(NEVER_VISITED, when)
    last = ensure_utc(last, what="last_good_start_at")
    if hint is not None and upstream_changed(stats):
        gap = ensure_utc(hint, what="upstream_modified_at") - last
        return RevisitKey(MODIFIED_SINCE_VISIT, -gap.total_seconds())
    return RevisitKey(OTHER, target(spec, stats, last).timestamp())


class GroupTurns:
    """Which group's turn it is: start-time fair queueing over the groups.

    Each group has a start tag; the pick goes to the non-empty group with the
    lowest tag (ties: the first in the group order), and moves that tag on by
    one over the group's share. A group's tag is never behind the tag of the
    last pick, so a group that was empty neither saved turns nor lost them,
    and while it is empty the others share its turns in proportion to their
    shares."""

    def __init__(self, shares: GroupShares) -> None:
        self.weights = shares.fractions()
        self._tags = [0.0] * len(GROUP_NAMES)
        self._last = 0.0

    def order(self, non_empty: Sequence[bool]) -> list[int]:
        """The non-empty groups, the one whose turn it is first (a group with
        a share of 0 only after the others)."""
        groups = [g for g in _GROUPS if non_empty[g]]
        return sorted(groups, key=lambda g: (self.weights[g] <= 0, self._start(g), g))

    def take(self, group: int) -> None:
        """A pick from ``group``."""
        weight = self.weights[group]
        start = self._start(group)
        self._last = start
        self._tags[group] = start + (1.0 / weight if weight > 0 else 0.0)

    def _start(self, group: int) -> float:
        return max(self._tags[group], self._last)


@dataclass(frozen=True, slots=True)
class _Choice:
    """A choice: ``name``, over ``main_choice`` (``main``'s), from ``group``
    (None: ``main``'s own), with the groups that had eligible work."""

    name: str
    main_choice: str
    group: int | None
    non_empty: list[bool]


class GroupIndex(IndexOver):
    """``main`` (an overload policy's index) with the revisit groups over its
    adaptive schedules (module docstring).

    ``key_of(name)`` is read when a schedule is upserted: its
    :class:`RevisitKey`, or ``None`` for a schedule of another kind. Every
    method but the choice answers for ``main``, and :meth:`times` gives a
    grouped schedule's own times (in ``main`` it may hold the place of one
    the groups chose over it). ``picks``: schedules popped per group."""

    def __init__(
        self,
        main: DeadlineIndex,
        key_of: Callable[[str], RevisitKey | None],
        shares: GroupShares = DEFAULT_GROUP_SHARES,
    ) -> None:
        super().__init__(main)
        self.key_of = key_of
        self.turns = GroupTurns(shares)
        self.picks = [0] * len(GROUP_NAMES)
        #: grouped schedules: their key, own times and version
        self._keys: dict[str, RevisitKey] = {}
        self._own: dict[str, IndexedTimes] = {}
        self._ver: dict[str, int] = {}
        #: not yet eligible: (can_start_by, version, name)
        self._upcoming: list[tuple[float, int, str]] = []
        #: per group, the eligible: (key, name, version)
        self._heaps: tuple[list[tuple[float, str, int]], ...] = tuple([] for _ in _GROUPS)
        self._counts = [0] * len(GROUP_NAMES)
        #: eligible schedule -> its group
        self._eligible: dict[str, int] = {}
        self._seq = 0
        self._pushed = 0

    # -- what main answers --------------------------------------------------------
    def times(self, name: str) -> IndexedTimes | None:
        own = self._own.get(name)
        return own if own is not None else self.main.times(name)

    def ready_count(self, now: float) -> int:
        return self.main.ready_count(now)

    def next_wakeup(self) -> float | None:
        return self.main.next_wakeup()

    def promote(self, now: float) -> int:
        return self.main.promote(now)

    def group_of(self, name: str) -> int | None:
        """The group ``name`` is indexed in (None: not a grouped schedule)."""
        key = self._keys.get(name)
        return None if key is None else key.group

    # -- tracking -----------------------------------------------------------------
    def _track(self, name: str, can_start_by: float, should_start_by: float) -> bool:
        self._untrack(name)
        key = None if is_run_request(can_start_by, should_start_by) else self.key_of(name)
        if key is None:
            return False
        self._seq += 1
        self._keys[name], self._ver[name] = key, self._seq
        self._own[name] = IndexedTimes(can_start_by, should_start_by)
        return True

    def _untrack(self, name: str) -> None:
        if self._keys.pop(name, None) is None:
            return
        del self._ver[name], self._own[name]
        group = self._eligible.pop(name, None)
        if group is not None:
            self._counts[group] -= 1

    def upsert(self, name: str, can_start_by: float, should_start_by: float) -> None:
        self.main.upsert(name, can_start_by, should_start_by)
        if self._track(name, can_start_by, should_start_by):
            heapq.heappush(self._upcoming, (can_start_by, self._seq, name))
            self._pushed += 1
            self._compact_if_bloated()

    def upsert_many(self, entries: Iterable[tuple[str, float, float]]) -> None:
        entries = list(entries)
        self.main.upsert_many(entries)
        for name, can, should in entries:
            if self._track(name, can, should):
                self._upcoming.append((can, self._seq, name))
                self._pushed += 1
        heapq.heapify(self._upcoming)
        self._compact_if_bloated()

    def remove(self, name: str) -> bool:
        self._untrack(name)
        return self.main.remove(name)

    def _make_eligible(self, now: float) -> list[bool]:
        """Move the grouped schedules eligible at ``now`` to their group's
        heap; which groups have eligible schedules."""
        upcoming, ver = self._upcoming, self._ver
        while upcoming and upcoming[0][0] <= now:
            _, version, name = heapq.heappop(upcoming)
            if ver.get(name) != version:
                continue
            key = self._keys[name]
            heapq.heappush(self._heaps[key.group], (key.key, name, version))
            self._pushed += 1
            self._eligible[name] = key.group
            self._counts[key.group] += 1
        return [count > 0 for count in self._counts]

    def _top(self, group: int) -> str | None:
        heap, ver = self._heaps[group], self._ver
        while heap and ver.get(heap[0][1]) != heap[0][2]:
            heapq.heappop(heap)
        return heap[0][1] if heap else None

    # -- the choice ---------------------------------------------------------------
    def _choose(self, now: float) -> _Choice | None:
        """``main``'s choice ``x``, or, when it is a grouped schedule, the top
        of the group whose turn it is."""
        x = self.main.peek(now)
        if x is None:
            return None
        non_empty = self._make_eligible(now)
        if x not in self._keys:
            return _Choice(x, x, None, non_empty)
        for group in self.turns.order(non_empty):
            top = self._top(group)
            if top is not None:
                return _Choice(top, x, group, non_empty)
        return _Choice(x, x, None, non_empty)

    def peek(self, now: float) -> str | None:
        chosen = self._choose(now)
        return None if chosen is None else chosen.name

    def _taken(self, chosen: _Choice, name: str, group: int | None, now: float) -> str:
        """Pop ``name`` (of ``group``) in place of ``chosen.main_choice``, which
        takes over its place in ``main``."""
        if group is not None:
            self.turns.take(group)
            self.picks[group] += 1
        self._untrack(name)
        x = chosen.main_choice
        if x == name:
            self.main.pop(now)
            return name
        place = self.main.times(name)
        self.main.remove(name)
        if place is not None and group is not None:
            self.main.remove(x)
            self.main.upsert(x, place.can_start_by, place.should_start_by)
        return name

    def pop(self, now: float) -> str | None:
        chosen = self._choose(now)
        if chosen is None:
            return None
        return self._taken(chosen, chosen.name, chosen.group, now)

    def pop_placeable(
        self, now: float, can_place: Callable[[str], bool], *, max_skips: int = 1000
    ) -> str | None:
        chosen = self._choose(now)
        if chosen is None:
            return None
        if chosen.group is not None:
            found = self._placeable(chosen.non_empty, can_place, max_skips)
            if found is not None:
                return self._taken(chosen, *found, now)
        # Not adaptive work, or none of it placeable: main's own skip decides.
        name_or_none = self.main.pop_placeable(now, can_place, max_skips=max_skips)
        if name_or_none is not None:
            self._untrack(name_or_none)
        return name_or_none

    def _placeable(
        self, non_empty: list[bool], can_place: Callable[[str], bool], max_skips: int
    ) -> tuple[str, int] | None:
        """The first placeable schedule of the groups in turn order (at most
        ``max_skips`` refused ones looked at)."""
        skipped: list[tuple[int, tuple[float, str, int]]] = []
        try:
            for group in self.turns.order(non_empty):
                heap = self._heaps[group]
                while len(skipped) <= max_skips:
                    top = self._top(group)
                    if top is None:
                        break
                    if can_place(top):
                        return top, group
                    skipped.append((group, heapq.heappop(heap)))
            return None
        finally:
            for group, item in skipped:
                heapq.heappush(self._heaps[group], item)

    def _compact_if_bloated(self) -> None:
        if self._pushed <= 4 * len(self._ver) + 1024:  # O(1): runs on every upsert
            return
        self._upcoming = live_heap(self._upcoming, self._ver, 2, 1)
        for heap in self._heaps:
            heap[:] = live_heap(heap, self._ver, 1, 2)
        self._pushed = len(self._upcoming) + sum(len(h) for h in self._heaps)
