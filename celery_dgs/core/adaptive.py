"""Adaptive revisit intervals (seed 001): the interval ladder and what a run's
end does to it. Pure functions; the clock is always an argument.

An adaptive schedule is dispatched like a periodic one whose period is its
current interval: ``celery_dgs.core.timing`` computes its start times and
ERROR time from the values here, so conditions, margins and the dispatch
order are those of every other schedule.

* **The ladder.** Index 0-1: one ``interval_unit``; 2-4: two; ``n >= 5``:
  ``4**(n - 4)`` (4, 16, 64, 256, 1024, 4096 at the top, index 10). A new
  schedule starts at ``initial_interval_index`` (4 by default).
* **A good run** moves the index: eventful ``-2``, uneventful ``+1``, a run
  that reported nothing leaves it where it is (``None``); clamped to
  ``[0, 10]``. The next target is the run's start plus the new interval times
  a fudge factor in ``[0.9, 1.1]``, a hash of the schedule's name and the run
  (its fencing token), so runs of many schedules spread out, and the same
  schedule and run always get the same factor.
* **A failed run** changes neither the index nor the target (the data is as
  old as the last good run); the schedule may run again one minimal interval
  (``ladder_interval(0)``) after the failure. ``max_failures`` consecutive
  failures disable it, with a reason, until the runtime API upserts it again.
* **An interrupted run** (stolen, cancelled, yielded, self-fenced) changes
  nothing here.
* **Upstream hints.** A source whose lister reports a change after its last
  good run start is due at once, with its target pulled in to one minimal
  interval after the change (if that is earlier).
* **Never succeeded.** Due at once, with the minimal interval from its
  registration as target: so new schedules are ahead of most others, and
  among themselves the oldest goes first.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from .spec import MAX_INTERVAL_INDEX, AdaptiveSpec
from .stats import ScheduleStats
from .tz import ensure_utc

#: The lowest index of the ladder.
MIN_INTERVAL_INDEX = 0
#: Index change after a good run that reported changes.
EVENTFUL_STEP = -2
#: Index change after a good run that reported none.
UNEVENTFUL_STEP = 1
#: The fudge factor is drawn from ``[1 - FUDGE, 1 + FUDGE]``.
FUDGE = 0.1
#: A schedule becomes eligible this fraction of its interval before its
#: ``should_start_by`` (so idle workers take it a little early, never much).
EARLY_FRACTION = 0.1


def interval_units(index: int) -> int:
    """How many units the ladder's step ``index`` is (clamped to the ladder)."""
    index = clamp_index(index)
    if index <= 1:
        return 1
    if index <= 4:
        return 2
    return int(4 ** (index - 4))


def ladder_interval(index: int, unit: timedelta) -> timedelta:
    """The interval of step ``index`` with ``unit``."""
    return unit * interval_units(index)


def clamp_index(index: int) -> int:
    return max(MIN_INTERVAL_INDEX, min(MAX_INTERVAL_INDEX, index))


def next_index(index: int, eventful: bool | None) -> int:
    """The index after a good run: ``eventful`` True ``-2``, False ``+1``,
    ``None`` (the run said nothing) unchanged; clamped to the ladder."""
    if eventful is None:
        return clamp_index(index)
    return clamp_index(index + (EVENTFUL_STEP if eventful else UNEVENTFUL_STEP))


def fudge_factor(name: str, run_key: int) -> float:
    """A factor in ``[1 - FUDGE, 1 + FUDGE]``, the same for the same schedule
    and run (``run_key``: the run's fencing token), spread evenly over them."""
    digest = hashlib.blake2b(f"{name}\0{run_key}".encode(), digest_size=8).digest()
    unit = int.from_bytes(digest, "big") / float(2**64 - 1)
    return 1.0 - FUDGE + 2.0 * FUDGE * unit


def current_index(spec: AdaptiveSpec, stats: ScheduleStats) -> int:
    """The schedule's ladder index: the stored one, else the spec's initial one."""
    if stats.interval_index is None:
        return spec.initial_interval_index
    return clamp_index(stats.interval_index)


