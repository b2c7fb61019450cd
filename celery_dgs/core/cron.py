"""Cron fire times in a schedule's time zone, DST-correct, as aware UTC datetimes.

Expressions are matched against the *local wall clock* of the zone (croniter
syntax, day-of-month/day-of-week OR-ed when both are restricted, as croniter
and Vixie cron do). Wall-clock times that DST makes special follow Vixie
cron's convention, keyed on the hour field:

* **Fixed-hour expressions** (hour field not starting with ``*``, e.g.
  ``0 2 * * *``, ``30 1 * * *``, ``*/15 2 * * *``):

  - a wall time *skipped* by spring-forward (02:30 in New York on 2026-03-08)
    fires once, at the first real instant after the gap (03:00 EDT); several
    skipped times of the same gap collapse into that one fire;
  - a wall time *repeated* by fall-back (01:30 in New York on 2026-11-01)
    fires once, at its first occurrence (01:30 EDT).

* **Hour-wildcard expressions** (hour field ``*`` or ``*/n``, or every hour
  listed, e.g. ``30 * * * *``) follow real elapsed time: a skipped wall time
  does not fire (nothing is caught up: the next real hour fires as usual) and
  a repeated wall time fires at both of its occurrences, so ``30 * * * *``
  fires once per real hour across either transition.

Vixie cron applies the same split but also counts a ``*`` minute field as a
wildcard; we key on the hour field alone because DST moves hours.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from functools import lru_cache
from itertools import pairwise

from croniter import croniter

from .tz import ensure_utc, get_zone, zone_name

_ONE_MINUTE = timedelta(minutes=1)
_ONE_DAY = timedelta(days=1)
#: Longest fall-back (repeated wall-clock span) we look behind for.
_MAX_FOLD = timedelta(hours=3)
#: Days scanned for a matching date before an expression is declared dead.
_MAX_SCAN_DAYS = 366 * 10
_MAX_STEPS = 10_000
_GAP_SAMPLE = 400
_GAP_SAMPLE_SPAN = timedelta(days=366 * 10)
_GAP_REFERENCE = datetime(2026, 1, 1, tzinfo=timezone.utc)

_PLAIN_FIELD = re.compile(r"^[0-9*,/-]+$")
_NAMES = re.compile(r"jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|sun|mon|tue|wed|thu|fri|sat")


@dataclass(frozen=True)
class _Fields:
    """Expanded 5-field expression for the fast path (``None``: every value)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    doms: frozenset[int] | None
    months: frozenset[int] | None
    dows: frozenset[int] | None  # cron numbering, 0 = Sunday

    def _day_matches(self, day: date) -> bool:
        dom_ok = self.doms is None or day.day in self.doms
        dow_ok = self.dows is None or (day.weekday() + 1) % 7 in self.dows
        if self.doms is not None and self.dows is not None:
            return dom_ok or dow_ok
        return dom_ok and dow_ok

    def _time_from(self, hour: int, minute: int) -> time | None:
        i = bisect_left(self.hours, hour)
        if i < len(self.hours) and self.hours[i] == hour:
            j = bisect_left(self.minutes, minute)
            if j < len(self.minutes):
                return time(hour, self.minutes[j])
            i += 1
        return time(self.hours[i], self.minutes[0]) if i < len(self.hours) else None

    def next_after(self, start: datetime) -> datetime:
        moment = start.replace(second=0, microsecond=0) + _ONE_MINUTE
        day, hour, minute = moment.date(), moment.hour, moment.minute
        for _ in range(_MAX_SCAN_DAYS):
            if self.months is not None and day.month not in self.months:
                year, month = divmod(day.year * 12 + day.month, 12)  # the next month
                day, hour, minute = date(year, month + 1, 1), 0, 0
                continue
            if self._day_matches(day):
                at = self._time_from(hour, minute)
                if at is not None:
                    return datetime.combine(day, at)
            day, hour, minute = day + _ONE_DAY, 0, 0
        raise ValueError("cron expression has no fire time within ten years")


@dataclass(frozen=True)
class _Cron:
    expr: str
    hour_wildcard: bool
    fields: _Fields | None  # None: use croniter (L, W, #, H, aliases, ...)

    def next_naive(self, start: datetime) -> datetime:
        if self.fields is not None:
            return self.fields.next_after(start)
        try:
            result: datetime = croniter(self.expr, start).get_next(datetime)
        except Exception as exc:  # croniter raises its own CroniterBadDateError
            raise ValueError(f"cron expression {self.expr!r} has no next fire time") from exc
        return result


def _values(field: list[int | str], size: int | None) -> frozenset[int] | None:
    """``None`` for ``*`` (or, with ``size``, a list of every value)."""
    if field[0] == "*":
        return None
    values = frozenset(int(v) for v in field)
    return None if size is not None and len(values) >= size else values


