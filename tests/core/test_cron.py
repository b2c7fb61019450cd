"""next_cron_time / shortest_cron_gap: plain cases, DST conventions, zones."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import pytz

from celery_dgs.core import next_cron_time, shortest_cron_gap, wall_instants

from .helpers import UTC, H, M, utc

NY = "America/New_York"
LONDON = "Europe/London"


def fires(expr: str, tz: str, start: datetime, count: int) -> list[datetime]:
    out, t = [], start
    for _ in range(count):
        t = next_cron_time(expr, tz, t)
        out.append(t)
    return out


def test_seed_example_every_four_hours() -> None:
    # seed: `0 */4 * * *` after 03:00 gives 04:00 of that day
    assert next_cron_time("0 */4 * * *", "UTC", utc(2026, 5, 1, 3)) == utc(2026, 5, 1, 4)


def test_strictly_after_a_fire_time() -> None:
    assert next_cron_time("0 0 * * *", "UTC", utc(2026, 5, 1)) == utc(2026, 5, 2)
    assert next_cron_time("0 0 * * *", "UTC", utc(2026, 5, 1) - M / 60) == utc(2026, 5, 1)


def test_seconds_and_microseconds_are_ignored_correctly() -> None:
    after = datetime(2026, 5, 1, 12, 29, 59, 999999, tzinfo=UTC)
    assert next_cron_time("30 * * * *", "UTC", after) == utc(2026, 5, 1, 12, 30)
    after = datetime(2026, 5, 1, 12, 30, 0, 1, tzinfo=UTC)
    assert next_cron_time("30 * * * *", "UTC", after) == utc(2026, 5, 1, 13, 30)


def test_evaluated_in_local_time() -> None:
    # midnight in New York (EDT, UTC-4) is 04:00 UTC
    assert next_cron_time("0 0 * * *", NY, utc(2026, 6, 1, 12)) == utc(2026, 6, 2, 4)
    assert next_cron_time("0 0 * * *", NY, utc(2026, 12, 1, 12)) == utc(2026, 12, 2, 5)


def test_result_is_aware_utc() -> None:
    result = next_cron_time("0 0 * * *", NY, utc(2026, 6, 1))
    assert result.utcoffset() == timedelta(0)


def test_naive_after_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        next_cron_time("0 0 * * *", "UTC", datetime(2026, 1, 1))


def test_bad_expression_and_zone_raise() -> None:
    with pytest.raises(ValueError, match="cron"):
        next_cron_time("61 * * * *", "UTC", utc(2026, 1, 1))
    with pytest.raises(ValueError, match="time zone"):
        next_cron_time("0 0 * * *", "Mars/Olympus", utc(2026, 1, 1))


def test_expression_that_never_fires_raises() -> None:
    with pytest.raises(ValueError, match="fire"):
        next_cron_time("0 0 30 2 *", "UTC", utc(2026, 1, 1))


def test_day_of_month_or_day_of_week() -> None:
    # both restricted: the 13th OR a Friday (Vixie cron / croniter)
    got = fires("0 0 13 * 5", "UTC", utc(2026, 2, 1), 3)
    assert got == [utc(2026, 2, 6), utc(2026, 2, 13), utc(2026, 2, 20)]


def test_month_and_weekday_names_and_sunday_seven() -> None:
    assert next_cron_time("0 9 * jan,jul sun", "UTC", utc(2026, 2, 1)) == utc(2026, 7, 5, 9)
    assert next_cron_time("0 9 * * 7", "UTC", utc(2026, 5, 1)) == utc(2026, 5, 3, 9)


def test_leap_day() -> None:
    assert next_cron_time("0 0 29 2 *", "UTC", utc(2026, 1, 1)) == utc(2028, 2, 29)


def test_croniter_fallback_for_last_day_of_month() -> None:
    assert next_cron_time("0 0 L * *", "UTC", utc(2026, 2, 3)) == utc(2026, 2, 28)
    assert next_cron_time("0 12 * * 5#3", "UTC", utc(2026, 5, 1)) == utc(2026, 5, 15, 12)


def test_pytz_and_zoneinfo_zones_accepted() -> None:
    expected = next_cron_time("0 0 * * *", NY, utc(2026, 6, 1))
    assert next_cron_time("0 0 * * *", pytz.timezone(NY), utc(2026, 6, 1)) == expected
    assert next_cron_time("0 0 * * *", ZoneInfo(NY), utc(2026, 6, 1)) == expected
    after = pytz.timezone(NY).localize(datetime(2026, 6, 1, 8))  # pytz-aware `after`
    assert next_cron_time("0 0 * * *", "UTC", after) == utc(2026, 6, 2)


# --- DST: spring forward (New York 2026-03-08 02:00 EST -> 03:00 EDT = 07:00Z) ---


def test_ny_spring_skipped_time_fires_once_after_the_gap() -> None:
    got = fires("30 2 * * *", NY, utc(2026, 3, 7), 3)
    assert got == [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]


def test_ny_spring_daily_two_am() -> None:
    got = fires("0 2 * * *", NY, utc(2026, 3, 7), 3)
    assert got == [utc(2026, 3, 7, 7), utc(2026, 3, 8, 7), utc(2026, 3, 9, 6)]


def test_ny_spring_several_skipped_times_collapse_into_one() -> None:
    got = fires("*/15 2 * * *", NY, utc(2026, 3, 8, 5), 2)
    assert got == [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6)]


def test_ny_spring_hourly_fires_each_real_hour() -> None:
    got = fires("30 * * * *", NY, utc(2026, 3, 8, 5), 3)
    # 00:30 EST, 01:30 EST, (02:30 does not exist), 03:30 EDT
    assert got == [utc(2026, 3, 8, 5, 30), utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7, 30)]


def test_ny_spring_daily_one_thirty_unaffected() -> None:
    assert fires("30 1 * * *", NY, utc(2026, 3, 7, 12), 2) == [
        utc(2026, 3, 8, 6, 30),
        utc(2026, 3, 9, 5, 30),
    ]


# --- DST: fall back (New York 2026-11-01 02:00 EDT -> 01:00 EST = 06:00Z) ---


def test_ny_fall_repeated_time_fires_once() -> None:
    got = fires("30 1 * * *", NY, utc(2026, 10, 31), 3)
    assert got == [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]


def test_ny_fall_repeated_time_once_even_from_inside_the_second_pass() -> None:
    # 01:15 EST (second pass): 01:30 EDT is behind us, 01:30 EST must not fire
    assert next_cron_time("30 1 * * *", NY, utc(2026, 11, 1, 6, 15)) == utc(2026, 11, 2, 6, 30)


def test_ny_fall_daily_two_am() -> None:
    got = fires("0 2 * * *", NY, utc(2026, 10, 31), 3)
    assert got == [utc(2026, 10, 31, 6), utc(2026, 11, 1, 7), utc(2026, 11, 2, 7)]


def test_ny_fall_hourly_fires_each_real_hour() -> None:
    got = fires("30 * * * *", NY, utc(2026, 11, 1, 4), 4)
    # 00:30 EDT, 01:30 EDT, 01:30 EST, 02:30 EST
    assert got == [
        utc(2026, 11, 1, 4, 30),
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 1, 6, 30),
        utc(2026, 11, 1, 7, 30),
    ]


def test_ny_fall_wildcard_from_end_of_first_pass_goes_back() -> None:
    # 01:50 EDT: the next */20 fire is 01:00 EST (06:00Z), not 02:00 EST
    assert next_cron_time("*/20 * * * *", NY, utc(2026, 11, 1, 5, 50)) == utc(2026, 11, 1, 6)


def test_ny_fall_fixed_hour_minutes_fire_in_first_pass_only() -> None:
    got = fires("*/20 1 * * *", NY, utc(2026, 11, 1, 4), 4)
    assert got == [
        utc(2026, 11, 1, 5),
        utc(2026, 11, 1, 5, 20),
        utc(2026, 11, 1, 5, 40),
        utc(2026, 11, 2, 6),
    ]


# --- Europe/London: 2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT ---


def test_london_spring_skipped_one_thirty() -> None:
    got = fires("30 1 * * *", LONDON, utc(2026, 3, 28), 3)
    assert got == [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]


def test_london_fall_repeated_one_thirty_once() -> None:
    got = fires("30 1 * * *", LONDON, utc(2026, 10, 24), 3)
    assert got == [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_london_daily_two_am_across_both_transitions() -> None:
    assert fires("0 2 * * *", LONDON, utc(2026, 3, 28, 12), 2) == [
        utc(2026, 3, 29, 1),
        utc(2026, 3, 30, 1),
    ]
    assert fires("0 2 * * *", LONDON, utc(2026, 10, 24, 12), 2) == [
        utc(2026, 10, 25, 2),
        utc(2026, 10, 26, 2),
    ]


def test_london_hourly_fall() -> None:
    got = fires("30 * * * *", LONDON, utc(2026, 10, 24, 23, 45), 3)
    assert got == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 2, 30)]


def test_wall_instants() -> None:
    zone = ZoneInfo(NY)
    assert wall_instants(zone, datetime(2026, 6, 1, 12)) == (utc(2026, 6, 1, 16),) * 2
    # repeated: both occurrences
    assert wall_instants(zone, datetime(2026, 11, 1, 1, 30)) == (
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 1, 6, 30),
    )
    # skipped: the end of the gap
    assert wall_instants(zone, datetime(2026, 3, 8, 2, 30)) == (utc(2026, 3, 8, 7),) * 2


# --- shortest_cron_gap ---


def test_shortest_gap_plain() -> None:
    assert shortest_cron_gap("*/5 * * * *", "UTC") == 5 * M
    assert shortest_cron_gap("0 1,3 * * *", "UTC") == 2 * H
    assert shortest_cron_gap("0 0 * * *", "UTC") == 24 * H


def test_shortest_gap_counts_dst_short_days() -> None:
    # the sample from 2026-01-01 spans the March transition: 23 real hours
    assert shortest_cron_gap("0 2 * * *", NY) == 23 * H


def test_shortest_gap_rare_expressions() -> None:
    assert shortest_cron_gap("0 0 29 2 *", "UTC") == timedelta(days=365 * 4 + 1)
    assert shortest_cron_gap("0 0 30 2 *", "UTC") is None
