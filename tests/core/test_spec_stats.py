"""Spec validation, configuration names, zones, and the run statistics (EWMA)."""

from __future__ import annotations

from datetime import time, timedelta
from typing import Any

import pytest
import pytz

from celery_dgs.core import (
    DEFAULT_EWMA_ALPHA,
    Blackout,
    ScheduleStats,
    blackout_containing,
    ewma,
    record_failure,
    record_interruption,
    record_start,
    record_success,
    schedule_name,
    spec_from_dict,
    split_schedule_name,
    start_times,
)
from celery_dgs.errors import ScheduleConfigError

from .helpers import H, M, cron, good, periodic, utc

# --- EWMA (alpha 0.37) ---


def test_ewma_known_numbers() -> None:
    assert DEFAULT_EWMA_ALPHA == 0.37
    assert ewma(None, 10 * M, 0.37) == 10 * M
    assert ewma(10 * M, 20 * M, 0.37) == timedelta(minutes=13.7)
    assert abs(ewma(13.7 * M, 5 * M, 0.37) - timedelta(minutes=10.481)) < timedelta(microseconds=2)


def test_ewma_three_runs_weigh_75_percent() -> None:
    weight_of_last_three = 1 - (1 - DEFAULT_EWMA_ALPHA) ** 3
    assert weight_of_last_three == pytest.approx(0.75, abs=0.001)


def test_ewma_rejects_bad_alpha() -> None:
    for alpha in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="alpha"):
            ewma(M, M, alpha)


def test_duration_deviation_is_an_ewma_of_the_distance_to_the_average() -> None:
    t = utc(2026, 6, 1)
    stats = record_success(ScheduleStats(registered_at=t), t, t + 10 * M)
    assert stats.duration_deviation == timedelta(0)  # one run: no spread known
    stats = record_success(stats, t + H, t + H + 20 * M)  # |20 - 10| = 10 min
    assert stats.duration_deviation == timedelta(minutes=3.7)
    stats = record_success(stats, t + 2 * H, t + 2 * H + 13.7 * M)  # on the average
    assert stats.duration_deviation == timedelta(minutes=3.7 * 0.63)
    failed = record_interruption(record_failure(stats, t + 3 * H, t + 4 * H), t + 5 * H, t + 6 * H)
    assert failed.duration_deviation == stats.duration_deviation  # only successes feed it
    legacy = ScheduleStats(registered_at=t, average_good_duration=10 * M)  # stored before 0003
    assert record_success(legacy, t, t + 12 * M).duration_deviation == 2 * M


def test_record_success_failure_interruption() -> None:
    t = utc(2026, 6, 1)
    stats = record_start(ScheduleStats(registered_at=t), t)
    assert stats.last_start_at == t
    stats = record_success(stats, t, t + 10 * M)
    assert (stats.failure_count, stats.average_good_duration) == (0, 10 * M)
    stats = record_success(stats, t + H, t + H + 20 * M)
    assert stats.average_good_duration == timedelta(minutes=13.7)
    assert (stats.last_good_start_at, stats.last_good_end_at) == (t + H, t + H + 20 * M)
    failed = record_failure(record_failure(stats, t + 2 * H, t + 3 * H), t + 4 * H, t + 5 * H)
    assert failed.failure_count == 2
    assert failed.last_end_at == t + 5 * H
    assert failed.last_good_start_at == t + H  # unchanged
    assert failed.average_good_duration == stats.average_good_duration
    assert record_success(failed, t + 6 * H, t + 7 * H).failure_count == 0
    cut = record_interruption(failed, t + 6 * H, t + 6 * H + M)
    assert (cut.failure_count, cut.last_end_at) == (2, t + 6 * H + M)
    assert cut.last_good_start_at == t + H


# --- names ---


def test_configuration_names() -> None:
    assert schedule_name("Task") == "Task"
    assert schedule_name("Task", "config") == "Task@config"
    assert split_schedule_name("Task@config") == ("Task", "config")
    assert split_schedule_name("Task") == ("Task", "")
    assert periodic(task="Task", configuration="config").name == "Task@config"
    assert cron(task="Task").name == "Task"


