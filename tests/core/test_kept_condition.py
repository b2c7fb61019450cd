"""The kept condition (``celery_dgs.core.kept_condition``) is the condition
rule of ``celery_dgs.core.condition``: equal for random specs, statistics,
runs in progress and moments, at every boundary."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core import Level, RunningState, ScheduleSpec, ScheduleStats, condition
from celery_dgs.core.condition import declaration_invalid
from celery_dgs.core.kept_condition import (
    INVALID_SPEC,
    condition_at,
    kept_condition,
    kept_times,
    running_of,
)
from celery_dgs.core.spec import AdaptiveSpec, CheckSpec

from .helpers import H, M, good, periodic, utc
from .test_properties import durations, moments, schedules

SETTINGS = settings(max_examples=300, deadline=None)


@st.composite
def other_kinds(draw: st.DrawFn) -> tuple[ScheduleSpec, ScheduleStats, datetime]:
    """Adaptive schedules and deferred checks, with their own statistics."""
    base = draw(moments)
    run = draw(durations)
    if draw(st.booleans()):
        spec: ScheduleSpec = AdaptiveSpec(
            task="prop.adaptive",
            interval_unit=draw(st.sampled_from([H, 24 * H])),
            initial_interval_index=draw(st.integers(0, 8)),
        )
        stats = ScheduleStats(
            registered_at=base - 100 * H,
            last_good_start_at=draw(st.none() | st.just(base)),
            last_good_end_at=base + run,
            last_start_at=base,
            last_end_at=base + run,
            failure_count=draw(st.integers(0, 3)),
            average_good_duration=draw(st.none() | st.just(run)),
            interval_index=draw(st.none() | st.integers(0, 12)),
        )
    else:
        spec = CheckSpec(task="prop.check", key="k", within=draw(durations))
        stats = ScheduleStats(
            registered_at=base - H,
            next_target_at=base + draw(st.integers(0, 48 * 60)) * M,
            failure_count=draw(st.integers(0, 3)),
            last_end_at=draw(st.none() | st.just(base)),
            average_good_duration=draw(st.none() | st.just(run)),
        )
    now = base + draw(st.integers(-60, 96 * 60)) * M
    return spec, stats, now


cases = st.one_of(schedules(), other_kinds())


@SETTINGS
@given(
    cases,
    st.none() | st.integers(-60, 48 * 60),
    st.none() | durations,
    st.none() | st.just("when: a bad field"),
    st.integers(-3, 3),
    st.none() | st.tuples(st.integers(0, 10), st.integers(0, 10)),
)
def test_kept_condition_is_the_condition_rule(
    case: tuple[ScheduleSpec, ScheduleStats, datetime],
    running_for: int | None,
    limit: timedelta | None,
    declaration_error: str | None,
    shift_us: int,
    items: tuple[int, int] | None,
) -> None:
    spec, stats, now = case
    if items is not None:  # the item counts of a last good or partially failed run
        stats = dataclasses.replace(stats, last_items_ok=items[0], last_items_failed=items[1])
    if limit is not None:
        spec = dataclasses.replace(spec, max_expected_duration=limit, max_allowed_duration=None)
    running = None if running_for is None else RunningState(now - running_for * M)
    kept = kept_condition(spec, stats, running, declaration_error=declaration_error)
    # ``now``, and the moments around each kept boundary (where an off-by-one shows).
    probes = [now]
    for moment in (kept.warning_at, kept.error_at):
        if moment is not None and moment.year > 1:
            probes += [moment + timedelta(microseconds=shift_us), moment]
    for at in probes:
        expected = condition(spec, stats, running, at)
        if declaration_error is not None:
            expected = declaration_invalid(spec.name, declaration_error, expected)
        assert condition_at(kept, at) == (expected.level, expected.reason.value), (at, kept)


def test_running_is_a_start_after_the_last_end() -> None:
    t = utc(2026, 5, 1, 12)
    assert running_of(ScheduleStats()) is None
    assert running_of(ScheduleStats(last_start_at=t)) == RunningState(t)
    assert running_of(ScheduleStats(last_start_at=t, last_end_at=t - M)) == RunningState(t)
    assert running_of(ScheduleStats(last_start_at=t, last_end_at=t + M)) is None


def test_a_late_running_run_is_warning_until_its_deadline() -> None:
    t = utc(2026, 5, 1, 12)
    spec = periodic(scheduling_period=H, duration_override=30 * M)
    stats = dataclasses.replace(good(t - H, t - H + M), last_start_at=t - M, last_end_at=t - H + M)
    times = kept_times(spec, stats, t)
    assert condition_at(times.condition, t) == (Level.WARNING, "likely_late_running")
    assert condition_at(times.condition, t + M) == (Level.ERROR, "deadline_passed")
    assert times.should_start_by == t - H + H - 30 * M


def test_an_invalid_spec_is_error_without_times() -> None:
    times = kept_times(None, ScheduleStats(), utc(2026, 5, 1))
    assert condition_at(times.condition, utc(2026, 5, 1)) == (Level.ERROR, INVALID_SPEC)
    assert times.next_can_start_at is None
    assert times.should_start_by is None


@SETTINGS
@given(cases)
def test_an_idle_warning_comes_no_earlier_than_should_start_by(
    case: tuple[ScheduleSpec, ScheduleStats, datetime],
) -> None:
    """An idle schedule's warning (``error_at`` less the expected run) is not
    before its ``should_start_by`` (``error_at`` less the margin, which the
    expected run is not above): the status reads find it within the largest
    margin of now (``store.sql_status_parts``). Not so for a deferred check,
    whose retry moves ``should_start_by`` (the status reads leave them out)."""
    spec, stats, now = case
    kept = kept_times(spec, stats, now)
    if isinstance(spec, CheckSpec) or kept.condition.warning_reason != "likely_late":
        return
    assert kept.condition.warning_at is not None
    assert kept.should_start_by is not None
    assert kept.condition.warning_at >= kept.should_start_by, kept
