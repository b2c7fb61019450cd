"""Relative-laxity order for schedules not in ERROR (pure; the default of ``restore``).

Plain deadline order serves the eligible schedule with the lowest
``should_start_by``. When the workers are busy all the time (any load near
capacity: runs start as early as the cooldown allows, so the slots never
idle), that order leaves every schedule the same *absolute* lead ``X`` over
its ``should_start_by``: the lead capacity allows. A five-second check and a
twenty-minute sync both start ``X`` seconds before their targets, so the sync,
whose run time varies by minutes, has the least room for a run longer than
its average, and the run-time tail of long jobs becomes the ERROR left at
loads below capacity.

Relative laxity serves the schedule with the least time left to its deadline
*per second of margin*:

    laxity(now) = (error_at - now) / (margin + floor)

where ``margin = error_at - should_start_by`` (the expected run time plus
four deviations, :func:`~celery_dgs.core.timing.start_margin`) and
``floor`` (``dgs_laxity_floor``, seconds) keeps schedules with a margin of a
few seconds from being left to the last moment (a slot frees every few
seconds to minutes, not continuously). Under load every schedule then starts
with the same lead *in units of its margin*: the spare capacity is shared in
proportion to the run-time uncertainty it has to absorb.

Schedules already in ERROR (``error_at`` passed) come first, in ``restore``'s
order (shortest expected run first, with aging): each accrues an ERROR-second
per second whatever its share, which is where shortest-first pays. A schedule
past its ``should_start_by`` but not yet in ERROR stays in laxity order
(its laxity is below ``margin / (margin + floor)``, so it goes before
on-time schedules of a similar margin): started now, it may still end
before its deadline,
and sending it behind short jobs would make it ERROR for sure. (Plain
``restore`` reorders from ``should_start_by`` on; at exactly full load with
equal shares that cost 20 % more ERROR than Celery beat, measured in
``docs/simulator.md``.)

Laxity changes with ``now``, so it cannot be a fixed heap key. Eligible
schedules sit in buckets by ``margin + floor``, each bucket a factor
:data:`BUCKET_WIDTH` (1.25) wide: inside a bucket denominators differ by
less than 25 % and the bucket is ordered by ``error_at``, so its top is the
first of it to enter ERROR (none is missed behind it) and nearly the least
laxity of it. A choice compares the laxity of each bucket's top: a decision
is O(buckets + log N), with 52 buckets from one second to a day of margin
and usually a dozen in use. (Measured at load 0.9, seeds 1-3: buckets 2x
wide left 59 and 94 ERROR-seconds with equal shares and 2,117-6,008 with
mixed ones; 1.25x, 0 and 484-977.)
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable
from datetime import datetime

from .index import live_heap
from .late_order import RestoringIndex, _Tracked
from .timing import start_margin

_Item = tuple[float, float, str, int]
#: Buckets hold margins (plus floor) within this factor of each other.
BUCKET_WIDTH = 1.25
_INV_LOG_WIDTH = 1.0 / math.log(BUCKET_WIDTH)
#: An eligible schedule not in ERROR: error_at, can_start_by, name, version, margin.
_Bucketed = tuple[float, float, str, int, float]

#: Default ``dgs_laxity_floor``: seconds added to every margin in the laxity.
DEFAULT_LAXITY_FLOOR_S = 60.0


def bucket_of(scale: float) -> int:
    """The bucket of a schedule whose margin plus floor is ``scale`` seconds:
    it holds the scales in ``[BUCKET_WIDTH ** b, BUCKET_WIDTH ** (b + 1))``."""
    return math.floor(math.log(scale) * _INV_LOG_WIDTH) if scale > 0 else -(1 << 30)


#: The margin bucket of a schedule with no margin (:func:`margin_bucket`).
NO_MARGIN_BUCKET = bucket_of(0.0)


def margin_bucket(margin_s: float) -> int:
    """The bucket of a schedule's margin alone (``error_at - should_start_by``,
    seconds; not finite or not above 0: no margin, :data:`NO_MARGIN_BUCKET`):
    the store keeps it with each schedule (``margin_bucket``), beat's window
    reads a slice per bucket by ``error_at``. Unlike the laxity's buckets it
    does not depend on ``dgs_laxity_floor``."""
    return bucket_of(margin_s) if math.isfinite(margin_s) and margin_s > 0 else NO_MARGIN_BUCKET


def margin_bucket_of(should_start_by: datetime | None, error_at: datetime | None) -> int | None:
    """The margin bucket (:func:`margin_bucket`) of a schedule whose kept
    times are ``should_start_by`` and ``error_at``: of its margin
    ``error_at - should_start_by``; ``None`` when either is ``None``."""
    if should_start_by is None or error_at is None:
        return None
    return margin_bucket((error_at - should_start_by).total_seconds())


@functools.cache
def margin_bucket_edges(bucket: int) -> tuple[float, float]:
    """The least margin of ``bucket`` (:func:`margin_bucket`) and the margin
    above its greatest, in seconds; ``(0, 0)`` for :data:`NO_MARGIN_BUCKET`.
    Rounded outwards by 1e-9, so a margin computed into the bucket is within."""
    if bucket == NO_MARGIN_BUCKET:
        return 0.0, 0.0
    return BUCKET_WIDTH**bucket * (1 - 1e-9), BUCKET_WIDTH ** (bucket + 1) * (1 + 1e-9)


def margin_seconds(tracked: _Tracked | None) -> float:
    """A schedule's ``error_at - should_start_by`` in seconds (0 when unknown):
    the denominator of its laxity."""
    if tracked is None:
        return 0.0
    return start_margin(tracked.spec, tracked.stats).total_seconds()


class LaxityIndex(RestoringIndex):
    """:class:`~celery_dgs.core.late_order.RestoringIndex` whose schedules go in
    relative-laxity order until their ``error_at`` passes; those in ERROR go
    first, shortest expected run first with aging (``restore``'s late order).

    ``margin_s(name)`` is the schedule's ``error_at - should_start_by`` in
    seconds, read once when it becomes eligible (its stats do not change while
    it is indexed)."""

    def __init__(
        self,
        expected_s: Callable[[str], float],
        margin_s: Callable[[str], float],
        aging: float,
        floor_s: float = DEFAULT_LAXITY_FLOOR_S,
    ) -> None:
        super().__init__(expected_s, aging)
        if not (math.isfinite(floor_s) and floor_s >= 0):
            raise ValueError(f"laxity floor must be a finite number >= 0, got {floor_s!r}")
        self.margin_s = margin_s
        self.floor_s = floor_s
        #: bucket number of (margin + floor) -> heap of eligible schedules not
        #: in ERROR, ordered by error_at
        self._buckets: dict[int, list[_Bucketed]] = {}
        #: items pushed into buckets since the last compaction (>= their total size)
        self._bucketed = 0
        #: removals so far; with DeadlineIndex's upsert counter, the state under
        #: which the last choice may be reused (:meth:`_top`)
        self._removals = 0
        #: the last choice: (now, upserts, removals, heap, its top item)
        self._last: tuple[float, int, int, list[_Item] | None, object] | None = None

    def remove(self, name: str) -> bool:
        self._removals += 1
        return super().remove(name)

    def pop_placeable(
        self, now: float, can_place: Callable[[str], bool], *, max_skips: int = 1000
    ) -> str | None:
        try:
            return super().pop_placeable(now, can_place, max_skips=max_skips)
        finally:
            self._last = None  # refused items were put back: the heaps' tops changed

    def promote(self, now: float) -> int:
        moved = 0
        waiting, version, times = self._waiting, self._version, self._times
        buckets, floor, margin_s = self._buckets, self.floor_s, self.margin_s
        isfinite = math.isfinite
        while waiting and waiting[0][0] <= now:
            _, item_version, name = heapq.heappop(waiting)
            if version.get(name) != item_version:
                continue
            indexed = times[name]
            margin = margin_s(name)
            if not (isfinite(margin) and margin > 0):
                margin = 0.0
            scale = margin + floor
            bucket_no = bucket_of(scale)
            error_at = indexed.should_start_by + margin
            item = (error_at, indexed.can_start_by, name, item_version, margin)
            bucket = buckets.get(bucket_no)
            if bucket is None:
                buckets[bucket_no] = [item]
            else:
                heapq.heappush(bucket, item)
            moved += 1
        self._bucketed += moved
        return moved

    def _top(self, now: float) -> list[_Item] | None:
        # peek() then pop_placeable() ask twice at the same moment: the choice is
        # reused while nothing was upserted or removed and its top is unchanged.
        last = self._last
        if (
            last is not None
            and last[0] == now
            and last[1] == self._counter
            and last[2] == self._removals
        ):
            heap = last[3]
            if heap and heap[0] is last[4]:
                return heap
        heap = self._choose(now)
        self._last = (now, self._counter, self._removals, heap, heap[0] if heap else None)
        return heap

    def _choose(self, now: float) -> list[_Item] | None:
        self.promote(now)
        version_of, late, times, floor = self._version.get, self._late, self._times, self.floor_s
        best: list[_Bucketed] | None = None
        best_laxity = math.inf
        for bucket in self._buckets.values():
            while bucket:
                item = bucket[0]
                if version_of(item[2]) != item[3]:
                    heapq.heappop(bucket)
                elif item[0] < now:  # error_at passed: in ERROR
                    heapq.heappop(bucket)
                    # exact, not error_at - margin (a run request's is ~ -1e12)
                    should = times[item[2]].should_start_by
                    heapq.heappush(late, self._late_entry(item[2], should, item[1], item[3]))
                else:
                    break
            if not bucket:  # kept: pop_placeable pushes skipped items back into it
                continue
            item = bucket[0]
            margin = item[4]
            scale = margin + floor
            # No margin and no floor: not urgent before its deadline (then it is late).
            laxity = (item[0] - now) / scale if scale > 0 else math.inf
            if best is None or laxity < best_laxity or (laxity == best_laxity and item < best[0]):
                best, best_laxity = bucket, laxity
        self._clean_late_top()
        # A bucket item is a longer tuple with the same first four fields: the
        # callers (peek, pop, pop_placeable) read only those.
        return late or best  # type: ignore[return-value]

    def ready_count(self, now: float) -> int:
        self._top(now)
        version = self._version
        late = sum(1 for i in self._late if version.get(i[2]) == i[3])
        return late + sum(1 for b in self._buckets.values() for i in b if version.get(i[2]) == i[3])

    def _compact_if_bloated(self) -> None:
        super()._compact_if_bloated()
        buckets = getattr(self, "_buckets", None)
        if not buckets:
            return
        if self._bucketed <= 4 * len(self._times) + 1024:  # O(1): runs on every upsert
            return
        for bucket_no, bucket in list(buckets.items()):
            live = live_heap(bucket, self._version, 2, 3)
            if live:
                buckets[bucket_no] = live
            else:
                del buckets[bucket_no]
        self._bucketed = sum(len(b) for b in buckets.values())
