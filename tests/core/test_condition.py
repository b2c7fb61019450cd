"""condition(): the seed's "Schedule condition algorithm", rule by rule and in order."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from celery_dgs.core import Condition, Level, Reason, RunningState, ScheduleStats, condition

from .helpers import H, M, cron, good, periodic, utc

SPEC = periodic()  # 24 h period
STATS = good(utc(2026, 6, 1, 10), utc(2026, 6, 1, 11))  # average 1 h
DEADLINE = utc(2026, 6, 2, 10)
SECOND = timedelta(seconds=1)


def level(now: datetime, running: RunningState | None = None) -> Level:
    return condition(SPEC, STATS, running, now).level


def test_ok_names_its_deadline() -> None:
    result = condition(SPEC, STATS, None, utc(2026, 6, 1, 12))
    assert result == Condition(Level.OK, Reason.OK, result.message, DEADLINE)
    assert "2026-06-02T10:00:00" in result.message


def test_error_exactly_after_the_deadline() -> None:
    # now - last_good_start_at > scheduling_period
    at = condition(SPEC, STATS, None, DEADLINE)
    assert at.level is Level.WARNING  # not yet ERROR at the deadline itself
    after = condition(SPEC, STATS, None, DEADLINE + SECOND)
    assert (after.level, after.reason) == (Level.ERROR, Reason.DEADLINE_PASSED)
    assert after.error_at == DEADLINE
    assert "missed its deadline 2026-06-02T10:00:00" in after.message


def test_error_even_while_running() -> None:
    running = RunningState(started_at=utc(2026, 6, 2, 9))
    assert level(DEADLINE + SECOND, running) is Level.ERROR


def test_not_running_likely_late() -> None:
    # now + average > last_good_start_at + scheduling_period
    assert level(DEADLINE - H) is Level.OK
    result = condition(SPEC, STATS, None, DEADLINE - H + SECOND)
    assert (result.level, result.reason) == (Level.WARNING, Reason.LIKELY_LATE)


def test_running_likely_late_uses_the_run_start() -> None:
    now = utc(2026, 6, 2, 9, 10)
    late = condition(SPEC, STATS, RunningState(started_at=utc(2026, 6, 2, 9, 5)), now)
    assert (late.level, late.reason) == (Level.WARNING, Reason.LIKELY_LATE_RUNNING)
    # started at 08:00, expected to end at 09:00: fine even though now + average > 10:00
    on_time = RunningState(started_at=utc(2026, 6, 2, 8))
    assert level(utc(2026, 6, 2, 9, 30), on_time) is Level.OK


def test_running_rule_uses_plus_not_the_seed_sign_slip() -> None:
    # seed literally: started + avg > last_good_start - period (always true): we use +
    running = RunningState(started_at=utc(2026, 6, 1, 12))
    assert level(utc(2026, 6, 1, 12, 30), running) is Level.OK
    running = RunningState(started_at=DEADLINE - H + SECOND)
    assert level(DEADLINE - H + 2 * SECOND, running) is Level.WARNING


def test_duration_override_drives_the_warning() -> None:
    spec = periodic(duration_override=5 * H)
    result = condition(spec, STATS, None, DEADLINE - 4 * H)
    assert result.reason is Reason.LIKELY_LATE


def test_over_max_expected_duration_while_running() -> None:
    spec = periodic(max_expected_duration=2 * H)
    running = RunningState(started_at=utc(2026, 6, 1, 12))
    assert condition(spec, STATS, running, utc(2026, 6, 1, 14)).level is Level.OK
    result = condition(spec, STATS, running, utc(2026, 6, 1, 14) + SECOND)
    assert (result.level, result.reason) == (Level.WARNING, Reason.OVER_EXPECTED_DURATION)


def test_last_run_failed() -> None:
    result = condition(SPEC, dataclasses.replace(STATS, failure_count=2), None, utc(2026, 6, 1, 12))
    assert (result.level, result.reason) == (Level.WARNING, Reason.LAST_RUN_FAILED)
    assert "2 consecutive failures" in result.message


def test_rule_order_likely_late_before_last_run_failed() -> None:
    stats = dataclasses.replace(STATS, failure_count=1)
    assert condition(SPEC, stats, None, DEADLINE - M).reason is Reason.LIKELY_LATE
    assert condition(SPEC, stats, None, DEADLINE + M).reason is Reason.DEADLINE_PASSED


def test_never_succeeded() -> None:
    reg = utc(2026, 6, 1, 9)
    stats = ScheduleStats(registered_at=reg)
    assert condition(SPEC, stats, None, reg + H).level is Level.OK
    assert condition(SPEC, stats, None, reg + 24 * H).level is Level.OK
    result = condition(SPEC, stats, None, reg + 24 * H + SECOND)
    assert (result.level, result.reason) == (Level.ERROR, Reason.NEVER_SUCCEEDED)
    assert "has never run and its first deadline" in result.message, "not: it failed"
    failed = ScheduleStats(
        registered_at=reg, failure_count=1, last_start_at=reg, last_end_at=reg + M
    )
    assert condition(SPEC, failed, None, reg + H).reason is Reason.LAST_RUN_FAILED
    late = condition(SPEC, failed, None, reg + 24 * H + SECOND)
    assert (late.reason, "has never succeeded" in late.message) == (Reason.NEVER_SUCCEEDED, True)


def test_cron_condition() -> None:
    spec = cron("0 0 * * *")  # within 6 h
    stats = good(utc(2026, 6, 1, 0, 5), utc(2026, 6, 1, 1, 5))
    deadline = utc(2026, 6, 2, 6)  # next_cron_time(last_good_start) + 6 h
    assert condition(spec, stats, None, utc(2026, 6, 2, 4)).level is Level.OK
    assert condition(spec, stats, None, utc(2026, 6, 2, 5, 30)).reason is Reason.LIKELY_LATE
    running = RunningState(started_at=utc(2026, 6, 2, 5, 30))
    assert condition(spec, stats, running, utc(2026, 6, 2, 5, 40)).reason is (
        Reason.LIKELY_LATE_RUNNING
    )
    assert condition(spec, stats, None, deadline).level is Level.WARNING
    result = condition(spec, stats, None, deadline + SECOND)
    assert (result.level, result.reason, result.error_at) == (
        Level.ERROR,
        Reason.DEADLINE_PASSED,
        deadline,
    )


def test_never_succeeded_cron() -> None:
    stats = ScheduleStats(registered_at=utc(2026, 6, 1, 10))
    assert condition(cron(), stats, None, utc(2026, 6, 2, 6)).level is Level.OK
    result = condition(cron(), stats, None, utc(2026, 6, 2, 6, 1))
    assert result.reason is Reason.NEVER_SUCCEEDED


def test_levels_and_reason_codes() -> None:
    assert Level.OK < Level.WARNING < Level.ERROR
    assert max(Level.OK, Level.ERROR) is Level.ERROR
    assert str(Reason.DEADLINE_PASSED) == "deadline_passed"
    assert Reason("likely_late") is Reason.LIKELY_LATE
    assert {r.value for r in Reason} >= {"projected_late", "shed", "paused"}
