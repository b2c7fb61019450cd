"""``record_success`` takes the run's duration as measured (a monotonic clock),
not the difference of two wall-clock readings a clock step may have moved."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from celery_dgs.core.stats import ScheduleStats, record_success

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
TEN = timedelta(seconds=10)


def test_a_forward_step_of_the_wall_clock_does_not_lengthen_the_average() -> None:
    # A 10 s run; the wall clock stepped 3.5 s forward meanwhile.
    stats = record_success(ScheduleStats(), T0, T0 + timedelta(seconds=13.5), duration=TEN)
    assert stats.average_good_duration == TEN
    assert stats.last_good_end_at == T0 + timedelta(seconds=13.5)  # the stamps are kept


def test_a_backward_step_does_not_make_the_run_last_zero_seconds() -> None:
    previous = record_success(ScheduleStats(), T0, T0 + TEN)
    stats = record_success(
        previous, T0 + timedelta(minutes=5), T0 + timedelta(minutes=5, seconds=-20), duration=TEN
    )
    assert stats.average_good_duration == TEN
    assert stats.duration_deviation == timedelta(0)


def test_without_a_measured_duration_the_stamps_give_it() -> None:
    stats = record_success(ScheduleStats(), T0, T0 + TEN)
    assert stats.average_good_duration == TEN
    negative = record_success(ScheduleStats(), T0, T0 - TEN)
    assert negative.average_good_duration == timedelta(0)
    assert record_success(ScheduleStats(), T0, T0, duration=-TEN).average_good_duration == (
        timedelta(0)
    )
