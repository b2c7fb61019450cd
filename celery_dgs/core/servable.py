"""Schedules that can never be served: in ERROR at times whatever the capacity.

No number of worker slots helps a schedule whose own fields rule out a run in
time:

* ``duration_at_least_period``: a periodic run of ``duration`` cannot finish
  before its data is ``period`` old;
* ``within_shorter_than_duration``: a cron run cannot finish within
  ``cron_max_schedule_duration`` of its cron time;
* ``no_gap_fits_a_run``: no free time between blackout windows is as long as
  a run (it is terminated at every window);
* ``blackout_longer_than_period``: a periodic schedule's good run before a
  window of length ``B`` must end by the window's start (a run in progress is
  terminated there), and the next one starts at its end and counts once it
  ends, so the data gets ``B + 2 * duration`` old: ERROR when that exceeds
  the period;
* ``cron_times_in_blackout``: cron times in (or just before) a blackout whose
  earliest start (the window's end) is too late to finish within ``within``.

:func:`never_servable` takes the expected run time (``duration_override``
unless given; zero when neither is known, which only finds fewer problems) and
``start``, the first moment to examine; the figures are over ``days`` days
from there (:data:`SAMPLE_DAYS`; a cron schedule's over whole local days from
the midnight that begins ``start``'s day), so weekly cron patterns and DST are
seen.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from functools import lru_cache

from .blackout import first_fit, longest_free_gap, move_out_of_blackout, windows_between
from .blackout_periods import Blackout
from .cron import next_cron_time
from .durations import format_duration
from .spec import AdaptiveSpec, CronSpec, PeriodicSpec, ScheduleSpec
from .tz import ensure_utc, get_zone

#: Days examined from ``start`` (a week: weekday patterns and a DST change).
SAMPLE_DAYS = 7
#: At most this many cron times are examined (a minutely cron: about 2 days).
MAX_CRON_TIMES = 3000
_DAY = timedelta(days=1)


@dataclass(frozen=True)
class Unservable:
    """Why ``schedule`` can never be served: a ``reason`` code, a sentence
    naming the fields (``detail``), and the ERROR it has per day at any capacity."""

    schedule: str
    reason: str
    detail: str
    error_per_day: timedelta

    def __str__(self) -> str:
        return (
            f"schedule {self.schedule!r} can never be served ({self.reason}): {self.detail}; "
            f"in ERROR {self.how_much()} a day at any worker count"
        )

    def how_much(self) -> str:
        """The ERROR a day in words. A blackout's is a floor: it assumes the
        last run before each window ends as the window starts; one that ends
        earlier leaves the data older, up to a period more."""
        if self.reason == "blackout_longer_than_period":
            return f"at least {_human(self.error_per_day)} (up to a period more)"
        return f"about {_human(self.error_per_day)}"


def never_servable(
    spec: ScheduleSpec,
    start: datetime,
    *,
    duration: timedelta | None = None,
    days: int = SAMPLE_DAYS,
) -> Unservable | None:
    """Why ``spec`` is in ERROR at times whatever the capacity, or ``None``."""
    start = ensure_utc(start, what="start")
    if duration is None:
        duration = spec.duration_override or timedelta(0)
    blackouts = spec.blackout_periods
    if blackouts and duration > timedelta(0):
        gap = longest_free_gap(blackouts, spec.tz, start)
        if gap is not None and duration > gap:
            return Unservable(
                spec.name,
                "no_gap_fits_a_run",
                f"a run of {format_duration(duration)} fits in no gap between its blackouts "
                f"({_windows(spec)}; longest gap {format_duration(gap)})",
                _DAY,
            )
    if isinstance(spec, PeriodicSpec):
        return _periodic(spec, start, duration, days)
    if isinstance(spec, CronSpec):
        return _cron(spec, start, duration, days)
    if isinstance(spec, AdaptiveSpec):
        return None  # its interval moves: no fixed period to be too long for
    raise TypeError(f"unknown schedule kind {type(spec).__name__}")


def _periodic(
    spec: PeriodicSpec, start: datetime, duration: timedelta, days: int
) -> Unservable | None:
    period = spec.scheduling_period
    if duration >= period:
        return Unservable(
            spec.name,
            "duration_at_least_period",
            f"a run takes {format_duration(duration)}, its period is {format_duration(period)}",
            _DAY,
        )
    if not spec.blackout_periods:
        return None
    zone = get_zone(spec.tz)
    first_day = start.astimezone(zone).date()
    windows = windows_between(spec.blackout_periods, zone, first_day, days)
    error = timedelta(0)
    longest = timedelta(0)
    for begin, end in windows:
        longest = max(longest, end - begin)
        error += max(timedelta(0), end - begin + 2 * duration - period)
    if error <= timedelta(0):
        return None
    return Unservable(
        spec.name,
        "blackout_longer_than_period",
        f"its blackout ({_windows(spec)}, up to {format_duration(longest)})"
        + (f" plus two runs of {format_duration(duration)}" if duration > timedelta(0) else "")
        + f" is longer than its period ({format_duration(period)})",
        error / days,
    )


def _cron(spec: CronSpec, start: datetime, duration: timedelta, days: int) -> Unservable | None:
    within = spec.cron_max_schedule_duration
    if duration > within:
        return Unservable(
            spec.name,
            "within_shorter_than_duration",
            f"a run takes {format_duration(duration)}, longer than its within "
            f"({format_duration(within)})",
            _cron_error_per_day(spec, start, duration, days)[0],
        )
    if not spec.blackout_periods:
        return None
    error, missed, fires = _cron_error_per_day(spec, start, duration, days)
    if missed == 0:
        return None
    return Unservable(
        spec.name,
        "cron_times_in_blackout",
        f"{_per_day(missed)} of its {_per_day(fires)} cron times a day fall in or just before "
        "a blackout "
        f"({_windows(spec)}) and cannot finish within {format_duration(within)} (within)",
        error,
    )


def _per_day(count: float) -> str:
    """A count a day, averaged over days: ``1,440``, ``57.6``, ``1.86``."""
    if abs(count - round(count)) < 0.005:
        return f"{round(count):,}"
    return f"{count:,.3g}" if count < 100 else f"{count:,.1f}"


def _cron_error_per_day(
    spec: CronSpec, start: datetime, duration: timedelta, days: int
) -> tuple[timedelta, float, float]:
    """See :func:`_cron_error`; computed once per shape of cron fields, over
    whole local days from the midnight that begins ``start``'s day (a sample
    that began inside a blackout would count that day's missed cron times
    once and a part of them again on its last day)."""
    zone = get_zone(spec.tz)
    midnight = datetime.combine(start.astimezone(zone).date(), time(0), tzinfo=zone)
    return _cron_error(
        spec.cron_schedule,
        spec.tz,
        spec.cron_max_schedule_duration,
        spec.blackout_periods,
        spec.avoid_blackout_overlap,
        ensure_utc(midnight, what="sample start"),
        duration,
        days,
    )


#: The run time the cron check assumes at least (none known yet: 0): a start
#: exactly at the end of a cron time's within ends after it.
_SHORTEST_RUN = timedelta(seconds=1)


@lru_cache(maxsize=1024)
def _cron_error(
    expr: str,
    tz: str,
    within: timedelta,
    blackouts: tuple[Blackout, ...],
    avoid_overlap: bool,
    start: datetime,
    duration: timedelta,
    days: int,
) -> tuple[timedelta, float, float]:
    """ERROR per day, and cron times per day that miss and in all, over the sample.

    A cron time ``F`` whose earliest start ``s`` (out of the blackouts; with
    ``avoid_blackout_overlap``, where the run fits) ends after ``F + within``
    is in ERROR over ``[F + within, s + duration]``; the union of those spans
    is the ERROR no capacity removes."""
    end = start + days * _DAY
    spans: list[tuple[datetime, datetime]] = []
    fires = missed = 0
    # a run takes some time: one must start before the end of its within, not at it
    shortest = max(duration, _SHORTEST_RUN)
    t = start - timedelta(microseconds=1)  # a cron time at ``start`` counts
    while fires < MAX_CRON_TIMES:
        fire = next_cron_time(expr, tz, t)
        if fire >= end:
            break
        fires += 1
        begin = move_out_of_blackout(blackouts, tz, fire) if blackouts else fire
        if blackouts and avoid_overlap and duration > timedelta(0):
            begin = first_fit(blackouts, tz, begin, duration) or begin
        if begin + shortest > fire + within:
            missed += 1
            spans.append((fire + within, begin + duration))
        t = fire
    sampled_days = max((min(t, end) - start) / _DAY, 1e-9) if fires >= MAX_CRON_TIMES else days
    error = timedelta(0)
    reached: datetime | None = None
    for a, b in spans:  # in time order already
        if reached is not None and a < reached:
            a = reached
        if b > a:
            error += b - a
        reached = b if reached is None else max(reached, b)
    return error / sampled_days, missed / sampled_days, fires / sampled_days


def _windows(spec: ScheduleSpec) -> str:
    return ", ".join(f"{b.start:%H:%M}-{b.end:%H:%M}" for b in spec.blackout_periods) + (
        f" {spec.tz}"
    )


def _human(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s" if seconds >= 1 or seconds == 0 else f"{seconds:.2g} s"
