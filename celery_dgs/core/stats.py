"""Run statistics of one schedule, and the pure functions that record runs (seed 000).

Every datetime is an aware UTC datetime; durations are ``timedelta``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta

from .items import ItemCounts

#: Weight of the latest run in the EWMA of good durations: 75 % of the weight
#: lies on the last three runs (seed 000, "average_good_duration").
DEFAULT_EWMA_ALPHA = 0.37


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleStats:
    """What the store remembers of a schedule's past runs.

    ``registered_at`` is when the schedule was first stored; a schedule that has
    never succeeded counts its deadline from it. ``failure_count`` is the number
    of consecutive failures (``None``: never ran); ``average_good_duration`` is
    the EWMA of successful run durations (``None``: never succeeded);
    ``duration_deviation`` the EWMA of ``|duration - previous average|`` over
    the same runs (TCP's RTTVAR next to SRTT; ``None``: fewer than one
    success recorded with it, read as zero). ``last_items_ok`` and
    ``last_items_failed`` are the item counts the last good or partially
    failed run reported (:mod:`celery_dgs.core.items`); ``None`` after a run
    that reported none or failed outright.
    """

    registered_at: datetime | None = None
    last_good_start_at: datetime | None = None
    last_good_end_at: datetime | None = None
    last_start_at: datetime | None = None
    last_end_at: datetime | None = None
    failure_count: int | None = None
    average_good_duration: timedelta | None = None
    duration_deviation: timedelta | None = None
    interval_index: int | None = None
    next_target_at: datetime | None = None
    upstream_modified_at: datetime | None = None
    last_items_ok: int | None = None
    last_items_failed: int | None = None

    @property
    def has_succeeded(self) -> bool:
        return self.last_good_start_at is not None

    @property
    def last_run_failed(self) -> bool:
        return bool(self.failure_count)

    @property
    def last_items(self) -> ItemCounts | None:
        """The item counts of the last good or partially failed run (``None``: none)."""
        if self.last_items_ok is None or self.last_items_failed is None:
            return None
        return ItemCounts(self.last_items_ok, self.last_items_failed)


def ewma(previous: timedelta | None, latest: timedelta, alpha: float) -> timedelta:
    """``alpha * latest + (1 - alpha) * previous``; the first sample is the average."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"EWMA alpha must be in (0, 1], got {alpha}")
    if previous is None:
        return latest
    return latest * alpha + previous * (1.0 - alpha)


# The recorders build the new stats field by field: dataclasses.replace costs
# several times as much, and they run for every run (the simulator: millions).


def record_start(stats: ScheduleStats, started_at: datetime) -> ScheduleStats:
    """A run started (``last_start_at``)."""
    return ScheduleStats(
        registered_at=stats.registered_at,
        last_good_start_at=stats.last_good_start_at,
        last_good_end_at=stats.last_good_end_at,
        last_start_at=started_at,
        last_end_at=stats.last_end_at,
        failure_count=stats.failure_count,
        average_good_duration=stats.average_good_duration,
        duration_deviation=stats.duration_deviation,
        interval_index=stats.interval_index,
        next_target_at=stats.next_target_at,
        upstream_modified_at=stats.upstream_modified_at,
        last_items_ok=stats.last_items_ok,
        last_items_failed=stats.last_items_failed,
    )


def record_success(
    stats: ScheduleStats,
    started_at: datetime,
    ended_at: datetime,
    *,
    alpha: float = DEFAULT_EWMA_ALPHA,
    duration: timedelta | None = None,
    items: ItemCounts | None = None,
) -> ScheduleStats:
    """A run that started at ``started_at`` succeeded at ``ended_at``.

    ``duration``: how long it ran, as measured on a monotonic clock (a step of
    the wall clock between start and end would otherwise enter the EWMA);
    ``None``: ``ended_at - started_at``. Negative values count as zero.
    ``items``: the item counts it reported (``None``: none)."""
    if duration is None:
        duration = ended_at - started_at
    duration = max(duration, timedelta(0))
    average = stats.average_good_duration
    # The first success says nothing about the spread: its deviation is zero.
    spread = timedelta(0) if average is None else abs(duration - average)
    return ScheduleStats(
        registered_at=stats.registered_at,
        last_good_start_at=started_at,
        last_good_end_at=ended_at,
        last_start_at=_latest(stats.last_start_at, started_at),
        last_end_at=ended_at,
        failure_count=0,
        average_good_duration=ewma(average, duration, alpha),
        duration_deviation=ewma(stats.duration_deviation, spread, alpha),
        interval_index=stats.interval_index,
        next_target_at=stats.next_target_at,
        upstream_modified_at=stats.upstream_modified_at,
        last_items_ok=None if items is None else items.ok,
        last_items_failed=None if items is None else items.failed,
    )


def record_failure(
    stats: ScheduleStats,
    started_at: datetime,
    ended_at: datetime,
    items: ItemCounts | None = None,
) -> ScheduleStats:
    """A run failed (an exception, terminated for max_allowed_duration / blackout,
    or a partial failure: ``items``, its item counts; ``None`` for
    a run that failed outright)."""
    return dataclasses.replace(
        stats,
        last_start_at=_latest(stats.last_start_at, started_at),
        last_end_at=ended_at,
        failure_count=(stats.failure_count or 0) + 1,
        last_items_ok=None if items is None else items.ok,
        last_items_failed=None if items is None else items.failed,
    )


def record_interruption(
    stats: ScheduleStats, started_at: datetime, ended_at: datetime
) -> ScheduleStats:
    """A run ended neither good nor failed: stolen, cancelled by an operator, or
    yielded at shutdown. It counts as a run that ended (``last_end_at``) but does
    not touch ``failure_count`` or the good-run fields."""
    return dataclasses.replace(
        stats,
        last_start_at=_latest(stats.last_start_at, started_at),
        last_end_at=ended_at,
        failure_count=stats.failure_count if stats.failure_count is not None else 0,
    )


def _latest(a: datetime | None, b: datetime) -> datetime:
    return b if a is None or b > a else a
