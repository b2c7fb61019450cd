"""A fleet as a workload (``celery_dgs/sim/fleet.py``): the sample, the run
times from the statistics, the starting state; and the settings a workload
carries into the loop: the retry backoff and the run-time average's weight."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.sim.fleet import FleetEntry, fleet_workload, run_time, sample_fleet
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.workload import DEFAULT_START, SimSchedule, Workload, make_workers

NOW = datetime(2026, 3, 2, 12, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)


def periodic(i: int, **fields: object) -> PeriodicSpec:
    return PeriodicSpec(task="t", configuration=f"c{i}", scheduling_period=HOUR, **fields)  # type: ignore[arg-type]


def test_the_sample_is_uniform_bounded_and_the_same_for_a_seed() -> None:
    entries = [FleetEntry(periodic(i), None, "runtime") for i in range(1000)]
    entries += [FleetEntry(CheckSpec(task="c", key=str(i)), None, "check") for i in range(200)]
    sample = sample_fleet(iter(entries), 100, seed=4)
    assert (len(sample.entries), sample.total, sample.sampled) == (100, 1200, True)
    assert sample.by_origin == {"runtime": 1000, "check": 200}
    assert sample.describe() == "1000 runtime, 200 pending checks; of the schedules: 1000 periodic"
    checks = sum(isinstance(e.spec, CheckSpec) for e in sample.entries)
    assert 5 <= checks <= 30  # a sixth of 100, give or take
    again = sample_fleet(iter(entries), 100, seed=4)
    assert [e.spec.name for e in again.entries] == [e.spec.name for e in sample.entries]
    other = sample_fleet(iter(entries), 100, seed=5)
    assert [e.spec.name for e in other.entries] != [e.spec.name for e in sample.entries]
    assert (sample.scaled_slots(240), sample.scaled_slots(3), sample.fleet_slots(20)) == (
        20,
        1,
        240,
    )
    whole = sample_fleet(iter(entries[:50]), 100)
    assert (whole.sampled, whole.scaled_slots(7), whole.fleet_slots(7)) == (False, 7, 7)
    assert whole.fleet_slot_range(7, 3.2) == (7, 7)


def test_a_samples_answer_stands_for_a_range_of_the_fleets_slots() -> None:
    """100 of 1,200: one sample slot stands for 12 of the fleet's. The sample's
    least, 1 slot, says the fleet needs at most 12, and its demand says how
    many at least; 3 sample slots (2 were too few) say 25 to 36."""
    entries = [FleetEntry(periodic(i), None, "runtime") for i in range(1200)]
    sample = sample_fleet(iter(entries), 100, seed=1)
    assert sample.fleet_slot_range(1, 0.001) == (1, 12)  # a tiny demand: 1 to 12
    assert sample.fleet_slot_range(1, 0.5) == (6, 12)  # demand 6 fleet slots
    assert sample.fleet_slot_range(3, 1.0) == (25, 36)
    assert sample.fleet_slot_range(3, 2.5) == (30, 36)
    assert sample.fleet_slot_range(3, 9.0) == (36, 36)  # never above the high end


def test_run_times_from_the_statistics_else_the_override_else_the_default() -> None:
    measured = ScheduleStats(
        average_good_duration=timedelta(seconds=200), duration_deviation=timedelta(seconds=40)
    )
    mean, sigma = run_time(FleetEntry(periodic(1), measured, "runtime"), 60.0)
    assert mean == 200
    assert sigma == pytest.approx(0.246, abs=0.001)  # sqrt(log(1 + (1.25 * 40 / 200)^2))
    no_deviation = replace(measured, duration_deviation=None)
    assert run_time(FleetEntry(periodic(1), no_deviation, "runtime"), 60.0) == (200, 0.3)
    override = periodic(1, duration_override=timedelta(seconds=90))
    assert run_time(FleetEntry(override, ScheduleStats(), "declared"), 60.0) == (90, 0.3)
    assert run_time(FleetEntry(periodic(1), None, "declared"), 60.0) == (60, 0.3)


def test_stored_statistics_start_the_simulation_at_now() -> None:
    ran = ScheduleStats(
        registered_at=NOW - 3 * HOUR,
        last_good_start_at=NOW - HOUR,
        last_good_end_at=NOW - HOUR + timedelta(seconds=30),
        failure_count=0,
        average_good_duration=timedelta(seconds=30),
    )
    check = CheckSpec(task="c", key="k")
    entries = [
        FleetEntry(periodic(1), ran, "runtime"),
        FleetEntry(periodic(2), ScheduleStats(registered_at=NOW), "runtime"),  # never ran
        FleetEntry(check, ScheduleStats(registered_at=NOW, next_target_at=NOW + HOUR), "check"),
    ]
    workload = fleet_workload(sample_fleet(entries, 10), slots=2, duration_s=60.0, now=NOW)
    assert workload.start == NOW
    assert set(workload.initial_stats) == {periodic(1).name, check.name}
    assert [s.duration_s for s in workload.schedules] == [30, 60, 60]
    # The check runs once, an hour in; its demand is one run over the horizon.
    assert workload.load() == pytest.approx((30 / 3600 + 60 / 3600 + 60 / (7 * 86400)) / 2)
    sim = Simulator(workload, "dgs")
    sim.run()
    state = sim.states[check.name]
    started = state.stats.last_good_start_at
    assert started is not None
    assert NOW + HOUR <= started <= NOW + HOUR + check.within
    assert state.disabled == "check ended: done"
    never = fleet_workload(sample_fleet(entries[1:2], 10), slots=2, duration_s=60.0, now=NOW)
    assert never.start == DEFAULT_START  # nothing measured: the default start, random phases


def failing(**options: object) -> Workload:
    """One hourly schedule whose every 10 s run fails; never ran at t=0."""
    sched = SimSchedule(PeriodicSpec(task="a", scheduling_period=HOUR), 10.0, 0.0, failure_rate=1.0)
    opts: dict[str, object] = {"horizon_s": 3600.0, "warmup_s": 0.0, "warm_start": False}
    return Workload([sched], make_workers(1), **(opts | options))  # type: ignore[arg-type]


def starts(workload: Workload) -> list[float]:
    trace: list[tuple[float, str, str]] = []
    Simulator(workload, "dgs", trace=trace).run()
    return [t for t, _, _ in trace]


def test_the_workloads_retry_ladder_sets_the_retries() -> None:
    assert starts(failing()) == [0, 310]  # beat's default: 5 min, then 1 h
    ladder = (timedelta(seconds=60), timedelta(seconds=600))
    assert starts(failing(retry_ladder=ladder))[:4] == [0, 70, 680, 1290]


def test_the_workloads_ewma_alpha_weights_the_run_time_average() -> None:
    sched = SimSchedule(PeriodicSpec(task="a", scheduling_period=HOUR), 100.0, 0.5)
    base = Workload([sched], make_workers(1), horizon_s=86400.0, seed=2)
    for alpha in (1.0, 0.37):
        sim = Simulator(replace(base, ewma_alpha=alpha), "dgs")
        sim.run()
        stats = sim.states[sched.name].stats
        assert stats.last_good_start_at is not None
        assert stats.last_good_end_at is not None
        last = stats.last_good_end_at - stats.last_good_start_at
        # Alpha 1: the average is the last run; the default keeps the earlier ones.
        assert (stats.average_good_duration == last) is (alpha == 1.0)


def test_celery_beat_sends_a_check_once_at_its_time() -> None:
    # Celery beat has no deferred checks: a task sent with a countdown, one message.
    check = CheckSpec(task="c", key="k")
    stats = ScheduleStats(registered_at=NOW, next_target_at=NOW + HOUR)
    workload = fleet_workload(
        sample_fleet([FleetEntry(check, stats, "check")], 10), slots=1, duration_s=60.0, now=NOW
    )
    trace: list[tuple[float, str, str]] = []
    Simulator(replace(workload, horizon_s=86400.0), "beat", trace=trace).run()
    assert [t for t, _, _ in trace] == [3600.0]
