"""Deferred checks in the simulator: a stream of checks beside a fleet of
schedules, and how their order against the schedules plays out.

A check is a :class:`~celery_dgs.sim.workload.SimSchedule` whose spec is a
:class:`~celery_dgs.core.spec.CheckSpec`, present from the start with its
first check time (``next_target_at``) set: a check is never eligible before
its time, so adding it ahead changes nothing. Its runs end through the core's
:func:`~celery_dgs.core.checks.check_end`, as in the stores; an ended check is
held (never dispatched again, never late).

:func:`compare_check_orders` runs one fleet with one check stream under
three orders of checks against schedules:

- ``deadline`` (what beat does): a check should start within ``within`` of
  its time, and goes by that deadline among the schedules' deadlines;
- ``checks-first``: ``within`` of one second, so a due check is at its
  deadline at once and goes before schedules that still have slack;
- ``checks-last``: the checks in a lower priority class (90), so due
  schedules go first (the elevator still lifts waiting checks).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from statistics import median
from typing import Any

from ..core.checks import CheckAgain, CheckEnded, CheckState, check_end
from ..core.spec import CheckSpec
from ..core.stats import ScheduleStats
from .generate import GeneratorOptions, generate
from .metrics import SimResult
from .state import SchedState
from .workload import SimSchedule, Workload

#: An ended check's next check time: far enough that it is never late again.
_ENDED = datetime(9000, 1, 1, tzinfo=timezone.utc)
#: The report's class of the checks (their own, whatever their priority).
CHECK_CLASS = -1
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
        spec = CheckSpec(task=CHECK_TASK, key=f"c{len(checks)}", priority=stream.priority,
                         within=timedelta(seconds=stream.within_s))  # fmt: skip
        checks.append(SimSchedule(spec, stream.duration_s, check_again_s=again))
        when = fleet.start + timedelta(seconds=at)
        stats[spec.name] = ScheduleStats(registered_at=fleet.start + timedelta(seconds=t),
                                         next_target_at=when)  # fmt: skip
        due[spec.name] = at
    return replace(fleet, schedules=[*fleet.schedules, *checks]), stats, due


@dataclass(frozen=True)
class CheckOrderResult:
    """One order's figures: the schedules' ERROR after warm-up and the
    checks' start lateness past their time (first checks, after warm-up)."""

    order: str
    schedule_error_s: float
    schedule_error_fraction: float
    schedule_max_staleness: float
    checks: int
    check_p50_late_s: float
    check_p99_late_s: float
    check_max_late_s: float
    checks_past_within: float  # fraction started later than the stream's `within` after their time


ORDERS = ("deadline", "checks-first", "checks-last")


def run_check_order(
    fleet: Workload, stream: CheckStream, order: str, *, seed: int = 0
) -> CheckOrderResult:
    """Simulate ``fleet`` with ``stream`` under ``order`` (one of :data:`ORDERS`)."""
    from .loop import Simulator

    within_s = stream.within_s  # the lateness every order is judged against
    if order == "checks-first":
        stream = replace(stream, within_s=1.0)
    elif order == "checks-last":
        stream = replace(stream, priority=90)
    elif order != "deadline":
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    workload, stats, due = with_checks(fleet, stream, seed=seed)
    trace: list[tuple[float, str, str]] = []
    sim = Simulator(workload, "dgs", initial_stats=stats, trace=trace)
    for name in due:  # reported apart from the schedules
        sim.tally.class_of[name] = CHECK_CLASS
    result: SimResult = sim.run()
    schedules = {cls: v for cls, v in result.by_class.items() if cls != CHECK_CLASS}
    error_s = sum(v["error_s"] for v in schedules.values())
    count = sum(v["schedules"] for v in schedules.values())
    window = max(result.horizon_s - result.warmup_s, 1.0)
    first_start: dict[str, float] = {}
    for t, name, _ in trace:
        if name in due and name not in first_start:
            first_start[name] = t
    late = sorted(
        max(0.0, first_start.get(name, result.horizon_s) - at)
        for name, at in due.items() if at >= result.warmup_s
    )  # fmt: skip
    return CheckOrderResult(
        order=order, schedule_error_s=error_s,
        schedule_error_fraction=error_s / (window * count) if count else 0.0,
        schedule_max_staleness=max((v["max_staleness"] for v in schedules.values()), default=0.0),
        checks=len(late),
        check_p50_late_s=median(late) if late else 0.0,
        check_p99_late_s=late[int(0.99 * (len(late) - 1))] if late else 0.0,
        check_max_late_s=late[-1] if late else 0.0,
        checks_past_within=(sum(x > within_s for x in late) / len(late)) if late else 0.0,
    )  # fmt: skip


def compare_check_orders(
    load: float, *, seed: int = 1, stream: CheckStream | None = None, **fleet: Any
) -> list[CheckOrderResult]:
    """A generated fleet whose schedules alone are at ``load`` minus the
    stream's share, and the stream, under each of :data:`ORDERS`."""
    stream = stream or CheckStream()
    options = GeneratorOptions(**{"schedules": 300, "slots": 10, "horizon_s": 3 * 86400.0,
                                  "warmup_s": 86400.0, "seed": seed, **fleet})  # fmt: skip
    check_load = stream.demand() / options.slots
    if check_load >= load:
        raise ValueError(f"the checks alone are load {check_load:.2f} >= {load}")
    base = generate(replace(options, load=load - check_load))
    return [run_check_order(base, stream, order, seed=seed) for order in ORDERS]


def format_check_orders(load: float, results: list[CheckOrderResult]) -> str:
    lines = [f"load {load:.2f}: order         sched ERROR-s  max stale  checks  "
             "p50 late  p99 late  max late  past within"]  # fmt: skip
    for r in results:
        lines.append(
            f"           {r.order:<13} {r.schedule_error_s:>13.0f}"
            f"  {r.schedule_max_staleness:>9.2f}  {r.checks:>6}  {r.check_p50_late_s:>7.0f}s"
            f"  {r.check_p99_late_s:>7.0f}s  {r.check_max_late_s:>7.0f}s"
            f"  {r.checks_past_within:>10.1%}"
        )
    return "\n".join(lines)