# --- validation: the error names the schedule and the field ---


def _error(build: Any, **kw: Any) -> ScheduleConfigError:
    with pytest.raises(ScheduleConfigError) as info:
        build(**kw)
    return info.value


def test_a_negative_duration_is_shown_in_seconds() -> None:
    err = _error(periodic, scheduling_period=-5)
    assert str(err).endswith("field 'scheduling_period': must be more than zero, got -5s")
    err = _error(periodic, cooldown_duration=-M)
    assert str(err).endswith("field 'cooldown_duration': must be zero or more, got -1m")


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 0 * *", "'0 0 * *' is not a 5-field cron expression (it has 4 fields)"),
        ("daily", "'daily' is not a 5-field cron expression (it has 1 field)"),
        ("@daily", "'@daily' is not a 5-field cron expression: write it as '0 0 * * *'"),
        ("@Hourly", "'@Hourly' is not a 5-field cron expression: write it as '0 * * * *'"),
        ("61 * * * *", "'61 * * * *': the minute field '61' is not valid (it takes 0-59)"),
        ("0 0 * * 8", "the day of week field '8' is not valid (it takes 0-7 or sun-sat)"),
        ("0 0 1-40 * *", "the day of month field '1-40' is not valid (it takes 1-31)"),
        ("*/0 * * * *", "the minute field '*/0' is not valid (a step (/N) must be at least 1)"),
        ("0 0 30 2 *", "'0 0 30 2 *' never fires"),
    ],
)
def test_a_bad_cron_expression_is_told_by_what_is_wrong(expr: str, message: str) -> None:
    err = _error(cron, expr=expr)
    assert err.field == "cron_schedule"
    assert message in str(err), str(err)


@pytest.mark.parametrize(
    ("build", "kw", "field"),
    [
        (cron, {"expr": "0 0 * *"}, "cron_schedule"),
        (cron, {"expr": "61 * * * *"}, "cron_schedule"),
        (cron, {"expr": "0 0 30 2 *"}, "cron_schedule"),  # valid syntax, never fires
        (cron, {"tz": "Mars/Olympus"}, "tz"),
        (periodic, {"tz": "Nowhere"}, "tz"),
        (periodic, {"scheduling_period": timedelta(0)}, "scheduling_period"),
        (periodic, {"scheduling_period": -H}, "scheduling_period"),
        (periodic, {"cooldown_duration": -M}, "cooldown_duration"),
        (periodic, {"cooldown_duration": 24 * H}, "cooldown_duration"),
        (cron, {"cron_max_schedule_duration": timedelta(0)}, "cron_max_schedule_duration"),
        (cron, {"cron_max_schedule_duration": -H}, "cron_max_schedule_duration"),
        (periodic, {"max_allowed_duration": timedelta(0)}, "max_allowed_duration"),
        (periodic, {"duration_override": -M}, "duration_override"),
        (periodic, {"blackout_periods": "12:00-14:00"}, "blackout_periods"),
        (periodic, {"blackout_periods": [("noon", "14:00")]}, "blackout_periods"),
        (periodic, {"blackout_periods": [{"start": "12:00"}]}, "blackout_periods"),
        (periodic, {"blackout_periods": [("12:00", "12:00")]}, "blackout_periods"),
        (
            periodic,
            {"blackout_periods": [("00:00", "12:00"), ("11:00", "00:00")]},
            "blackout_periods",
        ),
    ],
)
def test_validation_errors_name_schedule_and_field(
    build: Any, kw: dict[str, Any], field: str
) -> None:
    err = _error(build, task="Task", configuration="cfg", **kw)
    assert (err.schedule, err.field) == ("Task@cfg", field)
    assert "Task@cfg" in str(err)
    assert field in str(err)


