"""The adaptive interval ladder (seed 001), pure: an injected clock, no store."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from celery_dgs.core import FakeClock, ScheduleStats, condition, error_at, start_times
from celery_dgs.core.adaptive import (
    after_good_run,
    current_index,
    disabled_reason,
    fudge_factor,
    interval_units,
    ladder_interval,
    next_index,
    target,
)
from celery_dgs.core.condition import Level, Reason
from celery_dgs.core.spec import AdaptiveSpec
from celery_dgs.core.spec_build import make_spec, spec_from_dict
from celery_dgs.core.stats import record_failure, record_success
from celery_dgs.core.timing import backoff_exceeding_deadline
from celery_dgs.errors import ScheduleConfigError

from .helpers import utc

S = timedelta(seconds=1)
DAY = timedelta(days=1)


def adaptive(**kw: Any) -> AdaptiveSpec:
    fields: dict[str, Any] = {"task": "scrape", "configuration": "example.org"}
    fields.update(kw)
    return AdaptiveSpec(**fields)


def test_ladder_steps() -> None:
    assert [interval_units(i) for i in range(11)] == [1, 1, 2, 2, 2, 4, 16, 64, 256, 1024, 4096]
    assert ladder_interval(5, S) == 4 * S
    assert ladder_interval(-3, DAY) == DAY
    assert ladder_interval(99, DAY) == 4096 * DAY


@pytest.mark.parametrize(
    ("index", "eventful", "after"),
    [
        (4, True, 2),
        (4, False, 5),
        (4, None, 4),
        (1, True, 0),
        (0, True, 0),
        (10, False, 10),
        (9, False, 10),
    ],
)
def test_next_index_moves_and_clamps(index: int, eventful: bool | None, after: int) -> None:
    assert next_index(index, eventful) == after


def test_fudge_is_deterministic_within_ten_percent_and_spreads() -> None:
    factors = [fudge_factor(f"scrape@host{i}", 7) for i in range(2000)]
    assert all(0.9 <= f <= 1.1 for f in factors)
    assert fudge_factor("scrape@host1", 7) == fudge_factor("scrape@host1", 7)
    assert fudge_factor("scrape@host1", 7) != fudge_factor("scrape@host1", 8)
    assert min(factors) < 0.91
    assert max(factors) > 1.09
    assert 0.99 < sum(factors) / len(factors) < 1.01


def test_good_runs_move_the_interval_and_target() -> None:
    clock = FakeClock(utc(2026, 1, 1))
    spec = adaptive(interval_unit=S)
    stats = ScheduleStats(registered_at=clock.now())
    assert current_index(spec, stats) == 4
    index_seen = []
    for run_key, eventful in enumerate([False, False, True, None, True, True], start=1):
        start = clock.now()
        clock.advance(0.1)
        stats = record_success(stats, start, clock.now())
        stats = after_good_run(spec, stats, start, eventful, run_key)
        index_seen.append(stats.interval_index)
        expected = ladder_interval(stats.interval_index or 0, S) * fudge_factor(spec.name, run_key)
        assert stats.next_target_at == start + expected
        assert error_at(spec, stats, clock.now()) == stats.next_target_at
        clock.advance(30)
    assert index_seen == [5, 6, 4, 4, 2, 0]


def test_start_times_use_the_target_and_the_usual_margin() -> None:
    clock = FakeClock(utc(2026, 1, 1))
    spec = adaptive(interval_unit=timedelta(hours=1))
    start = clock.now()
    stats = after_good_run(
        spec,
        record_success(ScheduleStats(registered_at=start), start, start + 10 * S),
        start,
        False,
        3,
    )
    times = start_times(spec, stats, clock.now())
    goal = stats.next_target_at
    assert goal is not None
    assert times.should_start_by == goal - 10 * S  # margin: average 10 s, deviation 0
    interval = ladder_interval(5, timedelta(hours=1))
    assert times.can_start_by == times.should_start_by - interval * 0.1
    # The condition is a periodic one's against the target.
    clock.set(goal - 5 * S)
    assert condition(spec, stats, None, clock.now()).reason is Reason.LIKELY_LATE
    clock.set(goal + S)
    assert condition(spec, stats, None, clock.now()).level is Level.ERROR


def test_never_succeeded_is_due_at_once_oldest_first() -> None:
    spec = adaptive(interval_unit=DAY)
    old, new = (
        ScheduleStats(registered_at=utc(2026, 1, 1)),
        ScheduleStats(registered_at=utc(2026, 1, 2)),
    )
    now = utc(2026, 1, 2, 1)
    t_old, t_new = start_times(spec, old, now), start_times(spec, new, now)
    assert t_old.can_start_by == utc(2026, 1, 1)
    assert t_new.can_start_by == utc(2026, 1, 2)
    assert t_old.should_start_by < t_new.should_start_by
    assert error_at(spec, new, now) == utc(2026, 1, 3)  # the minimal interval


def test_failure_retries_after_the_minimal_interval_and_disables_at_max() -> None:
    clock = FakeClock(utc(2026, 1, 1))
    spec = adaptive(interval_unit=timedelta(minutes=1), max_failures=3)
    start = clock.now()
    stats = after_good_run(
        spec, record_success(ScheduleStats(registered_at=start), start, start + S), start, True, 1
    )
    goal = stats.next_target_at
    for failures in (1, 2, 3):
        clock.advance(90)
        stats = record_failure(stats, clock.now() - S, clock.now())
        assert stats.next_target_at == goal
        assert stats.interval_index == 2
        times = start_times(spec, stats, clock.now())
        assert times.can_start_by == clock.now() + timedelta(minutes=1)
        reason = disabled_reason(spec, stats)
        assert (reason is not None) == (failures == 3)
    assert reason is not None
    assert "3 consecutive failures" in reason
    assert spec.name in reason
    assert backoff_exceeding_deadline(spec) is None


def test_upstream_change_after_the_last_good_run_pulls_the_deadline_in() -> None:
    spec = adaptive(interval_unit=DAY, initial_interval_index=8)
    start = utc(2026, 1, 1)
    stats = after_good_run(
        spec, record_success(ScheduleStats(registered_at=start), start, start + S), start, None, 1
    )
    now = utc(2026, 1, 3)
    assert target(spec, stats, start) > utc(2026, 6, 1)  # 256 days
    older = ScheduleStats(**{**_fields(stats), "upstream_modified_at": start - DAY})
    assert start_times(spec, older, now) == start_times(spec, stats, now)  # not a change
    changed = ScheduleStats(**{**_fields(stats), "upstream_modified_at": utc(2026, 1, 2, 12)})
    times = start_times(spec, changed, now)
    assert times.can_start_by <= now  # due at once
    assert error_at(spec, changed, now) == utc(2026, 1, 3, 12)  # one unit after the change


def _fields(stats: ScheduleStats) -> dict[str, Any]:
    return {f: getattr(stats, f) for f in ScheduleStats.__dataclass_fields__}


def test_spec_validation_names_the_field_and_round_trips() -> None:
    spec = make_spec("adaptive", task="scrape", interval_unit=60, initial_interval_index=2)
    assert spec_from_dict(spec.to_dict()) == spec
    for field, value in [
        ("initial_interval_index", 11),
        ("initial_interval_index", True),
        ("max_failures", 0),
        ("interval_unit", -1),
        ("interval_unit", timedelta(days=10)),
    ]:
        with pytest.raises(ScheduleConfigError) as info:
            make_spec("adaptive", task="scrape", **{field: value})
        assert info.value.field == field
        assert info.value.schedule == "scrape"
