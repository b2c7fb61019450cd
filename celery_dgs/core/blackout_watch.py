"""When an indexed schedule's start times go stale because of a blackout (pure).

An index holds each schedule's start times as
:func:`~celery_dgs.core.timing.start_times` computed them at one moment. For
a schedule without blackouts they do not depend on that moment once its
stats are set. With blackouts they do: a ``can_start_by`` before a window
stays in the index after the window has begun, and the schedule looks
eligible through its blackout. An index that orders a bucket by
``error_at`` and compares only the buckets' tops would then let that stale
entry head its bucket and hide a more urgent schedule behind it, and the
dispatch-time re-check only re-times a schedule that is chosen.

:func:`stale_from` says from when an entry computed now is stale: the next
window's start after the schedule may start (with
``avoid_blackout_overlap``, a microsecond after the last moment a run of the
expected duration started then would still end before that window).
:class:`BlackoutWatch` keeps those moments for the indexed schedules, and
each round begins by re-timing the ones whose moment has passed
(:meth:`BlackoutWatch.retime_due`). Beat's
ranking and the simulator's policy both use it, so they choose alike.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from datetime import datetime, time, timedelta

from .blackout import blackout_containing, longest_free_gap, next_blackout_start
from .cron import wall_instants
from .index import DeadlineIndex
from .spec import ScheduleSpec
from .stats import ScheduleStats
from .timing import DEFAULT_RETRY_LADDER, expected_duration, start_times
from .tz import ensure_utc, get_zone

_JUST_AFTER = timedelta(microseconds=1)


def stale_from(
    spec: ScheduleSpec, stats: ScheduleStats, can_start_by: datetime, now: datetime
) -> datetime | None:
    """The first moment after ``now`` from which ``start_times`` at that moment
    may give another ``can_start_by`` than ``can_start_by`` (computed at
    ``now``); ``None`` for a spec without blackouts.

    A ``can_start_by`` ahead of ``now`` at a window's end may have been moved
    there because ``now`` is in the window: from that end on, the times
    computed then may be the earlier ones again. Otherwise the schedule may
    start from ``max(can_start_by, now)`` on, and the next window's start
    ``B`` after it ends that (a due schedule is not eligible inside its
    window). With ``avoid_blackout_overlap`` a start later than ``B -
    expected`` would run into the window, so the entry is stale just after
    ``max(B - expected, can_start_by)`` when that is still ahead of ``now``;
    a due run that fits in no gap between windows was left alone by a verdict
    over the days around ``now``, stale at the next local midnight too.
    """
    blackouts = spec.blackout_periods
    if not blackouts:
        return None
    now = ensure_utc(now, what="now")
    can_start_by = ensure_utc(can_start_by, what="can_start_by")
    if can_start_by > now and blackout_containing(blackouts, spec.tz, can_start_by - _JUST_AFTER):
        return can_start_by  # a window's end: from then on the times may be earlier
    start = max(can_start_by, now)
    window_start = next_blackout_start(blackouts, spec.tz, start)
    if window_start is None:
        return None
    if spec.avoid_blackout_overlap:
        expected = expected_duration(spec, stats)
        if expected > timedelta(0):
            moment = window_start
            last_fit = max(window_start - expected, can_start_by)
            if last_fit >= now:
                moment = last_fit + _JUST_AFTER
            gap = longest_free_gap(blackouts, spec.tz, start)
            if gap is not None and expected > gap and can_start_by <= now:
                # It fits in no gap of the days around now, so it was left alone;
                # those days (a DST day's longer gap among them) move at midnight.
                moment = min(moment, _next_local_midnight(spec.tz, now))
            return moment
    return window_start


def kept_start_past_blackout(
    spec: ScheduleSpec,
    stats: ScheduleStats,
    kept_can: datetime | None,
    kept_should: datetime | None,
    now: datetime,
    *,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
) -> tuple[datetime, datetime] | None:
    """A schedule's start times at ``now`` (``can_start_by``,
    ``should_start_by``) when the kept ones, written earlier, say it may
    start by ``now`` and these say it may not: a blackout began since they
    were written. ``None``: a spec without blackouts, kept times not due yet,
    times that still let it start, or times that would move it ahead in the
    window's order (they only move later here; the window's reads rely on it).

    The store keeps a schedule's start times as of its last write; beat's
    window reads the schedules whose kept next start has passed, and one in
    a blackout begun since would stay held through it. Kept again with these
    times, it is read when its blackout ends."""
    if not spec.blackout_periods or kept_can is None or kept_should is None or kept_can > now:
        return None
    times = start_times(spec, stats, now, retry_ladder=retry_ladder)
    can, should = times.can_start_by, times.should_start_by
    if can <= now or should < kept_should:
        return None
    return can, should


def _next_local_midnight(tz: str, now: datetime) -> datetime:
    """The first local midnight in ``tz`` after ``now`` (a skipped one: the
    first instant after it)."""
    zone = get_zone(tz)
    day = now.astimezone(zone).date() + timedelta(days=1)
    return wall_instants(zone, datetime.combine(day, time(0)))[0]


class BlackoutWatch:
    """The moments at which indexed schedules' start times go stale
    (:func:`stale_from`), as seconds on the index's clock.

    :meth:`note` replaces a schedule's moment (``None``: it has none);
    :meth:`due` returns, once each, the schedules whose moment is at or before
    ``now``. A moment replaced or forgotten is skipped when its turn comes.
    """

    __slots__ = ("_at", "_heap")

    def __init__(self) -> None:
        self._at: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._at)

    def note(self, name: str, at: float | None) -> None:
        """``name``'s entry is stale from ``at`` on (``None``: never)."""
        if at is None:
            self._at.pop(name, None)
            return
        if self._at.get(name) == at:
            return
        self._at[name] = at
        heapq.heappush(self._heap, (at, name))
        if len(self._heap) > 2 * len(self._at) + 64:
            self._heap = [(t, n) for n, t in self._at.items()]
            heapq.heapify(self._heap)

    def forget(self, name: str) -> None:
        """``name`` left the index: no moment for it."""
        self._at.pop(name, None)

    def next_at(self) -> float | None:
        """The earliest moment kept (``None``: none)."""
        heap, at = self._heap, self._at
        while heap and at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now: float) -> list[tuple[str, float]]:
        """The schedules whose moment is at or before ``now``, with that moment,
        forgotten here: the caller re-times them (:func:`takes_new_times`) and
        notes their next moment."""
        heap, at = self._heap, self._at
        due: list[tuple[str, float]] = []
        while heap and heap[0][0] <= now:
            moment, name = heapq.heappop(heap)
            if at.get(name) == moment:
                del at[name]
                due.append((name, moment))
        return due

    def retime_due(
        self,
        now: float,
        index: DeadlineIndex,
        times_now: Callable[[str], tuple[float, float] | None],
    ) -> int:
        """Re-time the indexed schedules whose moment came by ``now``:
        ``times_now(name)`` gives their ``(can_start_by, should_start_by)`` at
        ``now`` and notes their next moment (``None``: leave the entry as it
        is); an entry takes them as :func:`takes_new_times` says. How many
        entries moved."""
        moved = 0
        for name, moment in self.due(now):
            indexed = index.times(name)
            if indexed is None:
                continue
            fresh = times_now(name)
            if fresh is not None and takes_new_times(indexed.can_start_by, moment, fresh[0]):
                index.upsert(name, *fresh)
                moved += 1
        return moved


def takes_new_times(indexed_can: float, moment: float, new_can: float) -> bool:
    """Whether an entry whose moment came (``indexed_can`` in the index) takes
    the times computed at that moment (``new_can``): a later ``can_start_by``
    always (its window began); an earlier one only when the entry holds the
    very window end it was noted for (its window ended). Any other entry, a
    look-ahead's hold-back say, keeps its time."""
    if new_can > indexed_can:
        return True
    return indexed_can == moment and new_can != indexed_can
