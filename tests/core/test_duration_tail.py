"""The run-time tail: a streaming 99th percentile of run time over the average
(``ScheduleStats.duration_tail``), and the margin it sets a floor to."""

from __future__ import annotations

import dataclasses
import math
import random
from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.stats import (
    TAIL_INITIAL_RATIO,
    TAIL_QUANTILE,
    TAIL_STEP,
    ScheduleStats,
    record_failure,
    record_interruption,
    record_start,
    record_success,
    tail_after,
)
from celery_dgs.core.timing import start_margin

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
S = timedelta(seconds=1)
UP, DOWN = math.exp(TAIL_STEP * TAIL_QUANTILE), math.exp(-TAIL_STEP * (1 - TAIL_QUANTILE))
SPEC = PeriodicSpec(task="t", scheduling_period=timedelta(hours=1))


def test_one_step_up_after_a_run_above_it_and_a_hundred_times_smaller_down() -> None:
    assert tail_after(None, 2.5) == pytest.approx(TAIL_INITIAL_RATIO * UP)
    assert tail_after(None, 2.0) == pytest.approx(TAIL_INITIAL_RATIO * DOWN)  # not above
    assert tail_after(3.0, 0.1) == pytest.approx(3.0 * DOWN)
    assert math.log(UP) == pytest.approx(-99 * math.log(DOWN))


@pytest.mark.parametrize("sigma", [0.3, 1.0])
def test_it_settles_where_one_run_in_a_hundred_is_above_it(sigma: float) -> None:
    rng = random.Random(5)
    tail, above, n = None, 0, 20_000
    for i in range(2 * n):
        ratio = rng.lognormvariate(-sigma * sigma / 2, sigma)  # mean 1
        if i >= n and tail is not None:
            above += ratio > tail
        tail = tail_after(tail, ratio)
    assert 0.005 < above / n < 0.02


def test_only_good_runs_after_the_first_move_it() -> None:
    first = record_success(ScheduleStats(), T0, T0 + 10 * S)
    assert first.duration_tail is None  # no average before it: no ratio
    second = record_success(first, T0 + 100 * S, T0 + 150 * S)  # 5x the average
    assert second.duration_tail == pytest.approx(TAIL_INITIAL_RATIO * UP)
    later = T0 + 1000 * S
    for stats in (record_start(second, later), record_failure(second, later, later + S),
                  record_interruption(second, later, later + S)):  # fmt: skip
        assert stats.duration_tail == second.duration_tail


def test_the_margin_is_the_longer_of_the_deviations_and_the_tail() -> None:
    base = ScheduleStats(average_good_duration=100 * S, duration_deviation=5 * S)  # 100 + 4 * 5
    assert start_margin(SPEC, base) == 120 * S
    tailed = dataclasses.replace(base, duration_tail=2.0)
    assert start_margin(SPEC, tailed) == 200 * S
    assert start_margin(SPEC, dataclasses.replace(base, duration_tail=1.1)) == 120 * S
    exact = PeriodicSpec(task="t", scheduling_period=timedelta(hours=1), duration_override=30 * S)
    assert start_margin(exact, tailed) == 30 * S  # an override is taken as exact
