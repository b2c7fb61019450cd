"""The least ERROR any scheduler can reach on a workload, in the long run (pure).

A good run of a schedule with period ``P`` that takes ``d`` seconds leaves it
OK for at most ``P - d`` seconds: from its end to ``its start + P`` (and no
longer if the next run ends sooner). A run costs ``d`` slot-seconds, fails
with probability ``f`` (and then buys nothing). So over a window of ``W``
seconds with ``C`` slot-seconds available, whatever the order:

    OK time of schedule i  <=  min(W, runs_i * (1 - f_i) * (P_i - d_i))
    sum of runs_i * d_i    <=  C

and the best any scheduler can do in expectation is the fractional knapsack
of those: spend capacity on the schedules that buy the most OK time per
slot-second, ``(1 - f) (P - d) / d``, until each is OK the whole window. The
ERROR-seconds that remain are the bound. With every schedule the same share
``d / P`` of capacity every schedule buys the same, so every order that keeps
the slots busy and runs nothing early is at the bound: no scheduler, dgs
included, can be below Celery beat there by more than chance. With mixed
shares the bound is well below what a fair order reaches: it starves the
costliest schedules, which the ``restore`` aging deliberately does not.

Simplifications, all of which only lower the bound (it stays a bound):
pools, node constraints, blackouts, cooldowns and retry backoff are ignored,
and run times are their means. A cron schedule's ``P`` is its nominal
interval (its shortest gap between fire times; approximate when the gaps
differ) plus its ``within``. Capacity is pooled over the window, so after an
outage the bound assumes that capacity from later could buy back the OK time
lost during it: there it is far below what any order reaches. It is a
long-run bound: over a finite window a policy can be below it by up to a few
per cent, with OK time carried in from runs before the window (measured:
0.4 % at load 1.5 over 2 days, 6 % over a 1-day window after a 1-day warm-up).
"""

from __future__ import annotations

from ..core.spec import CronSpec, ScheduleSpec
from .workload import Workload, nominal_period


def ok_period_s(spec: ScheduleSpec) -> float:
    """The longest a good run can keep a schedule OK, from its start: its nominal
    period, plus ``within`` for a cron schedule."""
    period = nominal_period(spec)
    if isinstance(spec, CronSpec):
        period += spec.cron_max_schedule_duration.total_seconds()
    return period


def window_capacity(workload: Workload) -> tuple[float, float]:
    """The measured window (seconds after warm-up) and the slot-seconds the
    workers offer in it, less what the outages take."""
    start, end = workload.effective_warmup(), workload.horizon_s
    window = max(end - start, 0.0)
    capacity = workload.slots * window
    for outage in workload.outages:
        down = max(0.0, min(outage.end_s, end) - max(outage.start_s, start))
        slots = sum(w.slots for w in workload.workers if outage.hits(w))
        capacity -= slots * down
    return window, max(capacity, 0.0)


def error_bound_s(workload: Workload) -> float:
    """The long-run least ERROR-seconds over the measured window (module docstring)."""
    window, capacity = window_capacity(workload)
    offers: list[tuple[float, float]] = []  # (OK seconds per slot-second, slot-seconds to stay OK)
    error = 0.0
    for sched in workload.schedules:
        period = ok_period_s(sched.spec)
        bought = (1.0 - sched.failure_rate) * (period - sched.duration_s)
        if bought <= 0:
            error += window  # never OK: a run buys nothing
        elif sched.duration_s <= 0:
            continue  # free runs: always OK
        else:
            offers.append((bought / sched.duration_s, window * sched.duration_s / bought))
    offers.sort(reverse=True)
    for efficiency, cost in offers:
        if cost <= capacity:  # OK the whole window (no rounding residue)
            capacity -= cost
            continue
        error += window - capacity * efficiency
        capacity = 0.0
    return max(error, 0.0)
