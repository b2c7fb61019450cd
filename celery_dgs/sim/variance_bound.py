"""The least ERROR any scheduler can reach with run-time variance priced (pure).

:mod:`~celery_dgs.sim.bound` counts every run at its mean: a run started
``P - d`` after the last good start ends exactly at the deadline, so the
fluid bound is 0 up to full load. A scheduler does not know how long the run
it starts will take. If a schedule's good runs start ``c`` seconds apart, the
next run ends at ``c + D`` (``D`` its duration, drawn anew), and the schedule
is in ERROR for ``(c + D - P)+`` of that cycle. Starting sooner (a smaller
``c``) buys less ERROR at the price of more runs.

For one schedule that starts on average every ``c`` seconds, the expected
ERROR per second is at least ``g(c) / c`` with ``g(c) = E[(c + D - P)+]``
(``g`` is convex, so equal gaps are the best spread, Jensen), and the slots it
takes ``d / c``. Over all schedules with ``S`` slots, every ``λ >= 0`` gives a
lower bound (the Lagrangian dual of sharing the slots)::

    ERROR / W  >=  sum_i min(1, min_c (g_i(c) + λ d_i) / c)  -  λ S

(1: the schedule is never run, and is in ERROR the whole window ``W``). This
module maximises it over ``λ``. A schedule that fails (``failure_rate f >
0``) takes the fluid bound's term instead, ``min(1, λ d / ((1 - f)(P - d)))``:
its failed runs are capacity that buys nothing, as there. Durations are
lognormal with the workload's mean and shape (as the simulator draws them);
``D``'s mean ``d`` gives ``g`` in closed form.

It keeps every simplification of :mod:`~celery_dgs.sim.bound` (fluid slots,
no pools, constraints, blackouts, cooldowns or retry backoff, a long-run
figure), so it is a bound too, and never below that one: with every ``sigma =
0`` it is the same figure. Whole slots are still fluid here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .bound import error_bound_s, ok_period_s, window_capacity
from .workload import Workload

_SQRT2 = math.sqrt(2.0)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
#: Golden-section steps per search (each shrinks the interval by 0.618).
_STEPS = 40


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / _SQRT2))


def expected_excess(mean_s: float, sigma: float, k: float) -> float:
    """``E[(D - k)+]`` for a lognormal ``D`` of mean ``mean_s`` and shape
    ``sigma`` (0: always the mean)."""
    if k <= 0:
        return mean_s - k
    if sigma <= 0 or mean_s <= 0:
        return max(mean_s - k, 0.0)
    mu = math.log(mean_s) - sigma * sigma / 2.0
    d1 = (mu + sigma * sigma - math.log(k)) / sigma
    return mean_s * _phi(d1) - k * _phi(d1 - sigma)


def _minimise(f: Callable[[float], float], lo: float, hi: float) -> tuple[float, float]:
    """Golden-section search of a unimodal ``f`` on ``[lo, hi]``: (min, argmin)."""
    a, b = lo, hi
    x1, x2 = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    f1, f2 = f(x1), f(x2)
    for _ in range(_STEPS):
        if f1 <= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - _GOLDEN * (b - a)
            f1 = f(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + _GOLDEN * (b - a)
            f2 = f(x2)
    return (f1, x1) if f1 <= f2 else (f2, x2)


def cycle_cost(period_s: float, mean_s: float, sigma: float, price: float) -> float:
    """``min(1, min_c (g(c) + price * mean_s) / c)``: the least ERROR per
    second plus ``price`` per slot-second that one schedule can cost (module
    docstring). The search runs over ``log c`` (the ratio of a convex and a
    linear function is unimodal in ``c``, hence in ``log c``)."""

    def cost(log_c: float) -> float:
        c = math.exp(log_c)
        return (expected_excess(mean_s, sigma, period_s - c) + price * mean_s) / c

    low = math.log(max(mean_s, 1e-9) * 1e-3)
    high = math.log(max(period_s, mean_s) * 50.0)
    best, _ = _minimise(cost, low, high)
    return min(best, 1.0)


def variance_error_bound_s(workload: Workload) -> float:
    """The long-run least ERROR-seconds over the measured window with run-time
    variance priced (module docstring); at least :func:`~celery_dgs.sim.bound.error_bound_s`."""
    window, capacity = window_capacity(workload)
    slots = capacity / window if window else 0.0  # averaged over the window
    terms = [
        (ok_period_s(s.spec), s.duration_s, s.duration_sigma, s.failure_rate)
        for s in workload.schedules
        if s.duration_s > 0
    ]

    def dual(price: float) -> float:
        total = 0.0
        for period, mean, sigma, failure in terms:
            if failure > 0:
                bought = (1.0 - failure) * (period - mean)
                total += 1.0 if bought <= 0 else min(1.0, price * mean / bought)
            else:
                total += cycle_cost(period, mean, sigma, price)
        return window * (total - price * slots)

    # The dual is concave in the price: a doubling scan, then a search near its best.
    best_value, best_price = dual(0.0), 0.0
    price = 1e-4
    while price < 1e4:
        value = dual(price)
        if value > best_value:
            best_value, best_price = value, price
        price *= 2.0
    if best_price > 0:
        value, _ = _minimise(lambda p: -dual(p), best_price / 2.0, best_price * 2.0)
        best_value = max(best_value, -value)
    return max(best_value, error_bound_s(workload), 0.0)
