"""One duration syntax: what people type (``90``, ``30m``, ``1h30m``, ``7d``)
is read by one parser, and errors print durations back in that syntax."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.checks import first_check_time
from celery_dgs.core.durations import format_duration, parse_duration
from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.errors import ScheduleConfigError

NOW = datetime(2026, 5, 1, 10, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),  # the forms `celery dgs simulate` takes
        ("90s", 90),
        ("30m", 1800),
        ("6h", 21600),
        ("7d", 7 * 86400),
        ("1.5h", 5400),
        (" 2 m ", 120),
        ("1h30m", 5400),  # and compound ones, largest unit first
        ("3d6h", 3 * 86400 + 6 * 3600),
        ("1m30.5s", 90.5),
        ("250ms", 0.25),
        ("-5s", -5),
    ],
)
def test_parse_duration_reads_the_typed_forms(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["abc", "", "h", "1h1h", "30m1h", "1x", "1e3", "1h-5m", "--5"])
def test_parse_duration_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration: give seconds, or a duration like"):
        parse_duration(text)


@pytest.mark.parametrize(
    "delta",
    [
        timedelta(days=30),
        timedelta(hours=1, minutes=30),
        timedelta(seconds=90),
        timedelta(seconds=0.5),
        timedelta(0),
        timedelta(seconds=-5),
        timedelta(days=1, microseconds=1),
    ],
)
def test_format_duration_writes_what_the_parser_reads(delta: timedelta) -> None:
    text = format_duration(delta)
    assert parse_duration(text) == delta
    assert ":" not in text
    assert "day" not in text


def test_errors_echo_durations_in_the_typed_syntax() -> None:
    spec = CheckSpec(task="t.check", key="k")
    with pytest.raises(ValueError, match=r"further ahead than the horizon \(30d\) allows"):
        first_check_time(spec, NOW, after=timedelta(days=31))
    with pytest.raises(ScheduleConfigError) as cooldown:
        PeriodicSpec(task="t.a", scheduling_period=600, cooldown_duration=900)
    assert cooldown.value.message == "(15m) must be shorter than the period (10m)"
    with pytest.raises(ScheduleConfigError) as too_long:
        PeriodicSpec(task="t.a", scheduling_period=timedelta(days=40000))
    assert too_long.value.message.startswith("40000d is too long")


def test_instants_print_in_utc_with_milliseconds_when_not_whole() -> None:
    from datetime import datetime, timezone

    from celery_dgs.core.instants import format_instant

    whole = datetime(2026, 11, 29, 8, 9, 3, tzinfo=timezone.utc)
    assert format_instant(whole) == "2026-11-29 08:09:03Z"
    assert format_instant(whole.replace(microsecond=327_400)) == "2026-11-29 08:09:03.327Z"
    plus_one = timezone(timedelta(hours=1))
    assert format_instant(datetime(2026, 11, 29, 9, 9, 3, tzinfo=plus_one)) == format_instant(whole)
