"""The look-ahead admission in the simulator, on a small long+short fleet at
nominal load 0.9: ten slots, 75 short jobs needing 7.5 of them (runs of a
tenth of their 5-20 minute period, cooldown 0.8 of it, so slots idle between
their runs) and six 6-hour jobs of a daily period needing 1.5 (the default
cooldown rule: eligible 6 hours before they are due). Run times are exact."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.metrics import SimResult
from celery_dgs.sim.workload import SimSchedule, Workload, make_workers

DAY = 86400.0
WARMUP = DAY / 2


def fleet(seed: int) -> Workload:
    rng = random.Random(seed)
    schedules = []
    for i in range(75):
        period = rng.choice((300, 600, 900, 1200))
        spec = PeriodicSpec(
            task="s",
            configuration=f"s{i}",
            scheduling_period=timedelta(seconds=period),
            cooldown_duration=timedelta(seconds=int(period * 0.8)),
        )
        schedules.append(SimSchedule(spec, period * 0.1, 0.0, 0.0))
    for i in range(6):
        spec = PeriodicSpec(
            task="l",
            configuration=f"l{i}",
            scheduling_period=timedelta(days=1),
            cooldown_duration=timedelta(hours=12),
            default_cooldown=True,
        )
        schedules.append(SimSchedule(spec, 6 * 3600.0, 0.0, 0.0))
    return Workload(schedules, make_workers(10), horizon_s=2 * DAY, warmup_s=WARMUP, seed=seed)


def run(lookahead: bool) -> tuple[SimResult, list[tuple[float, str, str]]]:
    trace: list[tuple[float, str, str]] = []
    order = OrderPolicy(lookahead=lookahead)
    return Simulator(fleet(1), "dgs", order=order, trace=trace).run(), trace


def test_lookahead_cuts_the_error_the_long_jobs_cause_and_starves_none() -> None:
    plain, _ = run(False)
    held, trace = run(True)
    assert plain.error_s > 1_000_000  # the long jobs take the slots the short ones come back to
    assert held.error_s < plain.error_s / 2
    # Not starved: every long job starts in every day of the measured window.
    for i in range(6):
        starts = [t for t, name, _ in trace if name == f"l@l{i}" and t >= WARMUP]
        assert len(starts) >= 1
        gaps = zip([WARMUP, *starts], [*starts, 2 * DAY], strict=True)
        assert max(b - a for a, b in gaps) <= DAY


def test_new_long_schedules_without_runs_count_as_their_tasks_six_hours() -> None:
    """Two more daily jobs of task ``l``, registered at the start and never run
    (0 s expected): the admission gives them the task's 6 hours, so at no time
    do more long runs go on than the cap allows (10 - 7.5 / 0.95 slots: 2)."""
    base = fleet(1)
    new = [
        SimSchedule(
            PeriodicSpec(
                task="l",
                configuration=f"new{i}",
                scheduling_period=timedelta(days=1),
                cooldown_duration=timedelta(hours=12),
                default_cooldown=True,
            ),
            6 * 3600.0,
            0.0,
            0.0,
        )
        for i in range(2)
    ]
    never = {s.name: ScheduleStats(registered_at=base.start) for s in new}
    workload = replace(base, schedules=[*base.schedules, *new], initial_stats=never)
    trace: list[tuple[float, str, str]] = []
    Simulator(workload, "dgs", order=OrderPolicy(lookahead=True), trace=trace).run()
    long_starts = sorted(t for t, name, _ in trace if name.startswith("l@"))
    assert any(name == "l@new0" for _, name, _ in trace)
    most = max(sum(1 for s in long_starts if s <= t < s + 6 * 3600.0) for t in long_starts)
    assert most <= 2, most
