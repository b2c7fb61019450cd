"""start_times / error_at / retry_at / expected_duration: every seed formula."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from celery_dgs.core import (
    DEFAULT_RETRY_LADDER,
    ScheduleStats,
    StartTimes,
    error_at,
    expected_duration,
    retry_at,
    start_margin,
    start_times,
    validate_retry_ladder,
)

from .helpers import H, M, cron, good, periodic, utc

T10, T11 = utc(2026, 6, 1, 10), utc(2026, 6, 1, 11)


def fail(stats: ScheduleStats, count: int, end: object) -> ScheduleStats:
    # A failed run that ended as it started: its retry waits the ladder step alone.
    return dataclasses.replace(stats, failure_count=count, last_start_at=end, last_end_at=end)


# --- expected_duration ---


def test_expected_duration_prefers_override_then_average_then_zero() -> None:
    stats = good(T10, T11)
    assert expected_duration(periodic(), stats) == H
    assert expected_duration(periodic(duration_override=3 * H), stats) == 3 * H
    assert expected_duration(periodic(), ScheduleStats()) == timedelta(0)


# --- periodic (seed: can = last_good_end + cooldown; should = last_good_start + period - avg) ---


def test_periodic_start_times() -> None:
    spec = periodic(cooldown_duration=H)
    times = start_times(spec, good(T10, T11), T11)
    assert times == StartTimes(can_start_by=utc(2026, 6, 1, 12), should_start_by=utc(2026, 6, 2, 9))
    assert error_at(spec, good(T10, T11)) == utc(2026, 6, 2, 10)


def test_periodic_should_start_uses_duration_override() -> None:
    spec = periodic(duration_override=3 * H)
    assert start_times(spec, good(T10, T11), T11).should_start_by == utc(2026, 6, 2, 7)


def test_periodic_without_average_should_start_is_the_deadline() -> None:
    stats = dataclasses.replace(good(T10, T11), average_good_duration=None)
    assert start_times(periodic(), stats, T11).should_start_by == utc(2026, 6, 2, 10)


def test_should_start_leaves_room_for_the_deviation_error_at_does_not_move() -> None:
    # avg 1 h, deviation 5 min: should = deadline - (1 h + 4 * 5 min) = deadline - 80 min.
    stats = good(T10, T11, duration_deviation=5 * M)
    spec = periodic()
    assert start_margin(spec, stats) == H + 20 * M
    assert start_times(spec, stats, T11).should_start_by == utc(2026, 6, 2, 8, 40)
    assert error_at(spec, stats) == utc(2026, 6, 2, 10)  # ERROR stays seed 000's
    cron_times = start_times(cron(), good(T10, T11, duration_deviation=5 * M), T11)
    assert cron_times.should_start_by == utc(2026, 6, 2, 6) - H - 20 * M


def test_deviation_is_ignored_with_an_override_or_without_an_average() -> None:
    stats = good(T10, T11, duration_deviation=5 * M)
    assert start_margin(periodic(duration_override=3 * H), stats) == 3 * H
    no_avg = dataclasses.replace(stats, average_good_duration=None)
    assert start_times(periodic(), no_avg, T11).should_start_by == utc(2026, 6, 2, 10)


# --- cron (seed: can = next_cron(last_good_start); should = can + max_duration - avg) ---


def test_cron_start_times() -> None:
    spec = cron("0 0 * * *")
    stats = good(utc(2026, 6, 1, 0, 5), utc(2026, 6, 1, 1, 5))
    times = start_times(spec, stats, utc(2026, 6, 1, 2))
    assert times.can_start_by == utc(2026, 6, 2)
    assert times.should_start_by == utc(2026, 6, 2, 5)  # 00:00 + 6 h - 1 h
    assert error_at(spec, stats) == utc(2026, 6, 2, 6)


def test_cron_start_times_in_zone() -> None:
    spec = cron("0 0 * * *", tz="America/New_York")
    stats = good(utc(2026, 6, 1, 4, 5), utc(2026, 6, 1, 5, 5))
    times = start_times(spec, stats, utc(2026, 6, 1, 6))
    assert times.can_start_by == utc(2026, 6, 2, 4)
    assert error_at(spec, stats) == utc(2026, 6, 2, 10)


def test_cron_late_run_moves_to_the_next_fire() -> None:
    # started late (05:00 for the 00:00 fire): the next obligation is tomorrow's
    spec = cron("0 0 * * *")
    stats = good(utc(2026, 6, 1, 5), utc(2026, 6, 1, 6))
    assert start_times(spec, stats, utc(2026, 6, 1, 7)).can_start_by == utc(2026, 6, 2)


# --- retrying: 1 -> 5 min, 2 -> 1 h, 3+ -> 4 h after last_end_at ---


@pytest.mark.parametrize(
    ("count", "delay"),
    [(1, 5 * M), (2, H), (3, 4 * H), (4, 4 * H), (50, 4 * H)],
)
def test_retry_ladder(count: int, delay: timedelta) -> None:
    end = utc(2026, 6, 1, 13)
    stats = fail(good(T10, T11), count, end)
    assert retry_at(stats) == end + delay
    times = start_times(periodic(cooldown_duration=H), stats, end)
    assert times.can_start_by == end + delay  # later than last_good_end + cooldown (12:00)
    assert times.should_start_by == utc(2026, 6, 2, 9)  # unaffected


def test_retry_earlier_than_can_start_by_does_not_move_it() -> None:
    stats = fail(good(T10, T11), 1, utc(2026, 6, 1, 11, 10))  # retry 11:15 < 12:00
    times = start_times(periodic(cooldown_duration=H), stats, T11)
    assert times.can_start_by == utc(2026, 6, 1, 12)


def test_retry_at_none_without_failures() -> None:
    assert retry_at(good(T10, T11)) is None
    assert retry_at(ScheduleStats()) is None
    assert retry_at(ScheduleStats(failure_count=2)) is None  # no end time known


def test_configurable_ladder() -> None:
    ladder = (M, 2 * M)
    end = utc(2026, 6, 1, 13)
    assert retry_at(fail(good(T10, T11), 1, end), ladder) == end + M
    assert retry_at(fail(good(T10, T11), 5, end), ladder) == end + 2 * M
    stats = fail(good(T10, T11), 1, end)
    assert start_times(periodic(), stats, end, retry_ladder=ladder).can_start_by == end + M


def test_validate_retry_ladder() -> None:
    assert validate_retry_ladder(list(DEFAULT_RETRY_LADDER)) == DEFAULT_RETRY_LADDER
    for bad in [(), (H, M), (-M,)]:
        with pytest.raises(ValueError, match="ladder"):
            validate_retry_ladder(bad)


def test_cron_backoff() -> None:
    spec = cron("*/10 * * * *")
    stats = fail(good(utc(2026, 6, 1, 0), utc(2026, 6, 1, 0, 1)), 2, utc(2026, 6, 1, 0, 30))
    assert start_times(spec, stats, utc(2026, 6, 1, 0, 30)).can_start_by == utc(2026, 6, 1, 1, 30)


# --- never succeeded ---


def test_never_succeeded_periodic_is_runnable_at_once() -> None:
    reg = utc(2026, 6, 1, 9)
    stats = ScheduleStats(registered_at=reg)
    times = start_times(periodic(cooldown_duration=H), stats, reg + M)
    assert times == StartTimes(can_start_by=reg, should_start_by=reg + 24 * H)
    assert error_at(periodic(), stats) == reg + 24 * H
    override = periodic(duration_override=2 * H)
    assert start_times(override, stats, reg).should_start_by == reg + 22 * H


def test_never_succeeded_periodic_backs_off_after_failures() -> None:
    reg = utc(2026, 6, 1, 9)
    stats = ScheduleStats(registered_at=reg, failure_count=1, last_end_at=reg + 10 * M)
    assert start_times(periodic(), stats, reg + 10 * M).can_start_by == reg + 15 * M
    stats = dataclasses.replace(stats, failure_count=3)
    assert start_times(periodic(), stats, reg + 10 * M).can_start_by == reg + 4 * H + 10 * M


def test_never_succeeded_without_registration_counts_from_now() -> None:
    now = utc(2026, 6, 1, 9)
    times = start_times(periodic(), ScheduleStats(), now)
    assert times == StartTimes(can_start_by=now, should_start_by=now + 24 * H)
    assert error_at(periodic(), ScheduleStats(), now) == now + 24 * H
    with pytest.raises(ValueError, match="registered_at"):
        error_at(periodic(), ScheduleStats())


def test_never_succeeded_cron_waits_for_its_first_fire_time() -> None:
    reg = utc(2026, 6, 1, 10)
    stats = ScheduleStats(registered_at=reg)
    times = start_times(cron("0 0 * * *"), stats, reg)
    assert times.can_start_by == utc(2026, 6, 2)
    assert times.should_start_by == utc(2026, 6, 2, 6)
    assert error_at(cron("0 0 * * *"), stats) == utc(2026, 6, 2, 6)
    failed = ScheduleStats(registered_at=reg, failure_count=1, last_end_at=utc(2026, 6, 2, 0, 10))
    times = start_times(cron(), failed, utc(2026, 6, 2, 0, 10))
    assert times.can_start_by == utc(2026, 6, 2, 0, 15)


# --- blackouts ---

NOON = [("12:00", "14:00")]


def test_can_start_by_in_blackout_moves_to_its_end() -> None:
    spec = periodic(cooldown_duration=H, blackout_periods=NOON)
    times = start_times(spec, good(T10, T11), T11)  # can would be 12:00
    assert times.can_start_by == utc(2026, 6, 1, 14)
    assert times.should_start_by == utc(2026, 6, 2, 9)  # never blackout-adjusted


def test_due_schedule_not_eligible_while_now_is_in_blackout() -> None:
    spec = periodic(blackout_periods=NOON)
    stats = good(utc(2026, 6, 1, 7), utc(2026, 6, 1, 8))  # can = 08:00
    assert start_times(spec, stats, utc(2026, 6, 1, 13)).can_start_by == utc(2026, 6, 1, 14)
    # outside the window a past can_start_by stays as it is
    assert start_times(spec, stats, utc(2026, 6, 1, 15)).can_start_by == utc(2026, 6, 1, 8)
    # a future can_start_by outside any window is not moved because now is in one
    future = periodic(cooldown_duration=4 * H, blackout_periods=NOON)
    times = start_times(future, good(utc(2026, 6, 1, 10), utc(2026, 6, 1, 11)), utc(2026, 6, 1, 13))
    assert times.can_start_by == utc(2026, 6, 1, 15)


def test_blackout_after_backoff() -> None:
    spec = periodic(blackout_periods=NOON)
    stats = fail(good(T10, T11), 2, utc(2026, 6, 1, 11, 30))  # retry 12:30, in the window
    assert start_times(spec, stats, utc(2026, 6, 1, 11, 30)).can_start_by == utc(2026, 6, 1, 14)


def test_cron_fire_inside_blackout() -> None:
    spec = cron("0 13 * * *", blackout_periods=NOON)
    stats = good(utc(2026, 6, 1, 14), utc(2026, 6, 1, 14, 30))
    times = start_times(spec, stats, utc(2026, 6, 1, 15))
    assert times.can_start_by == utc(2026, 6, 2, 14)
    assert times.should_start_by == utc(2026, 6, 2, 13) + 6 * H - 30 * M


def test_blackout_in_schedule_zone_on_dst_day() -> None:
    spec = periodic(blackout_periods=[("01:00", "02:00")], tz="America/New_York")
    stats = good(utc(2026, 10, 31, 4), utc(2026, 10, 31, 5))
    # 01:30 EST (second pass of the repeated hour) is still blacked out
    assert start_times(spec, stats, utc(2026, 11, 1, 6, 30)).can_start_by == utc(2026, 11, 1, 7)


def test_avoid_blackout_overlap_moves_a_start_that_would_run_into_it() -> None:
    spec = periodic(blackout_periods=NOON, avoid_blackout_overlap=True, duration_override=3 * H)
    stats = good(utc(2026, 6, 1, 9), utc(2026, 6, 1, 10))  # can = 10:00
    assert start_times(spec, stats, utc(2026, 6, 1, 9)).can_start_by == utc(2026, 6, 1, 14)
    short = dataclasses.replace(spec, duration_override=H)
    assert start_times(short, stats, utc(2026, 6, 1, 9)).can_start_by == utc(2026, 6, 1, 10)
    # `now` later than can_start_by: the start considered is now
    two = dataclasses.replace(spec, duration_override=2 * H)
    assert start_times(two, stats, utc(2026, 6, 1, 10)).can_start_by == utc(2026, 6, 1, 10)
    assert start_times(two, stats, utc(2026, 6, 1, 11)).can_start_by == utc(2026, 6, 1, 14)


def test_avoid_blackout_overlap_off_by_default() -> None:
    spec = periodic(blackout_periods=NOON, duration_override=3 * H)
    stats = good(utc(2026, 6, 1, 9), utc(2026, 6, 1, 10))
    assert start_times(spec, stats, utc(2026, 6, 1, 9)).can_start_by == utc(2026, 6, 1, 10)


def test_avoid_blackout_overlap_guard_when_it_never_fits() -> None:
    # 23 h expected, gaps between windows are 22 h: moving would mean never running
    spec = periodic(
        scheduling_period=48 * H,
        blackout_periods=NOON,
        avoid_blackout_overlap=True,
        duration_override=23 * H,
    )
    stats = good(utc(2026, 6, 1, 9), utc(2026, 6, 1, 10))
    assert start_times(spec, stats, utc(2026, 6, 1, 9)).can_start_by == utc(2026, 6, 1, 10)


def test_avoid_blackout_overlap_without_known_duration_does_nothing() -> None:
    spec = periodic(blackout_periods=NOON, avoid_blackout_overlap=True)
    stats = dataclasses.replace(good(T10, T11), average_good_duration=None)
    assert start_times(spec, stats, T11).can_start_by == T11
