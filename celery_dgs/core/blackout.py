"""Blackout windows: daily local-time spans in which a schedule must not run.

A :class:`~celery_dgs.core.blackout_periods.Blackout` ``start``-``end`` is read in the
schedule's zone every day; ``end <= start`` crosses midnight (``22:00``-``02:00``
runs into the next day). Windows become UTC ``[start, end)`` intervals, and on
DST days they are resolved *conservatively* (the window never shrinks below
the wall-clock span it names):

* a bound skipped by spring-forward (``02:30`` in New York on 2026-03-08)
  becomes the first instant after the gap (03:00 EDT);
* a repeated start (fall-back) takes its first occurrence and a repeated end
  its second one, so ``01:00``-``02:00`` on 2026-11-01 in New York blacks out
  both passes of the 01:00 hour (05:00Z to 07:00Z).

Windows of different blackouts may touch or overlap; the functions here treat
them as one span where that matters (:func:`move_out_of_blackout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta, tzinfo
from functools import lru_cache
from itertools import pairwise

from .blackout_periods import Blackout
from .cron import wall_instants
from .tz import ensure_utc, get_zone, zone_name

Window = tuple[datetime, datetime]

_ONE_DAY = timedelta(days=1)
_HORIZON_DAYS = 5


def _zone(tz: str | tzinfo) -> tzinfo:
    return get_zone(tz) if isinstance(tz, str) else get_zone(zone_name(tz))


@lru_cache(maxsize=65536)
def window_on(blackout: Blackout, zone: tzinfo, day: date) -> Window:
    """The UTC ``[start, end)`` of ``blackout`` starting on local ``day`` (cached:
    beat asks about the same few days for every schedule)."""
    end_day = day if blackout.end > blackout.start else day + _ONE_DAY
    start, _ = wall_instants(zone, datetime.combine(day, blackout.start))
    _, end = wall_instants(zone, datetime.combine(end_day, blackout.end))
    return start, end


def windows_between(
    blackouts: Sequence[Blackout], tz: str | tzinfo, first_day: date, days: int
) -> list[Window]:
    """Every window starting on local days ``first_day .. first_day + days - 1``,
    merged where they touch or overlap, in time order."""
    zone = _zone(tz)
    raw = sorted(
        window_on(b, zone, first_day + timedelta(days=i)) for i in range(days) for b in blackouts
    )
    merged: list[Window] = []
    for start, end in raw:
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _local_day(zone: tzinfo, moment: datetime) -> date:
    return moment.astimezone(zone).date()


def blackout_containing(
    blackouts: Sequence[Blackout], tz: str | tzinfo, t: datetime
) -> Window | None:
    """The UTC ``[start, end)`` of a window containing ``t`` (the one that ends
    last if several do), or ``None`` when ``t`` is outside every window."""
    if not blackouts:
        return None
    t = ensure_utc(t, what="t")
    zone = _zone(tz)
    day = _local_day(zone, t)
    best: Window | None = None
    for offset in (-1, 0, 1):
        for blackout in blackouts:
            start, end = window_on(blackout, zone, day + timedelta(days=offset))
            if start <= t < end and (best is None or end > best[1]):
                best = (start, end)
    return best


def move_out_of_blackout(blackouts: Sequence[Blackout], tz: str | tzinfo, t: datetime) -> datetime:
    """``t`` itself when outside every window, else the end of the window that
    contains it, repeated while that end falls in a touching/overlapping window.

    Blackouts covering the whole day are refused by spec validation; should such
    a list arrive anyway, the search gives up after a few days and returns the
    last window end it reached.
    """
    t = ensure_utc(t, what="t")
    for _ in range(_HORIZON_DAYS * (len(blackouts) + 1)):
        window = blackout_containing(blackouts, tz, t)
        if window is None:
            return t
        t = window[1]
    return t


def next_blackout_start(
    blackouts: Sequence[Blackout], tz: str | tzinfo, after: datetime
) -> datetime | None:
    """The first window start strictly after ``after`` (``None``: no blackouts)."""
    if not blackouts:
        return None
    after = ensure_utc(after, what="after")
    zone = _zone(tz)
    day = _local_day(zone, after)
    starts = [
        window_on(b, zone, day + timedelta(days=offset))[0]
        for offset in (-1, 0, 1, 2)
        for b in blackouts
    ]
    return min((s for s in starts if s > after), default=None)


def longest_free_gap(
    blackouts: Sequence[Blackout], tz: str | tzinfo, around: datetime
) -> timedelta | None:
    """The longest time between two merged windows over the days around
    ``around`` (DST makes it differ by the shift from day to day); ``None``
    without blackouts."""
    if not blackouts:
        return None
    zone = _zone(tz)
    day = _local_day(zone, ensure_utc(around, what="around")) - _ONE_DAY
    return _longest_gap(tuple(blackouts), zone, day)


@lru_cache(maxsize=8192)
def _longest_gap(blackouts: tuple[Blackout, ...], zone: tzinfo, day: date) -> timedelta:
    windows = windows_between(blackouts, zone, day, _HORIZON_DAYS)
    gaps = [b[0] - a[1] for a, b in pairwise(windows)]
    return max(gaps, default=timedelta(0))


def first_fit(
    blackouts: Sequence[Blackout], tz: str | tzinfo, start: datetime, duration: timedelta
) -> datetime | None:
    """The first moment at or after ``start`` from which a run of ``duration``
    ends before the next window starts (touching its start is fine).

    ``None`` when ``duration`` is longer than every free gap between windows:
    such a run never fits, and the caller must decide what to do instead.
    """
    t = move_out_of_blackout(blackouts, tz, start)
    if not blackouts or duration <= timedelta(0):
        return t
    gap = longest_free_gap(blackouts, tz, t)
    if gap is None or duration > gap:
        return None
    for _ in range(_HORIZON_DAYS * (len(blackouts) + 1)):
        upcoming = next_blackout_start(blackouts, tz, t)
        if upcoming is None or t + duration <= upcoming:
            return t
        t = move_out_of_blackout(blackouts, tz, upcoming)
    return None