def test_blackouts_that_leave_a_gap_are_accepted() -> None:
    spec = periodic(blackout_periods=[("00:00", "12:00"), ("12:01", "00:00")])
    assert len(spec.blackout_periods) == 2
    night = periodic(blackout_periods=[{"start": "22:00", "end": "02:00"}])
    assert night.blackout_periods[0].end < night.blackout_periods[0].start


def test_cron_max_duration_longer_than_gap_warns() -> None:
    spec = cron("0 * * * *", task="Task", cron_max_schedule_duration=2 * H)
    (message,) = spec.warnings()
    assert "'Task'" in message
    assert "field 'within': 2h is longer than the shortest gap between cron times (1h)" in message
    assert cron("0 * * * *", cron_max_schedule_duration=30 * M).warnings() == []
    assert periodic().warnings() == []


# --- zones ---


def test_pytz_zone_objects_accepted() -> None:
    spec = periodic(tz=pytz.timezone("Europe/London"), blackout_periods=[("12:00", "14:00")])
    assert spec.tz == "Europe/London"
    # 12:00-14:00 BST is 11:00-13:00 UTC
    assert blackout_containing(spec.blackout_periods, spec.tz, utc(2026, 6, 1, 11)) is not None
    stats = good(utc(2026, 6, 1, 9), utc(2026, 6, 1, 11, 30))
    assert start_times(spec, stats, utc(2026, 6, 1, 12)).can_start_by == utc(2026, 6, 1, 13)
    assert cron(tz=pytz.timezone("America/New_York")).tz == "America/New_York"
    assert cron(tz=pytz.utc).tz == "UTC"


def test_spec_round_trip() -> None:
    spec = cron(
        "30 1 * * *",
        task="Task",
        configuration="cfg",
        tz="Europe/London",
        blackout_periods=[Blackout(time(12), time(13)), ("22:00", "02:00")],
        duration_override=H,
    )
    assert spec_from_dict(spec.to_dict()) == spec


def test_recorders_keep_every_field_they_do_not_set() -> None:
    # record_start / record_success build ScheduleStats field by field (for
    # speed): a field added to ScheduleStats must be carried over by them too.
    import dataclasses
    from datetime import datetime, timedelta, timezone

    from celery_dgs.core.stats import ScheduleStats, record_start, record_success

    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    values = {}
    for i, f in enumerate(dataclasses.fields(ScheduleStats)):
        if f.name in ("failure_count", "interval_index"):
            values[f.name] = 3
        elif f.name in ("average_good_duration", "duration_deviation"):
            values[f.name] = timedelta(seconds=10 + i)
        else:
            values[f.name] = t + timedelta(hours=i)
    stats = ScheduleStats(**values)
    started = record_start(stats, t + timedelta(days=1))
    changed = {
        f.name
        for f in dataclasses.fields(ScheduleStats)
        if getattr(started, f.name) != getattr(stats, f.name)
    }
    assert changed == {"last_start_at"}
    done = record_success(stats, t + timedelta(days=1), t + timedelta(days=1, seconds=5))
    kept = {
        f.name
        for f in dataclasses.fields(ScheduleStats)
        if getattr(done, f.name) == getattr(stats, f.name)
    }
    # The adaptive fields are the store's to change (celery_dgs.core.adaptive).
    assert kept == {"registered_at", "interval_index", "next_target_at", "upstream_modified_at"}


def test_a_zone_name_in_another_case_is_the_databases_and_a_typo_gets_suggestions() -> None:
    """pytz accepts ``america/new_york``; so does a schedule, stored as the
    zone database spells it. An unknown name names the closest ones."""
    assert periodic(tz="america/new_york").tz == "America/New_York"
    assert periodic(tz="utc").tz == "UTC"
    err = _error(periodic, tz="America/New_Yrok")
    assert err.field == "tz"
    assert "unknown time zone 'America/New_Yrok'; did you mean 'America/New_York'?" in str(err)
    assert str(_error(periodic, tz="Mars/Olympus")).endswith("unknown time zone 'Mars/Olympus'")
