"""How deferred checks are best ordered against schedules: one generated
fleet with one check stream (:class:`~.checks.CheckStream`) under three orders.

- ``deadline`` (what beat does): a check should start within ``within`` of
  its time, and goes by that deadline among the schedules' deadlines;
- ``checks-first``: ``within`` of one second, so a due check is at its
  deadline at once and goes before schedules that still have slack;
- ``checks-last``: the checks in a lower priority class (90), so due
  schedules go first (the elevator still lifts waiting checks).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import median
from typing import Any

from .checks import CheckStream, with_checks
from .generate import GeneratorOptions, generate
from .loop import Simulator
from .metrics import SimResult
from .workload import Workload

#: The report's class of the checks (their own, whatever their priority).
CHECK_CLASS = -1


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
        for name, at in due.items()
        if at >= result.warmup_s
    )
    return CheckOrderResult(
        order=order,
        schedule_error_s=error_s,
        schedule_error_fraction=error_s / (window * count) if count else 0.0,
        schedule_max_staleness=max((v["max_staleness"] for v in schedules.values()), default=0.0),
        checks=len(late),
        check_p50_late_s=median(late) if late else 0.0,
        check_p99_late_s=late[int(0.99 * (len(late) - 1))] if late else 0.0,
        check_max_late_s=late[-1] if late else 0.0,
        checks_past_within=(sum(x > within_s for x in late) / len(late)) if late else 0.0,
    )


def compare_check_orders(
    load: float, *, seed: int = 1, stream: CheckStream | None = None, **fleet: Any
) -> list[CheckOrderResult]:
    """A generated fleet whose schedules alone are at ``load`` minus the
    stream's share, and the stream, under each of :data:`ORDERS`."""
    stream = stream or CheckStream()
    options = GeneratorOptions(
        **{
            "schedules": 300,
            "slots": 10,
            "horizon_s": 3 * 86400.0,
            "warmup_s": 86400.0,
            "seed": seed,
            **fleet,
        }
    )
    check_load = stream.demand() / options.slots
    if check_load >= load:
        raise ValueError(f"the checks alone are load {check_load:.2f} >= {load}")
    base = generate(replace(options, load=load - check_load))
    return [run_check_order(base, stream, order, seed=seed) for order in ORDERS]


def format_check_orders(load: float, results: list[CheckOrderResult]) -> str:
    lines = [
        f"load {load:.2f}: order         sched ERROR-s  max stale  checks  "
        "p50 late  p99 late  max late  past within"
    ]
    for r in results:
        lines.append(
            f"           {r.order:<13} {r.schedule_error_s:>13.0f}"
            f"  {r.schedule_max_staleness:>9.2f}  {r.checks:>6}  {r.check_p50_late_s:>7.0f}s"
            f"  {r.check_p99_late_s:>7.0f}s  {r.check_max_late_s:>7.0f}s"
            f"  {r.checks_past_within:>10.1%}"
        )
    return "\n".join(lines)