def current_interval(spec: AdaptiveSpec, stats: ScheduleStats) -> timedelta:
    return ladder_interval(current_index(spec, stats), spec.interval_unit)


def after_good_run(
    spec: AdaptiveSpec,
    stats: ScheduleStats,
    started_at: datetime,
    eventful: bool | None,
    run_key: int,
) -> ScheduleStats:
    """``stats`` (already recording the good run) with the new index and next
    target: ``started_at + interval(new index) * fudge_factor(name, run_key)``."""
    index = next_index(current_index(spec, stats), eventful)
    interval = ladder_interval(index, spec.interval_unit) * fudge_factor(spec.name, run_key)
    target = ensure_utc(started_at, what="started_at") + interval
    return replace(stats, interval_index=index, next_target_at=target)


def disabled_reason(spec: AdaptiveSpec, stats: ScheduleStats) -> str | None:
    """Why the schedule is disabled after a run that left ``stats``: its
    consecutive failures reached ``max_failures``; ``None`` otherwise."""
    failures = stats.failure_count or 0
    if failures < spec.max_failures:
        return None
    return (
        f"{spec.name}: {failures} consecutive failures (max_failures {spec.max_failures}); "
        "disabled until the runtime API upserts it again"
    )


def upstream_changed(stats: ScheduleStats) -> bool:
    """Whether the lister reported a change after the last good run started
    (always, for a schedule that never succeeded and has a hint)."""
    hint = stats.upstream_modified_at
    if hint is None:
        return False
    last = stats.last_good_start_at
    return last is None or ensure_utc(hint, what="upstream_modified_at") > ensure_utc(
        last, what="last_good_start_at"
    )


def target(spec: AdaptiveSpec, stats: ScheduleStats, anchor: datetime) -> datetime:
    """The freshness target, the schedule's ERROR time: the next target of the
    last good run (its start plus the current interval when none is stored),
    or, never succeeded, ``anchor`` (the registration) plus the minimal
    interval; pulled in to one minimal interval after an upstream change."""
    shortest = ladder_interval(MIN_INTERVAL_INDEX, spec.interval_unit)
    if stats.last_good_start_at is None:
        return anchor + shortest
    if stats.next_target_at is not None:
        goal = ensure_utc(stats.next_target_at, what="next_target_at")
    else:
        goal = ensure_utc(stats.last_good_start_at, what="last_good_start_at") + current_interval(
            spec, stats
        )
    if upstream_changed(stats):
        assert stats.upstream_modified_at is not None
        goal = min(
            goal, ensure_utc(stats.upstream_modified_at, what="upstream_modified_at") + shortest
        )
    return goal


@dataclass(frozen=True)
class AdaptiveTimes:
    """``can_start_by`` and ``should_start_by`` of an adaptive schedule, before blackouts."""

    can_start_by: datetime
    should_start_by: datetime


def start_times(
    spec: AdaptiveSpec, stats: ScheduleStats, anchor: datetime, margin: timedelta
) -> AdaptiveTimes:
    """``should = target - margin``. ``can``: never succeeded, ``anchor`` (at
    once); after a good run, ``EARLY_FRACTION`` of the interval before
    ``should`` (not before the run's end); upstream changed since, the good
    run's end (at once); after a failure, one minimal interval after it."""
    goal = target(spec, stats, anchor)
    should = goal - margin
    if stats.last_good_start_at is None:
        can = anchor
    else:
        end = ensure_utc(
            stats.last_good_end_at or stats.last_good_start_at, what="last_good_end_at"
        )
        can = (
            end
            if upstream_changed(stats)
            else max(end, should - current_interval(spec, stats) * EARLY_FRACTION)
        )
    if stats.failure_count and stats.last_end_at is not None:
        shortest = ladder_interval(MIN_INTERVAL_INDEX, spec.interval_unit)
        can = ensure_utc(stats.last_end_at, what="last_end_at") + shortest
    return AdaptiveTimes(can, should)
