"""The simulator retries a failed run by beat's rule: the ladder's step, or
the failed run's duration when longer (``dgs_retry_duration_fraction``),
capped by the period."""

from __future__ import annotations

from datetime import timedelta

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.timing import RetryLadder
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.workload import SimSchedule, Workload, make_workers

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)


def starts(run_s: float, ladder: RetryLadder, period: timedelta = 24 * HOUR) -> list[float]:
    """Run starts of one schedule whose every ``run_s`` run fails (never ran at t=0)."""
    sched = SimSchedule(PeriodicSpec(task="a", scheduling_period=period), run_s, 0.0, 1.0)
    workload = Workload(
        [sched], make_workers(1), horizon_s=12 * 3600.0, warmup_s=0.0, warm_start=False
    )
    trace: list[tuple[float, str, str]] = []
    Simulator(workload, "dgs", retry_ladder=ladder, trace=trace).run()
    return [t for t, _, _ in trace]


def test_a_long_failed_run_waits_as_long_as_it_ran() -> None:
    # 2 h runs, a 1 min ladder: each retry waits the failed run's 2 h.
    assert starts(7200.0, RetryLadder((MINUTE,)))[:3] == [0, 14400, 28800]
    # Fraction 0 (seed 000's rule): one minute after each failure.
    assert starts(7200.0, RetryLadder((MINUTE,), 0.0))[:3] == [0, 7260, 14520]


def test_a_short_failed_run_waits_the_ladder_step_and_the_period_caps_the_rest() -> None:
    assert starts(10.0, RetryLadder((MINUTE,)))[:3] == [0, 70, 140]
    # Period 3 h: a 2 h run's wait (fraction 2: 4 h) is capped at 3 h.
    assert starts(7200.0, RetryLadder((MINUTE,), 2.0), period=3 * HOUR)[:2] == [0, 18000]
