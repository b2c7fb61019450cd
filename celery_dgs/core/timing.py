"""When a schedule may start, should start, and enters ERROR (seed 000,
"get_schedule_start_times()", "Retrying", "Blackout Periods").

Never-succeeded schedules (``last_good_start_at`` is ``None``) count from
``stats.registered_at`` (from ``now`` when that is unknown too):

* periodic: runnable at once (``can_start_by = registered_at``, the cooldown
  does not apply: there is no good run to cool down from); ERROR at
  ``registered_at + scheduling_period``;
* cron: **not** runnable at once. The first obligation is the first fire time
  after registration, ``next_cron_time(registered_at)``, exactly as if the
  schedule had last succeeded at its registration: cron users expect the job
  at its cron time (a nightly job must not start at noon because it was
  deployed at noon), and deploying many cron schedules does not flood the
  workers. ERROR at that fire time ``+ cron_max_schedule_duration``.

The retry backoff applies to never-succeeded schedules as to the others: it
only looks at ``failure_count``, ``last_end_at`` and the failed run's duration
(:func:`retry_delay`: the ladder's step, or a fraction of how long the failed
run took when that is longer; seed 000, future direction 9).

The default cooldown: seed 000 makes any periodic schedule past
``can_start_by`` eligible, so with free worker slots and a cooldown of 0 a
schedule runs again as soon as its last run ends (a scraper hammers its
upstream). A periodic schedule declared without a cooldown therefore gets
a default cooldown (``dgs_default_cooldown_fraction``,
:data:`DEFAULT_COOLDOWN_FRACTION`; at most :func:`default_cooldown` of its
period); an explicit ``cooldown=0`` keeps the seed's eager rule. Unlike a
declared cooldown, the default one yields to the deadline: it is that
fraction of the time from the run's end to ``should_start_by``, so a run long
for its period is not held until it is late.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import pairwise

from .adaptive import start_times as adaptive_start_times
from .adaptive import target as adaptive_target
from .blackout import blackout_containing, first_fit, move_out_of_blackout
from .cron import next_cron_time
from .cron_cache import CronFireCache
from .spec import AdaptiveSpec, CheckSpec, CronSpec, PeriodicSpec, ScheduleSpec
from .stats import ScheduleStats
from .tz import ensure_utc

#: ``dgs_retry_duration_fraction``: a retry waits at least this fraction of
#: the failed run's duration (a run that failed after 12 hours waits 12 hours,
#: one that failed after 5 seconds only the ladder's step).
DEFAULT_RETRY_DURATION_FRACTION = 1.0


def validate_duration_fraction(fraction: float) -> float:
    """A finite number >= 0, as a float; ``ValueError`` otherwise."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, (int, float))
        or not 0.0 <= fraction < math.inf
    ):
        raise ValueError(f"the retry duration fraction must be a number >= 0, got {fraction!r}")
    return float(fraction)


class RetryLadder(tuple[timedelta, ...]):
    """The retry backoff: the delays after 1, 2, ... consecutive failures (the
    last one repeats), and ``duration_fraction``: the least share of the failed
    run's duration a retry waits (:func:`retry_delay`)."""

    duration_fraction: float

    def __new__(
        cls,
        steps: Iterable[timedelta],
        duration_fraction: float = DEFAULT_RETRY_DURATION_FRACTION,
    ) -> RetryLadder:
        ladder = super().__new__(cls, steps)
        ladder.duration_fraction = validate_duration_fraction(duration_fraction)
        return ladder


def validate_retry_ladder(
    ladder: Sequence[timedelta], duration_fraction: float = DEFAULT_RETRY_DURATION_FRACTION
) -> RetryLadder:
    """A non-empty, non-decreasing sequence of non-negative delays, as a
    :class:`RetryLadder` with ``duration_fraction``.

    Raises ``ValueError`` otherwise (a decreasing ladder would retry a schedule
    that keeps failing *more* eagerly)."""
    steps = tuple(ladder)
    if not steps:
        raise ValueError("retry ladder must have at least one step")
    if any(not isinstance(s, timedelta) or s < timedelta(0) for s in steps):
        raise ValueError(f"retry ladder steps must be non-negative timedeltas, got {steps!r}")
    if any(b < a for a, b in pairwise(steps)):
        raise ValueError(f"retry ladder must be non-decreasing, got {steps!r}")
    return RetryLadder(steps, duration_fraction)


