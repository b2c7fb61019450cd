"""Schedules no capacity can serve: named with the reason and the ERROR per day."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.core.advice import schedule_advice
from celery_dgs.core.servable import never_servable
from tests.core.helpers import H, M, cron, periodic, utc

NOW = utc(2026, 11, 24, 4)
LUNCH = [("12:00", "13:00")]


def test_cron_times_inside_a_blackout_are_in_error_about_56_minutes_a_day() -> None:
    # The demo's former cron: every 5 minutes, 4 minutes to finish, no run over lunch
    # in New York. The 12:00 deadline passes at 12:04 and the next run can only
    # start at 13:00.
    spec = cron(
        "*/5 * * * *",
        task="example.nightly_report",
        tz="America/New_York",
        cron_max_schedule_duration=4 * M,
        blackout_periods=LUNCH,
    )
    problem = never_servable(spec, NOW, duration=timedelta(seconds=10))
    assert problem is not None
    assert problem.reason == "cron_times_in_blackout"
    assert abs(problem.error_per_day - (56 * M + timedelta(seconds=10))) < timedelta(seconds=1)
    text = str(problem)
    assert "'example.nightly_report' can never be served (cron_times_in_blackout)" in text
    assert "12 of its 288 cron times a day" in text
    assert "12:00-13:00 America/New_York" in text
    assert "in ERROR about 56 min a day at any worker count" in text


@pytest.mark.parametrize("hour_utc", [4, 17, 17.6, 23])  # 17:35 UTC is 12:35 in New York
def test_the_cron_figures_do_not_depend_on_the_time_of_day_they_are_computed_at(
    hour_utc: float,
) -> None:
    spec = cron(
        "*/5 * * * *",
        tz="America/New_York",
        cron_max_schedule_duration=4 * M,
        blackout_periods=LUNCH,
    )
    start = utc(2026, 11, 24) + timedelta(hours=hour_utc)
    problem = never_servable(spec, start)
    assert problem is not None
    assert problem.error_per_day == 56 * M
    assert "12 of its 288 cron times a day" in str(problem)


def test_cron_that_skips_its_blackout_is_servable() -> None:
    spec = cron(
        "*/5 0-11,13-23 * * *",
        tz="America/New_York",
        cron_max_schedule_duration=4 * M,
        blackout_periods=LUNCH,
    )
    assert never_servable(spec, NOW, duration=timedelta(seconds=10)) is None
    assert never_servable(cron(), NOW) is None


def test_cron_within_shorter_than_the_run() -> None:
    spec = cron("0 * * * *", cron_max_schedule_duration=4 * M)
    problem = never_servable(spec, NOW, duration=5 * M)
    assert problem is not None
    assert problem.reason == "within_shorter_than_duration"
    assert problem.error_per_day == 24 * M  # one minute late every hour
    assert never_servable(spec, NOW, duration=4 * M) is None


def test_periodic_blackout_longer_than_the_period() -> None:
    # A run before the window must end at its start, the next starts at its end:
    # the data gets window + 2 runs old.
    spec = periodic(scheduling_period=H, blackout_periods=[("12:00", "12:50")])
    assert never_servable(spec, NOW) is None
    problem = never_servable(spec, NOW, duration=6 * M)
    assert problem is not None
    assert problem.reason == "blackout_longer_than_period"
    assert problem.error_per_day == 2 * M
    assert "plus two runs of 6m is longer than its period (1h)" in problem.detail
    # The figure assumes the last run before the window ends as it starts: a floor.
    assert str(problem).endswith(
        "in ERROR at least 2 min (up to a period more) a day at any worker count"
    )
    hour = periodic(scheduling_period=H, blackout_periods=[("12:00", "13:00")])
    tiny = never_servable(hour, NOW, duration=timedelta(seconds=0.1))
    assert tiny is not None
    assert "in ERROR at least 0.2 s (up to a period more) a day" in str(tiny)


def test_periodic_run_as_long_as_its_period_and_a_run_that_fits_no_gap() -> None:
    problem = never_servable(periodic(scheduling_period=2 * M, duration_override=2 * M), NOW)
    assert problem is not None
    assert problem.reason == "duration_at_least_period"
    gaps = periodic(
        scheduling_period=24 * H, blackout_periods=[("00:00", "12:00"), ("13:00", "23:59")]
    )
    problem = never_servable(gaps, NOW, duration=2 * H)
    assert problem is not None
    assert problem.reason == "no_gap_fits_a_run"


@pytest.mark.parametrize("cooldown", [None, timedelta(0)])
def test_advice_names_a_periodic_schedule_without_cooldown(cooldown: timedelta | None) -> None:
    spec = periodic(
        scheduling_period=H, **({} if cooldown is None else {"cooldown_duration": cooldown})
    )
    (message,) = schedule_advice(spec, NOW)
    assert message.startswith("schedule 'scrape', field 'cooldown': no cooldown")
    assert schedule_advice(periodic(scheduling_period=H, cooldown_duration=M), NOW) == []


def test_advice_names_a_backoff_that_makes_error_certain() -> None:
    spec = periodic(scheduling_period=2 * M, cooldown_duration=20 * timedelta(seconds=1))
    (message,) = schedule_advice(spec, NOW, retry_ladder=(5 * M, H))
    assert message == (
        "schedule 'scrape', field 'period': the retry backoff after a failure "
        "(5m, dgs_retry_backoff) is not shorter than its period (2m): one failed "
        "run puts it in ERROR before it is retried"
    )
    assert schedule_advice(spec, NOW, retry_ladder=(M,)) == []


def test_a_within_that_ends_where_the_blackout_ends_is_named() -> None:
    """02:30 in a 02:00-03:00 blackout: the run can start at 03:00, the end of
    a 30 m within, and ends after it, however short; 31 m leaves room."""
    from datetime import datetime, timedelta, timezone

    from celery_dgs.core.blackout_periods import parse_blackouts
    from celery_dgs.core.servable import never_servable
    from celery_dgs.core.spec import CronSpec

    def spec(minutes: int) -> CronSpec:
        return CronSpec(
            task="t",
            cron_schedule="30 2 * * *",
            cron_max_schedule_duration=timedelta(minutes=minutes),
            tz="Europe/Paris",
            blackout_periods=parse_blackouts("t", [("02:00", "03:00")]),
        )

    now = datetime(2026, 11, 29, tzinfo=timezone.utc)
    named = never_servable(spec(30), now, duration=timedelta(0))
    assert named is not None
    assert named.reason == "cron_times_in_blackout"
    assert named.detail.startswith("1 of its 1 cron times a day fall in or just before")
    assert never_servable(spec(31), now, duration=timedelta(0)) is None