@lru_cache(maxsize=8192)
def _parse(expr: str) -> _Cron:
    if not croniter.is_valid(expr):
        raise ValueError(f"{expr!r} is not a valid cron expression")
    expanded, nth = croniter.expand(expr)
    raw = expr.lower().split()
    hours = expanded[1]
    hour_wildcard = hours[0] == "*" or len(set(hours)) >= 24
    hour_wildcard = hour_wildcard or (len(raw) == 5 and raw[1].startswith("*"))
    plain = (
        len(raw) == 5
        and not nth
        and all(_PLAIN_FIELD.match(f) for f in raw[:3])
        and all(_PLAIN_FIELD.match(_NAMES.sub("0", f)) for f in raw[3:])
    )
    if not plain:
        return _Cron(expr, hour_wildcard, None)
    minute_set = _values(expanded[0], 60)
    hour_set = _values(expanded[1], 24)
    # Day fields never collapse: a restricted day-of-month and day-of-week are OR-ed.
    dows = _values([0 if v == 7 else v for v in expanded[4]], None)
    fields = _Fields(
        minutes=tuple(sorted(minute_set)) if minute_set is not None else tuple(range(60)),
        hours=tuple(sorted(hour_set)) if hour_set is not None else tuple(range(24)),
        doms=_values(expanded[2], None),
        months=_values(expanded[3], 12),
        dows=dows,
    )
    return _Cron(expr, hour_wildcard, fields)


def _zone(tz: str | tzinfo) -> tzinfo:
    return get_zone(tz) if isinstance(tz, str) else get_zone(zone_name(tz))


def _transition(zone: tzinfo, before: datetime, after: datetime) -> datetime:
    """The first second, in ``(before, after]``, that has ``after``'s UTC offset."""
    lo, hi = int(before.timestamp()), int(after.timestamp())
    target = after.astimezone(zone).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == target:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, timezone.utc)


def wall_instants(zone: tzinfo, wall: datetime) -> tuple[datetime, datetime]:
    """The UTC instants of naive ``wall`` in ``zone`` as ``(earliest, latest)``.

    Equal for ordinary times; the two occurrences for a repeated (fall-back)
    time; for a time skipped by spring-forward, both are the first instant
    after the gap.
    """
    first = wall.replace(tzinfo=zone, fold=0).astimezone(timezone.utc)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(timezone.utc)
    if first <= second:
        return first, second
    end = _transition(zone, second, first)  # skipped: fold=0 lands after the gap
    return end, end


def _fire_instants(zone: tzinfo, wall: datetime, hour_wildcard: bool) -> tuple[datetime, ...]:
    first = wall.replace(tzinfo=zone, fold=0).astimezone(timezone.utc)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(timezone.utc)
    if first == second:
        return (first,)
    if first < second:  # repeated wall time
        return (first, second) if hour_wildcard else (first,)
    return () if hour_wildcard else (_transition(zone, second, first),)


def next_cron_time(expr: str, tz: str | tzinfo, after: datetime) -> datetime:
    """The first fire time of ``expr`` strictly after ``after``, as aware UTC.

    ``expr`` is read in the wall clock of zone ``tz`` (a name, pytz zone or
    ZoneInfo); DST follows the module's conventions. Raises ``ValueError`` for
    an invalid expression, an unknown zone, a naive ``after`` or an expression
    that never fires (``0 0 30 2 *``).
    """
    cron = _parse(expr)
    zone = _zone(tz)
    after = ensure_utc(after, what="after")
    local = after.astimezone(zone)
    # A fall-back shortly after `after` replays wall times before `local`:
    # look behind by the size of that fold and scan past it.
    offset_now = local.utcoffset()
    offset_later = (after + _MAX_FOLD).astimezone(zone).utcoffset()
    assert offset_now is not None
    assert offset_later is not None
    fold = max(offset_now - offset_later, timedelta(0))
    naive = local.replace(tzinfo=None, fold=0)
    horizon = naive + fold
    wall = naive - fold
    best: datetime | None = None
    for _ in range(_MAX_STEPS):
        wall = cron.next_naive(wall)
        for instant in _fire_instants(zone, wall, cron.hour_wildcard):
            if instant > after and (best is None or instant < best):
                best = instant
        if best is not None and wall >= horizon:
            return best
    raise ValueError(f"cron expression {expr!r} has no fire time after {after}")


@lru_cache(maxsize=4096)
def _shortest_gap(expr: str, zone_key: str) -> timedelta | None:
    fires = [next_cron_time(expr, zone_key, _GAP_REFERENCE)]
    while len(fires) < _GAP_SAMPLE and fires[-1] - fires[0] < _GAP_SAMPLE_SPAN:
        fires.append(next_cron_time(expr, zone_key, fires[-1]))
    if len(fires) < 2:
        return None
    return min(b - a for a, b in pairwise(fires))


def shortest_cron_gap(expr: str, tz: str | tzinfo) -> timedelta | None:
    """Shortest real time between consecutive fires of ``expr`` in ``tz``.

    Sampled over the first 400 fires (or ten years) after 2026-01-01 UTC, so
    DST-shortened gaps count when the sample spans a transition. ``None`` when
    the expression fires fewer than twice.
    """
    try:
        return _shortest_gap(expr, zone_name(tz))
    except ValueError:
        return None
