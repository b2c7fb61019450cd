"""Deferred checks in the simulator: a stream of checks beside a fleet of
schedules (the comparison of orders is in :mod:`.check_orders`).

A check is a :class:`~celery_dgs.sim.workload.SimSchedule` whose spec is a
:class:`~celery_dgs.core.spec.CheckSpec`, present from the start with its
first check time (``next_target_at``) set: a check is never eligible before
its time, so adding it ahead changes nothing. Its runs end through the core's
:func:`~celery_dgs.core.checks.check_end`, as in the stores; an ended check is
held (never dispatched again, never late).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from ..core.checks import CheckAgain, CheckEnded, CheckState, check_end
from ..core.spec import CheckSpec
from ..core.stats import ScheduleStats
from .state import SchedState
from .workload import SimSchedule, Workload

#: An ended check's next check time: far enough that it is never late again.
_ENDED = datetime(9000, 1, 1, tzinfo=timezone.utc)
CHECK_TASK = "sim.check"


def end_of_check(
    st: SchedState, stats: ScheduleStats, outcome: str, ended_at: datetime
) -> ScheduleStats:
    """A simulated check's run end (its statistics already recorded): its
    next check, or its end (``st.disabled`` set: held). The verdict of its
    n-th good run is ``check_again_s[n]`` seconds after the run, or done."""
    spec = st.sched.spec
    assert isinstance(spec, CheckSpec)
    again = st.sched.check_again_s
    count = st.check_count
    verdict = timedelta(seconds=again[count]) if count < len(again) else None
    first = stats.next_target_at or ended_at
    step = check_end(spec, CheckState(first, count), stats, outcome, verdict, ended_at)
    if isinstance(step, CheckAgain):
        st.check_count = step.check_count
        return replace(stats, next_target_at=step.next_check_at)
    if isinstance(step, CheckEnded):
        st.check_count = step.check_count
        st.disabled = f"check ended: {step.outcome}"
        return replace(stats, next_target_at=_ENDED)
    return stats


@dataclass(frozen=True)
class CheckStream:
    """Checks added at ``per_hour`` (Poisson), each first due ``delay_s`` after
    it is added, run ``duration_s``, asked to check again ``again_s`` later
    (None: one check only), starting within ``within_s``."""

    per_hour: float = 120.0
    delay_s: float = 3600.0
    duration_s: float = 30.0
    again_s: float | None = 1800.0
    within_s: float = 600.0
    priority: int = 50

    def demand(self) -> float:
        """Slots the stream keeps busy on average."""
        runs = 1 if self.again_s is None else 2
        return self.per_hour / 3600.0 * self.duration_s * runs


def with_checks(
    fleet: Workload, stream: CheckStream, *, seed: int = 0
) -> tuple[Workload, dict[str, ScheduleStats], dict[str, float]]:
    """``fleet`` with ``stream``'s checks over its horizon: the workload, the
    checks' starting statistics (first check time set) and their first due
    times (seconds from the start)."""
    rng = random.Random(seed + 1002)
    checks: list[SimSchedule] = []
    stats: dict[str, ScheduleStats] = {}
    due: dict[str, float] = {}
    t, rate = 0.0, stream.per_hour / 3600.0
    again = () if stream.again_s is None else (stream.again_s,)
    while True:
        t += rng.expovariate(rate)
        at = t + stream.delay_s
        if at >= fleet.horizon_s:
            break
        spec = CheckSpec(
            task=CHECK_TASK,
            key=f"c{len(checks)}",
            priority=stream.priority,
            within=timedelta(seconds=stream.within_s),
        )
        checks.append(SimSchedule(spec, stream.duration_s, check_again_s=again))
        when = fleet.start + timedelta(seconds=at)
        stats[spec.name] = ScheduleStats(
            registered_at=fleet.start + timedelta(seconds=t), next_target_at=when
        )
        due[spec.name] = at
    return replace(fleet, schedules=[*fleet.schedules, *checks]), stats, due
