"""The default cooldown of periodic schedules declared without one, and the
retry backoff that makes ERROR certain (pure rules, injected times)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.core.spec_build import spec_from_dict
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.core.timing import (
    DEFAULT_COOLDOWN_FRACTION,
    backoff_exceeding_deadline,
    default_cooldown,
    start_times,
    validate_cooldown_fraction,
    with_default_cooldown,
)
from tests.core.helpers import H, M, cron, good, periodic, utc

NOW = utc(2026, 3, 2, 12)


def test_default_cooldown_is_the_fraction_of_the_period() -> None:
    assert DEFAULT_COOLDOWN_FRACTION == 0.5
    assert default_cooldown(timedelta(minutes=5)) == timedelta(seconds=150)
    assert default_cooldown(24 * H, 0.25) == 6 * H
    assert default_cooldown(24 * H, 0.0) == timedelta(0)
    spec = with_default_cooldown(periodic(scheduling_period=10 * M), 0.3)
    assert spec.cooldown_duration == 3 * M
    assert spec.default_cooldown
    assert spec_from_dict(spec.to_dict()) == spec  # the store keeps it
    assert "default_cooldown" not in periodic().to_dict()  # older stored JSON is unchanged


@pytest.mark.parametrize("bad", [1.0, -0.1, 1.5, True, "0.5", None, float("nan")])
def test_cooldown_fraction_outside_zero_one_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match=r"cooldown fraction must be a number in \[0, 1\)"):
        validate_cooldown_fraction(bad)  # type: ignore[arg-type]


def test_default_cooldown_waits_its_fraction_of_the_slack() -> None:
    # 1-hour period, 10-minute run that ended 5 minutes ago: should_start_by is
    # 40 minutes after that end; half of it is waited (can_start_by), half is
    # left to find a slot.
    spec = with_default_cooldown(periodic(scheduling_period=H), 0.5)
    stats = good(NOW - 15 * M, NOW - 5 * M)
    times = start_times(spec, stats, NOW)
    assert times.should_start_by == NOW + 35 * M
    assert times.can_start_by == NOW + 15 * M
    # Short runs: the slack is nearly the period, the wait nearly fraction * period,
    # never more.
    short = start_times(spec, good(NOW - 2 * M, NOW - M), NOW)
    assert short.can_start_by == NOW - M + (H - 2 * M) / 2
    explicit_zero = periodic(scheduling_period=H, cooldown_duration=timedelta(0))
    assert start_times(explicit_zero, stats, NOW).can_start_by == NOW - 5 * M  # seed 000: at once


def test_default_cooldown_never_holds_a_run_past_should_start_by() -> None:
    # A 40-minute run of a 1-hour schedule ended after its should_start_by: the
    # default cooldown waits nothing; a declared one holds (the seed's rule).
    stats = good(NOW - 50 * M, NOW - 10 * M)
    soft = start_times(with_default_cooldown(periodic(scheduling_period=H), 0.5), stats, NOW)
    assert soft.should_start_by == NOW - 30 * M
    assert soft.can_start_by == NOW - 10 * M
    hard = start_times(periodic(scheduling_period=H, cooldown_duration=30 * M), stats, NOW)
    assert hard.can_start_by == NOW + 20 * M


def test_never_succeeded_schedule_runs_at_once_despite_the_default_cooldown() -> None:
    spec = with_default_cooldown(periodic(scheduling_period=H))
    stats = ScheduleStats(registered_at=NOW - M)
    assert start_times(spec, stats, NOW).can_start_by == NOW - M


def test_backoff_exceeding_deadline_periodic_and_cron() -> None:
    ladder = (5 * M, H, 4 * H)
    assert backoff_exceeding_deadline(periodic(scheduling_period=2 * M), ladder) == 5 * M
    assert backoff_exceeding_deadline(periodic(scheduling_period=5 * M), ladder) == 5 * M
    assert backoff_exceeding_deadline(periodic(scheduling_period=6 * M), ladder) is None
    within_4 = cron("*/5 * * * *", cron_max_schedule_duration=4 * M)
    assert backoff_exceeding_deadline(within_4, ladder) == 5 * M
    assert backoff_exceeding_deadline(within_4, (M,)) is None
