"""The orders the benchmarks compare, by name.

The simulator's policies (``dgs``, ``fifo``, ``beat``), ``dgs`` under other
settings (an :class:`~celery_dgs.core.ranking.OrderPolicy`: ``dgs-deadline``
without the laxity floor, ``dgs-greedy``, ``dgs-shed``, ``dgs-lookahead``,
``dgs-nolookahead`` without the look-ahead admission, ``dgs-fewest``
(``dgs_overload = "fewest_errors"``), ``dgs-strict`` without the elevator,
``dgs-elevator-<seconds>``), and
``dgs-noprio``: ``dgs`` without the priority classes (the overload policy's
index alone, the order before priorities), which the priority scenarios of
``benchmarks/quality.py`` compare with. A result carries the name it was
asked under.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.ranking import OrderPolicy, overload_index
from celery_dgs.sim.deadline_policy import DeadlinePolicy
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.metrics import SimResult
from celery_dgs.sim.policies import POLICIES
from celery_dgs.sim.workload import Workload

#: ``dgs`` under other settings, by name.
SETTINGS: dict[str, OrderPolicy] = {
    "dgs": OrderPolicy(),
    "dgs-deadline": OrderPolicy(laxity_floor_s=None),
    "dgs-greedy": OrderPolicy(overload="greedy"),
    "dgs-shed": OrderPolicy(overload="shed"),
    "dgs-lookahead": OrderPolicy(lookahead=True),
    "dgs-fewest": OrderPolicy(goal="fewest_errors"),
    "dgs-nolookahead": OrderPolicy(lookahead=False),
    "dgs-strict": OrderPolicy(elevator_interval_s=None),
}
#: ``dgs`` with another elevator interval: ``dgs-elevator-<seconds>``.
ELEVATOR_PREFIX = "dgs-elevator-"
#: ``dgs`` without the priority classes.
NO_CLASSES = "dgs-noprio"


class WithoutClasses(DeadlinePolicy):
    """``dgs`` ordered by the overload policy's index alone."""

    def make_index(self) -> DeadlineIndex:
        return overload_index(
            self.order,
            expected_s=self.expected_s,
            margin_s=self.margin_s,
            period_s=self.period_s,
            overloaded=self.overloaded,
        )


def order_of(name: str) -> OrderPolicy:
    """The settings of ``dgs`` that ``name`` stands for."""
    if name in SETTINGS:
        return SETTINGS[name]
    if name.startswith(ELEVATOR_PREFIX):
        try:
            interval = float(name[len(ELEVATOR_PREFIX) :])
        except ValueError:
            interval = 0.0
        if interval > 0:
            return OrderPolicy(elevator_interval_s=interval)
    known = [*POLICIES, *SETTINGS, f"{ELEVATOR_PREFIX}<seconds>", NO_CLASSES]
    raise ValueError(f"policy must be one of {known}, got {name!r}")


def simulator(workload: Workload, name: str, **options: Any) -> Simulator:
    """The simulator of ``workload`` under the order ``name``."""
    if name in ("fifo", "beat"):
        return Simulator(workload, name, **options)
    if name == NO_CLASSES:
        return Simulator(workload, WithoutClasses, **options)
    return Simulator(workload, "dgs", order=order_of(name), **options)


def simulate(workload: Workload, name: str, **options: Any) -> SimResult:
    """``workload`` run under the order ``name``; the result says ``name``."""
    return replace(simulator(workload, name, **options).run(), policy=name)
