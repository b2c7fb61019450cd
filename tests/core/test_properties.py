"""Hypothesis properties of the core (modest example counts: the suite stays fast)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from celery_dgs.core import (
    DEFAULT_RETRY_LADDER,
    CronSpec,
    Level,
    PeriodicSpec,
    RunningState,
    ScheduleSpec,
    ScheduleStats,
    blackout_containing,
    condition,
    error_at,
    ewma,
    next_cron_time,
    retry_at,
    start_times,
)
from celery_dgs.errors import ScheduleConfigError

from .helpers import UTC, H, M, utc

SETTINGS = settings(max_examples=200, deadline=None)
ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"]
# 2026 transitions of the DST zones above (UTC instants), to sample near them.
TRANSITIONS = [
    utc(2026, 3, 8, 7),
    utc(2026, 11, 1, 6),
    utc(2026, 3, 29, 1),
    utc(2026, 10, 25, 1),
    utc(2026, 4, 4, 15),
    utc(2026, 10, 3, 16),
]

moments = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
)
near_transition = st.builds(
    lambda t, minutes: t + timedelta(minutes=minutes),
    st.sampled_from(TRANSITIONS),
    st.integers(min_value=-6 * 60, max_value=6 * 60),
)
expressions = st.builds(
    lambda *fields: " ".join(fields),
    st.sampled_from(["0", "30", "*/15", "5,35", "*", "59"]),
    st.sampled_from(["*", "1", "2", "*/4", "0-5", "1,13", "23"]),
    st.sampled_from(["*", "1", "13", "*/10", "31"]),
    st.sampled_from(["*", "1-6", "3,11", "feb"]),
    st.sampled_from(["*", "1-5", "0", "fri", "6"]),
).filter(lambda e: not e.endswith(" 31 feb *"))  # never fires


@SETTINGS
@given(expressions, st.one_of(moments, near_transition))
def test_cron_in_utc_matches_croniter(expr: str, after: datetime) -> None:
    expected = croniter(expr, after.replace(tzinfo=None)).get_next(datetime)
    assert next_cron_time(expr, "UTC", after) == expected.replace(tzinfo=UTC)


@SETTINGS
@given(expressions, st.sampled_from(ZONES), st.one_of(moments, near_transition))
def test_next_cron_time_is_a_later_fire_time(expr: str, tz: str, after: datetime) -> None:
    result = next_cron_time(expr, tz, after)
    assert result > after
    assert result.utcoffset() == timedelta(0)
    zone = ZoneInfo(tz)
    wall = result.astimezone(zone).replace(tzinfo=None)
    at_gap_end = (result - timedelta(seconds=1)).astimezone(zone).utcoffset() != (
        result.astimezone(zone).utcoffset()
    )
    assert croniter.match(expr, wall) or at_gap_end


def _oracle(expr: str, tz: str, after: datetime) -> datetime:
    """Minute-by-minute reference for hour-wildcard expressions: real time, i.e.
    every real minute whose wall time matches fires (skipped ones do not)."""
    zone = ZoneInfo(tz)
    t = after.replace(second=0, microsecond=0) + M
    while not croniter.match(expr, t.astimezone(zone).replace(tzinfo=None)):
        t += M
    return t


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["*/15 * * * *", "30 * * * *", "0 * * * *", "*/20 */2 * * *", "45 * * * *"]),
    st.sampled_from(ZONES),
    near_transition,
)
def test_hour_wildcard_follows_real_time(expr: str, tz: str, after: datetime) -> None:
    assert next_cron_time(expr, tz, after) == _oracle(expr, tz, after)


# --- schedules ---

clock_times = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))
blackout_lists = st.lists(st.tuples(clock_times, clock_times), min_size=0, max_size=3)
durations = st.integers(min_value=1, max_value=48 * 60).map(lambda m: timedelta(minutes=m))


@st.composite
def schedules(draw: st.DrawFn) -> tuple[ScheduleSpec, ScheduleStats, datetime]:
    tz = draw(st.sampled_from(ZONES))
    common = {
        "task": "prop",
        "tz": tz,
        "avoid_blackout_overlap": draw(st.booleans()),
        "duration_override": draw(st.none() | durations),
    }
    try:
        common["blackout_periods"] = draw(blackout_lists)
        if draw(st.booleans()):
            spec: ScheduleSpec = CronSpec(
                cron_schedule=draw(expressions),
                cron_max_schedule_duration=draw(durations),
                **common,
            )
        else:
            period = draw(durations) + H
            cooldown = draw(st.integers(0, 59)) * M
            spec = PeriodicSpec(scheduling_period=period, cooldown_duration=cooldown, **common)
    except ScheduleConfigError:
        assume(False)
        raise
    base = draw(st.one_of(moments, near_transition))
    if draw(st.booleans()):
        stats = ScheduleStats(registered_at=base)
    else:
        run = draw(durations)
        stats = ScheduleStats(
            registered_at=base - 100 * H,
            last_good_start_at=base,
            last_good_end_at=base + run,
            last_start_at=base,
            last_end_at=base + run,
            failure_count=0,
            average_good_duration=run,
        )
    failures = draw(st.integers(0, 4))
    if failures:
        end = base + draw(durations)
        stats = dataclasses.replace(stats, failure_count=failures, last_end_at=end)
    now = base + draw(st.integers(-60, 72 * 60)) * M
    return spec, stats, now


@SETTINGS
@given(schedules())
def test_can_start_by_never_falls_inside_a_blackout(
    case: tuple[ScheduleSpec, ScheduleStats, datetime],
) -> None:
    spec, stats, now = case
    times = start_times(spec, stats, now)
    assert blackout_containing(spec.blackout_periods, spec.tz, times.can_start_by) is None
    if times.can_start_by <= now:  # eligible now: now is not in a blackout either
        assert blackout_containing(spec.blackout_periods, spec.tz, now) is None


@SETTINGS
@given(schedules(), st.none() | st.integers(0, 48 * 60))
def test_error_exactly_when_now_is_past_error_at(
    case: tuple[ScheduleSpec, ScheduleStats, datetime], running_for: int | None
) -> None:
    spec, stats, now = case
    running = None if running_for is None else RunningState(now - running_for * M)
    result = condition(spec, stats, running, now)
    deadline = error_at(spec, stats, now)
    assert (result.level is Level.ERROR) == (now > deadline)
    assert result.error_at == deadline


@SETTINGS
@given(schedules(), durations)
def test_warning_comes_before_error(
    case: tuple[ScheduleSpec, ScheduleStats, datetime], average: timedelta
) -> None:
    spec, stats, _ = case
    stats = dataclasses.replace(stats, average_good_duration=average, failure_count=0)
    deadline = error_at(spec, stats, stats.registered_at)
    expected = spec.duration_override or average
    for moment in (deadline, deadline - expected / 2):
        assert condition(spec, stats, None, moment).level is Level.WARNING
    assert condition(spec, stats, None, deadline + timedelta(microseconds=1)).level is Level.ERROR


@SETTINGS
@given(st.lists(st.integers(min_value=0, max_value=10**11), min_size=1, max_size=30))
def test_ewma_stays_between_min_and_max(samples: list[int]) -> None:
    runs = [timedelta(microseconds=s) for s in samples]
    average: timedelta | None = None
    for run in runs:
        average = ewma(average, run, 0.37)
        assert min(runs) <= average <= max(runs)


ladders = st.lists(durations, min_size=1, max_size=5).map(lambda xs: tuple(sorted(xs)))


@SETTINGS
@given(st.one_of(st.just(DEFAULT_RETRY_LADDER), ladders), moments, st.integers(1, 20))
def test_backoff_is_monotone_in_failure_count(
    ladder: tuple[timedelta, ...], end: datetime, count: int
) -> None:
    def backoff(n: int) -> timedelta:
        at = retry_at(ScheduleStats(failure_count=n, last_end_at=end), ladder)
        assert at is not None
        return at - end

    assert timedelta(0) <= backoff(count) <= backoff(count + 1)
