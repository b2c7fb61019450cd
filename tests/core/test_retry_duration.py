"""The retry delay after a failure takes account of the failed run's duration
(seed 000, future direction 9): the ladder's step, or the ladder's
``duration_fraction`` of how long the failed run took when that is longer,
capped by the schedule's period."""

from __future__ import annotations

import pickle
from datetime import timedelta

import pytest

from celery_dgs.core import ScheduleStats, start_times
from celery_dgs.core.timing import (
    DEFAULT_RETRY_DURATION_FRACTION,
    DEFAULT_RETRY_LADDER,
    RetryLadder,
    failed_run_duration,
    retry_at,
    retry_cap,
    retry_delay,
    validate_retry_ladder,
)
from celery_dgs.settings import DgsSettings

from .helpers import H, M, cron, good, periodic, utc

S = timedelta(seconds=1)
WEEK = 7 * 24 * H
T0 = utc(2026, 6, 1)


def failed(ran: timedelta, count: int = 1) -> ScheduleStats:
    """A schedule whose last run started at T0 and failed after ``ran``."""
    return ScheduleStats(
        registered_at=T0 - WEEK,
        last_good_start_at=T0 - 24 * H,
        last_good_end_at=T0 - 23 * H,
        last_start_at=T0,
        last_end_at=T0 + ran,
        failure_count=count,
        average_good_duration=H,
    )


def test_a_short_failure_waits_the_ladder_step() -> None:
    # Failed after 5 s: the ladder's 5 minutes, not more.
    assert retry_delay(failed(5 * S)) == 5 * M
    # With a first step of 0 it retries at once.
    at_once = RetryLadder((timedelta(0), H))
    assert retry_delay(failed(5 * S), at_once, WEEK) == 5 * S
    assert retry_at(failed(5 * S), RetryLadder((timedelta(0),), 0.0)) == T0 + 5 * S


def test_a_long_failure_waits_as_long_as_it_ran() -> None:
    # Failed after 12 h: waits 12 h (default fraction 1), not the ladder's 5 min.
    assert DEFAULT_RETRY_DURATION_FRACTION == 1.0
    assert retry_delay(failed(12 * H), DEFAULT_RETRY_LADDER, WEEK) == 12 * H
    assert retry_at(failed(12 * H), DEFAULT_RETRY_LADDER, WEEK) == T0 + 24 * H
    # A later step longer than the duration part wins.
    assert retry_delay(failed(2 * H, count=3), DEFAULT_RETRY_LADDER, WEEK) == 4 * H


@pytest.mark.parametrize(
    ("fraction", "ran", "cap", "delay"),
    [
        (0.5, 12 * H, None, 6 * H),
        (0.0, 12 * H, None, 5 * M),  # 0: seed 000's ladder alone
        (1.0, 12 * H, 8 * H, 8 * H),  # capped by the period
        (2.0, H, None, 2 * H),
        (1.0, 2 * M, None, 5 * M),
    ],
)
def test_the_rule(fraction: float, ran: timedelta, cap: timedelta | None, delay: timedelta) -> None:
    ladder = RetryLadder(DEFAULT_RETRY_LADDER, fraction)
    assert retry_delay(failed(ran), ladder, cap) == delay


def test_no_failure_no_delay_and_a_run_in_progress_counts_zero() -> None:
    assert retry_delay(good(T0, T0 + H)) is None
    running = ScheduleStats(last_start_at=T0 + 2 * H, last_end_at=T0 + H, failure_count=1)
    assert failed_run_duration(running) == timedelta(0)
    assert retry_delay(running) == 5 * M


def test_the_cap_of_each_kind() -> None:
    assert retry_cap(periodic(scheduling_period=WEEK)) == WEEK
    assert retry_cap(cron()) == 6 * H


def test_start_times_use_the_rule_capped_by_the_period() -> None:
    weekly = periodic(scheduling_period=WEEK)
    times = start_times(weekly, failed(12 * H), T0 + 12 * H)
    assert times.can_start_by == T0 + 24 * H
    daily = periodic(scheduling_period=10 * H)
    assert start_times(daily, failed(12 * H), T0 + 12 * H).can_start_by == T0 + 22 * H
    nightly = cron()  # cron_max_schedule_duration 6 h caps the wait
    assert start_times(nightly, failed(12 * H), T0 + 12 * H).can_start_by == T0 + 18 * H


def test_ladders_carry_their_fraction() -> None:
    ladder = validate_retry_ladder([M, H], 0.25)
    assert isinstance(ladder, RetryLadder)
    assert ladder == (M, H)
    assert ladder.duration_fraction == 0.25
    copy = pickle.loads(pickle.dumps(ladder))
    assert copy == ladder
    assert copy.duration_fraction == 0.25
    with pytest.raises(ValueError, match="fraction"):
        RetryLadder((M,), -1.0)
    settings = DgsSettings(retry_duration_fraction=0.5)
    assert getattr(settings.retry_ladder, "duration_fraction", None) == 0.5
    # A plain sequence of steps gets the default fraction.
    assert retry_delay(failed(12 * H), (M,)) == 12 * H


def test_status_shows_the_wait_and_why() -> None:
    from celery_dgs.status.holds import backoff_hold

    weekly = periodic(scheduling_period=WEEK)
    hold = backoff_hold("scrape", weekly, failed(12 * H), T0 + 13 * H, DEFAULT_RETRY_LADDER)
    assert hold is not None
    assert (hold.until, hold.retry_delay, hold.retry_step) == (T0 + 24 * H, 12 * H, 1)
    assert "as long as the failed run's 12h" in hold.message
    short = backoff_hold("scrape", weekly, failed(5 * S), T0 + M, DEFAULT_RETRY_LADDER)
    assert short is not None
    assert short.retry_delay == 5 * M
    assert "failed run" not in short.message