#: Backoff after 1, 2 and 3 or more consecutive failures (seed "Retrying"),
#: at least as long as the failed run (:data:`DEFAULT_RETRY_DURATION_FRACTION`).
DEFAULT_RETRY_LADDER = RetryLadder((timedelta(minutes=5), timedelta(hours=1), timedelta(hours=4)))


#: ``dgs_default_cooldown_fraction``: a periodic schedule declared without a
#: cooldown waits this fraction of the time from its last good end to its
#: ``should_start_by`` (at most this fraction of its period).
#: Chosen from simulator runs (docs/simulator.md, "The default cooldown"): on
#: a fleet at load 0.1 it cuts the runs per schedule from 18 per period to 2
#: (the data is then up to about half a period old), with no ERROR added at
#: loads 0.1-0.9.
DEFAULT_COOLDOWN_FRACTION = 0.5


def validate_cooldown_fraction(fraction: float) -> float:
    """A fraction of the period in ``[0, 1)``, as a float; ``ValueError`` otherwise
    (a cooldown of a whole period or more would put the schedule in ERROR)."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, (int, float))
        or not 0.0 <= fraction < 1.0
    ):
        raise ValueError(f"the cooldown fraction must be a number in [0, 1), got {fraction!r}")
    return float(fraction)


def default_cooldown(period: timedelta, fraction: float = DEFAULT_COOLDOWN_FRACTION) -> timedelta:
    """The ``cooldown_duration`` stored for a periodic schedule that does not set
    one: ``fraction`` of ``period``, in whole microseconds (always shorter than
    the period). It is the most it waits; see :func:`start_times`."""
    return timedelta(microseconds=int(period / timedelta(microseconds=1) * fraction))


def with_default_cooldown(
    spec: PeriodicSpec, fraction: float = DEFAULT_COOLDOWN_FRACTION
) -> PeriodicSpec:
    """``spec`` with its cooldown set to :func:`default_cooldown` of its period
    (for a schedule declared without a cooldown)."""
    return replace(
        spec,
        cooldown_duration=default_cooldown(spec.scheduling_period, fraction),
        default_cooldown=True,
    )


def _default_cooldown_wait(spec: PeriodicSpec, slack: timedelta) -> timedelta:
    """A default cooldown's wait: its fraction (``cooldown_duration / period``) of
    ``slack``, the time from the last good end to ``should_start_by`` (none
    when that is past); at most ``cooldown_duration``."""
    if slack <= timedelta(0):
        return timedelta(0)
    fraction = spec.cooldown_duration / spec.scheduling_period
    return min(spec.cooldown_duration, slack * fraction)


def backoff_exceeding_deadline(
    spec: ScheduleSpec, ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER
) -> timedelta | None:
    """The first retry delay (after one failure) when it makes ERROR certain,
    else ``None``.

    Periodic: a failed run ends after the last good start, so its retry
    (``last_end_at + delay``) starts after ``last_good_start_at + period``, the
    deadline, whenever ``delay >= period``. Cron: a failed run of a fire time
    ends after it, so the retry misses ``fire + within`` whenever ``delay >=
    within``. Adaptive: ``None`` (a failure is retried after the ladder's
    shortest interval, not after this ladder)."""
    if not ladder or isinstance(spec, AdaptiveSpec):
        return None
    first = ladder[0]
    if isinstance(spec, PeriodicSpec):
        limit = spec.scheduling_period
    elif isinstance(spec, CronSpec):
        limit = spec.cron_max_schedule_duration
    else:
        raise TypeError(f"unknown schedule kind {type(spec).__name__}")
    return first if first >= limit else None


@dataclass(frozen=True)
class StartTimes:
    """``can_start_by``: earliest eligible start; ``should_start_by``: latest start
    expected to finish before ERROR (the scheduler's priority key)."""

    can_start_by: datetime
    should_start_by: datetime


def expected_duration(spec: ScheduleSpec, stats: ScheduleStats) -> timedelta:
    """``duration_override``, else ``average_good_duration``, else zero."""
    if spec.duration_override is not None:
        return spec.duration_override
    if stats.average_good_duration is not None:
        return stats.average_good_duration
    return timedelta(0)


#: ``should_start_by`` leaves room for the average run time plus this many
#: times its deviation (TCP's retransmission timeout: SRTT + 4 RTTVAR), so a
#: run started at the target and longer than average still ends on time.
DURATION_DEVIATION_FACTOR = 4.0


def start_margin(spec: ScheduleSpec, stats: ScheduleStats) -> timedelta:
    """How long before ERROR a run should start: ``duration_override`` (taken as
    exact), else ``average_good_duration + DURATION_DEVIATION_FACTOR *
    duration_deviation``, else zero."""
    if spec.duration_override is not None:
        return spec.duration_override
    expected = expected_duration(spec, stats)
    deviation = stats.duration_deviation
    if deviation is None or stats.average_good_duration is None:
        return expected
    return expected + deviation * DURATION_DEVIATION_FACTOR


def _anchor(stats: ScheduleStats, now: datetime | None) -> datetime:
    """The moment the deadline counts from: the last good start, else the
    registration, else ``now``."""
    base = stats.last_good_start_at or stats.registered_at or now
    if base is None:
        raise ValueError("a never-succeeded schedule without registered_at needs `now`")
    return ensure_utc(base, what="deadline anchor")


def _first_start(
    spec: ScheduleSpec,
    stats: ScheduleStats,
    anchor: datetime,
    cron_times: CronFireCache | None = None,
) -> datetime:
    """Periodic: when the cooldown ends; cron: the next fire time."""
    if isinstance(spec, CronSpec):
        if cron_times is not None:
            return cron_times.next_cron_time(spec.cron_schedule, spec.tz, anchor)
        return next_cron_time(spec.cron_schedule, spec.tz, anchor)
    if isinstance(spec, PeriodicSpec):
        if not stats.has_succeeded:
            return anchor
        end = stats.last_good_end_at or anchor
        return ensure_utc(end, what="last_good_end_at") + spec.cooldown_duration
    raise TypeError(f"unknown schedule kind {type(spec).__name__}")


def error_at(spec: ScheduleSpec, stats: ScheduleStats, now: datetime | None = None) -> datetime:
    """The moment the schedule enters ERROR unless a good run completes first.

    Periodic: ``last_good_start_at + scheduling_period``; cron:
    ``next_cron_time(last_good_start_at) + cron_max_schedule_duration``; a
    never-succeeded schedule counts from ``registered_at`` (or ``now``).
    Adaptive: its freshness target (:func:`celery_dgs.core.adaptive.target`).
    """
    if isinstance(spec, CheckSpec):
        return check_time(stats, now) + spec.within
    anchor = _anchor(stats, now)
    if isinstance(spec, AdaptiveSpec):
        return adaptive_target(spec, stats, anchor)
    if isinstance(spec, PeriodicSpec):
        return anchor + spec.scheduling_period
    if isinstance(spec, CronSpec):
        return _first_start(spec, stats, anchor) + spec.cron_max_schedule_duration
    raise TypeError(f"unknown schedule kind {type(spec).__name__}")


def check_time(stats: ScheduleStats, now: datetime | None = None) -> datetime:
    """A deferred check's next time (``next_target_at``); one stored without it
    is due at registration (or ``now``)."""
    return ensure_utc(stats.next_target_at or _anchor(stats, now), what="next_check_at")


def retry_cap(spec: ScheduleSpec) -> timedelta | None:
    """The longest wait a failed run's duration adds to a retry: the period
    (periodic), ``cron_max_schedule_duration`` (cron), ``within`` (a deferred
    check); ``None`` for an adaptive schedule (its retry is its own)."""
    if isinstance(spec, PeriodicSpec):
        return spec.scheduling_period
    if isinstance(spec, CronSpec):
        return spec.cron_max_schedule_duration
    if isinstance(spec, CheckSpec):
        return spec.within
    return None


def failed_run_duration(stats: ScheduleStats) -> timedelta:
    """How long the last run took: ``last_end_at - last_start_at`` (zero when
    either is unknown or a later run has started since)."""
    start, end = stats.last_start_at, stats.last_end_at
    if start is None or end is None or end < start:
        return timedelta(0)
    return end - start


def retry_delay(
    stats: ScheduleStats,
    ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    cap: timedelta | None = None,
) -> timedelta | None:
    """How long after the last failure a schedule may retry: the ladder's step
    for ``failure_count`` (1, 2, ...; the last step repeats), or the ladder's
    ``duration_fraction`` (:data:`DEFAULT_RETRY_DURATION_FRACTION` for a plain
    sequence) of the failed run's duration (:func:`failed_run_duration`), at
    most ``cap``, whichever is longer. ``None`` without failures."""
    if not stats.failure_count or not ladder:
        return None
    step = ladder[min(stats.failure_count, len(ladder)) - 1]
    fraction = getattr(ladder, "duration_fraction", DEFAULT_RETRY_DURATION_FRACTION)
    if not fraction:
        return step
    by_duration = failed_run_duration(stats) * fraction
    if cap is not None:
        by_duration = min(by_duration, cap)
    return max(step, by_duration)


def retry_at(
    stats: ScheduleStats,
    ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    cap: timedelta | None = None,
) -> datetime | None:
    """``last_end_at`` plus :func:`retry_delay`; ``None`` without failures or
    an end time."""
    if stats.last_end_at is None:
        return None
    delay = retry_delay(stats, ladder, cap)
    if delay is None:
        return None
    return ensure_utc(stats.last_end_at, what="last_end_at") + delay


def start_times(
    spec: ScheduleSpec,
    stats: ScheduleStats,
    now: datetime,
    *,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    cron_times: CronFireCache | None = None,
) -> StartTimes:
    """``get_schedule_start_times()`` of seed 000, plus backoff and blackouts.

    ``cron_times`` (optional) remembers cron fire times across calls: the
    result is the same, computed once for many schedules (beat's start-up).

    1. Periodic: ``can = last_good_end_at + cooldown``, ``should =
       last_good_start_at + period - margin``. Cron: ``can =
       next_cron_time(last_good_start_at)``, ``should = can + max_duration -
       margin``. (Never-succeeded: see the module docstring.) ``margin`` is
       :func:`start_margin`: seed 000's ``average_good_duration`` plus
       :data:`DURATION_DEVIATION_FACTOR` deviations, so that run-time variance
       does not turn on-time starts into ERROR. ``error_at`` is unchanged.
       A default cooldown (``spec.default_cooldown``, ``fraction * period``)
       waits that fraction of the slack instead: ``can = last_good_end_at +
       fraction * (should - last_good_end_at)`` (none once ``should`` is past),
       so it always leaves ``1 - fraction`` of the time before ``should`` to
       find a slot, however long the run is for its period. A declared
       cooldown is the seed's: it holds.
       Adaptive (seed 001): :func:`celery_dgs.core.adaptive.start_times`,
       the same margin before its freshness target. Deferred check (seed
       002): ``can = next_check_at`` (after a failure, not before the retry
       ladder's step), ``should = can + within - margin``.
    2. ``can = max(can, retry_at)`` after failures (adaptive: its own retry,
       one minimal interval after the failure, instead of ``retry_ladder``):
       the ladder's step, or a fraction of the failed run's duration when
       that is longer (:func:`retry_delay`, capped by :func:`retry_cap`).
    3. Blackouts move ``can`` only: a ``can`` inside a window moves to its end
       (through touching windows); and if ``can <= now`` while ``now`` is in a
       window, ``can`` becomes that window's end, so a due schedule is not
       eligible during its blackout.
    4. With ``spec.avoid_blackout_overlap``, a start at ``max(can, now)``
       expected to run into the next window moves to the first moment the
       expected duration fits. If it fits in no gap between windows it is
       left alone (it would otherwise never run); the worker then terminates
       it at the window as usual.
    """
    now = ensure_utc(now, what="now")
    anchor = _anchor(stats, now)
    expected = expected_duration(spec, stats)
    margin = start_margin(spec, stats)
    if isinstance(spec, AdaptiveSpec):
        times = adaptive_start_times(spec, stats, anchor, margin)
        can, should = times.can_start_by, times.should_start_by
    elif isinstance(spec, CheckSpec):
        can = check_time(stats, now)
        retry = retry_at(stats, retry_ladder, spec.within)
        if retry is not None:
            can = max(can, retry)
        should = can + spec.within - margin
    else:
        can = _first_start(spec, stats, anchor, cron_times)
        if isinstance(spec, CronSpec):  # error_at(), without a second next_cron_time()
            should = can + spec.cron_max_schedule_duration - margin
        else:
            should = error_at(spec, stats, now) - margin
        if isinstance(spec, PeriodicSpec) and spec.default_cooldown and stats.has_succeeded:
            end = ensure_utc(stats.last_good_end_at or anchor, what="last_good_end_at")
            can = end + _default_cooldown_wait(spec, should - end)
        retry = retry_at(stats, retry_ladder, retry_cap(spec))
        if retry is not None:
            can = max(can, retry)
    blackouts, tz = spec.blackout_periods, spec.tz
    if blackouts:
        can = move_out_of_blackout(blackouts, tz, can)
        if can <= now and blackout_containing(blackouts, tz, now) is not None:
            can = move_out_of_blackout(blackouts, tz, now)
        if spec.avoid_blackout_overlap and expected > timedelta(0):
            start = max(can, now)
            fitted = first_fit(blackouts, tz, start, expected)
            if fitted is not None and fitted > start:
                can = fitted
    return StartTimes(can_start_by=can, should_start_by=should)
