"""CronFireCache gives exactly next_cron_time's answers, computing far fewer of them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.cron import next_cron_time
from celery_dgs.core.cron_cache import CronFireCache

from .helpers import M, utc
from .test_properties import TRANSITIONS, ZONES, expressions

# Anchors within 6 hours either side of a 2026 DST transition, in any order.
anchors_near = st.builds(
    lambda t, offsets: [t + timedelta(minutes=m) for m in offsets],
    st.sampled_from(TRANSITIONS),
    st.lists(st.integers(min_value=-6 * 60, max_value=6 * 60), min_size=1, max_size=40),
)


@settings(max_examples=150, deadline=None)
@given(expressions, st.sampled_from(ZONES), anchors_near, st.integers(1, 64))
def test_cache_answers_exactly_like_next_cron_time(
    expr: str, tz: str, afters: list[datetime], max_steps: int
) -> None:
    cache = CronFireCache(max_steps=max_steps)
    for after in afters:
        assert cache.next_cron_time(expr, tz, after) == next_cron_time(expr, tz, after), after


@pytest.mark.parametrize(
    ("expr", "tz", "start"),
    [
        ("0 2 * * *", "America/New_York", utc(2026, 3, 6)),  # 02:00 skipped on 03-08
        ("30 1 * * *", "America/New_York", utc(2026, 10, 30)),  # 01:30 twice on 11-01
        ("30 * * * *", "Europe/London", utc(2026, 10, 24)),  # hour wildcard over fall-back
        ("*/15 2 * * *", "Europe/Berlin", utc(2026, 3, 28)),  # skipped quarter-hours
    ],
)
def test_cache_across_dst_days_in_shuffled_order(expr: str, tz: str, start: datetime) -> None:
    afters = [start + 7 * M * i for i in range(4 * 24 * 60 // 7)]  # every 7 minutes, 4 days
    afters = afters[::2] + afters[1::2][::-1]  # forwards, then backwards
    cache = CronFireCache()
    for after in afters:
        assert cache.next_cron_time(expr, tz, after) == next_cron_time(expr, tz, after), after


def test_many_anchors_in_a_span_cost_a_few_computations() -> None:
    """10,000 schedules whose last good start lies within the last 30 minutes:
    a quarter-hourly expression fires three times in that span."""
    now = utc(2026, 11, 23, 12)
    cache = CronFireCache()
    for i in range(10_000):
        after = now - timedelta(seconds=(i * 7919) % 1800)  # scattered, not sorted
        assert cache.next_cron_time("*/15 * * * *", "UTC", after) > after
    assert cache.computed <= 10


def test_far_anchors_are_computed_without_growing_the_timeline() -> None:
    cache = CronFireCache(max_steps=4)
    base = utc(2026, 1, 1)
    cache.next_cron_time("* * * * *", "UTC", base)
    far = base + timedelta(days=30)
    assert cache.next_cron_time("* * * * *", "UTC", far) == far + M
    early = base - timedelta(days=30)
    assert cache.next_cron_time("* * * * *", "UTC", early) == early + M
    assert cache._timelines[("* * * * *", "UTC")].fires == [base + M]
