"""ERROR-seconds by cause, on tiny hand-built simulations (rules: docs/simulator.md,
"Causes of ERROR"): each cause produced alone, counted to the second."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.sim.loop import Simulator, simulate
from celery_dgs.sim.metrics import (
    BLACKOUT,
    CAPACITY,
    CAUSES,
    FAILURE,
    NONE_FREE,
    ORDER,
    OTHER_FREE,
    OVERRUN,
    PLACEMENT,
    USABLE_FREE,
    SimResult,
    SlotHistory,
)
from celery_dgs.sim.workload import (
    DEFAULT_START,
    Outage,
    SimSchedule,
    SimWorker,
    Workload,
    make_workers,
)


def periodic(task: str, period: float, cooldown: float, **spec: object) -> PeriodicSpec:
    return PeriodicSpec(
        task=task,
        scheduling_period=timedelta(seconds=period),
        cooldown_duration=timedelta(seconds=cooldown),
        **spec,
    )  # type: ignore[arg-type]


def cold(
    scheds: list[SimSchedule], workers: list[SimWorker], horizon: float, **options: object
) -> Workload:
    """Nothing ever ran; everything measured from t = 0."""
    return Workload(scheds, workers, horizon_s=horizon, warmup_s=0.0, warm_start=False, **options)  # type: ignore[arg-type]


def only(result: SimResult, cause: str) -> float:
    """The ERROR-seconds of ``cause``, after checking that no other cause has
    any and that the causes add up to the total."""
    others = {c: s for c, s in result.error_by_cause.items() if c != cause and s}
    assert others == {}
    assert set(result.error_by_cause) == set(CAUSES)
    assert sum(result.error_by_cause.values()) == pytest.approx(result.error_s)
    return result.error_by_cause[cause]


def warm(scheds: list[SimSchedule], workers: list[SimWorker], horizon: float) -> Workload:
    """Each schedule last succeeded in its last period, with its run time known;
    measured after 300 s (the first runs may be late from before the start)."""
    return Workload(scheds, workers, horizon_s=horizon, warmup_s=300.0, seed=3)


def test_capacity_three_schedules_that_need_more_than_one_slot() -> None:
    # a, b, c: period 100 s, runs of exactly 40 s on one slot: demand 1.2.
    scheds = [SimSchedule(periodic(t, 100, 0), 40.0, 0.0) for t in "abc"]
    result = simulate(warm(scheds, make_workers(1), 2000.0), "dgs")
    assert result.error_s > 1000
    assert only(result, CAPACITY) == pytest.approx(result.error_s)


def test_capacity_every_worker_down() -> None:
    # Runs at 0 (10 s), then every 60 s (cooldown 50) until the outage 100-400:
    # its last start is 60, so ERROR from 160 until the run at 400 ends (410).
    sched = SimSchedule(periodic("a", 100, 50), 10.0, 0.0)
    result = simulate(cold([sched], make_workers(1), 600.0, outages=[Outage(100.0, 400.0)]), "dgs")
    assert only(result, CAPACITY) == pytest.approx(250.0)


def test_failure_a_schedule_whose_runs_always_fail() -> None:
    # Never succeeds: ERROR from its deadline (registered + 100) to the end,
    # every second of it waiting for a retry or running one.
    sched = SimSchedule(periodic("a", 100, 0), 5.0, 0.0, failure_rate=1.0)
    result = simulate(cold([sched], make_workers(1), 3000.0), "dgs")
    assert only(result, FAILURE) == pytest.approx(2900.0)


def test_blackout_longer_than_the_gap_to_the_deadline() -> None:
    # Period 1 h, 60 s runs, cooldown 1800: starts at 0, 1860 (00:31); the next
    # (3720, 01:02) falls in the 01:00-03:00 window and moves to its end (10800).
    # Deadline 1860 + 3600 = 5460: ERROR until that run ends at 10860, all of it
    # blackout (the run started late because of it).
    sched = SimSchedule(periodic("a", 3600, 1800, blackout_periods=[("01:00", "03:00")]), 60.0, 0.0)
    result = simulate(cold([sched], make_workers(1), 20000.0), "dgs")
    assert only(result, BLACKOUT) == pytest.approx(5400.0)


def test_placement_a_free_slot_on_a_node_the_schedules_may_not_use() -> None:
    # a and b may not run on w0: both share w1's one slot (demand 1.2) while
    # w0's slot stays free the whole time.
    scheds = [SimSchedule(periodic(t, 100, 0, dont_run_on_nodes=["w0"]), 60.0, 0.0) for t in "ab"]
    result = simulate(warm(scheds, make_workers(2, 1), 2000.0), "dgs")
    assert result.error_s > 500
    assert only(result, PLACEMENT) == pytest.approx(result.error_s)


def test_overrun_a_run_started_in_time_that_outlasts_its_margin() -> None:
    # Stats say 10 s runs (margin 10 s); the run takes 300 s. Last good start
    # -900: deadline 100, should_start_by 90; cooldown 975 after the end at
    # -890: it starts at 85, in time, and ends at 385: 285 s of ERROR.
    sched = SimSchedule(periodic("a", 1000, 975), 300.0, 0.0)
    start = DEFAULT_START
    stats = ScheduleStats(
        registered_at=start - timedelta(seconds=5000),
        last_good_start_at=start - timedelta(seconds=900),
        last_good_end_at=start - timedelta(seconds=890),
        last_start_at=start - timedelta(seconds=900),
        last_end_at=start - timedelta(seconds=890),
        failure_count=0,
        average_good_duration=timedelta(seconds=10),
        duration_deviation=timedelta(0),
    )
    workload = cold([sched], make_workers(1), 400.0)
    trace: list[tuple[float, str, str]] = []
    result = Simulator(workload, "dgs", initial_stats={"a": stats}, trace=trace).run()
    assert [t for t, _, _ in trace] == [85.0]
    assert only(result, OVERRUN) == pytest.approx(285.0)


def test_runs_longer_than_the_period_are_overrun_not_order() -> None:
    # 90 s runs (sigma 0.3) every 60 s on two slots: each run starts as the
    # previous ends, with no wait; a wait of a rounding error's length (the
    # free-slot history measured at the moment of the end) blamed order.
    spec = PeriodicSpec(task="a", scheduling_period=timedelta(seconds=60))
    result = simulate(warm([SimSchedule(spec, 90.0, 0.3)], make_workers(2), 3600.0), "dgs")
    assert result.error_s > 3000
    assert result.error_by_cause[OVERRUN] == pytest.approx(result.error_s, abs=1e-3)
    assert result.error_by_cause[ORDER] == pytest.approx(0.0, abs=1e-3)


def test_order_celery_beat_waits_for_its_enqueue_time_with_the_slot_free() -> None:
    # Celery beat enqueues at 100, 200, ...: each deadline (registered + 100,
    # then the previous start + 100) is the enqueue time, so 30 s of ERROR per
    # run. From the second run on the slot was free from its should_start_by
    # (deadline - 30) to the start: order. The first run had no run time yet
    # (margin 0): it started at its should_start_by, and its 30 s are overrun.
    sched = SimSchedule(periodic("a", 100, 0), 30.0, 0.0)
    result = simulate(cold([sched], make_workers(1), 1000.0), "beat")
    assert result.error_by_cause == {**dict.fromkeys(CAUSES, 0.0), ORDER: 240.0, OVERRUN: 30.0}


def test_slot_history_measures_each_state_of_each_group() -> None:
    history = SlotHistory(2)
    history.note(0.0, (NONE_FREE, NONE_FREE))
    history.note(10.0, (USABLE_FREE, OTHER_FREE))
    history.note(10.0, (USABLE_FREE, USABLE_FREE))  # replaced: zero length
    history.note(30.0, (NONE_FREE, OTHER_FREE))
    history.note(50.0, (NONE_FREE, OTHER_FREE))  # no change
    assert history.measure(0, 0.0, 100.0) == (20.0, 0.0)
    assert history.measure(1, 0.0, 100.0) == (20.0, 70.0)
    assert history.measure(1, 5.0, 15.0) == (5.0, 0.0)
    assert history.measure(1, 40.0, 45.0) == (0.0, 5.0)
    assert history.measure(0, 45.0, 40.0) == (0.0, 0.0)


def test_staleness_of_cycles_with_a_failed_run_is_kept_apart() -> None:
    # b's runs always fail: its data only ages (max_staleness), while a's
    # cycles, without failures, stay within one period.
    scheds = [
        SimSchedule(periodic("a", 100, 50), 10.0, 0.0),
        SimSchedule(periodic("b", 100, 50), 10.0, 0.0, failure_rate=1.0),
    ]
    result = simulate(warm(scheds, make_workers(2), 2000.0), "dgs")
    assert result.max_staleness > 15  # b: about 20 periods since its last good start
    assert 0.5 < result.max_staleness_without_failures <= 1.0
