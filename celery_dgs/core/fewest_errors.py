"""The ``fewest_errors`` overload order (pure): while capacity is short, give
up the schedules whose runs buy the least fresh time, not everyone in turn.

Beat's default order is fair: under overload the schedules in ERROR are
served shortest run first with aging (:mod:`~celery_dgs.core.late_order`),
so every schedule is served and its staleness stays bounded, and the
ERROR-seconds are spread over all of them. The least ERROR any scheduler can
reach (the long-run bound, ``celery_dgs/sim/bound.py``) is a fractional
knapsack instead: a run of expected duration ``d`` of a schedule of period
``P`` buys up to ``P - d`` seconds of OK time for ``d`` slot-seconds, so
capacity goes to the schedules with the highest ``(P - d) / d`` first and the
costliest are given up.

:class:`FewestErrorsIndex` is the default order (relative laxity, the
schedules in ERROR first) until the demand exceeds the live slots
(``overloaded()``, the demand book's signal). Then the schedules in ERROR go
by that value, highest first, so the costliest wait while cheaper runs
restore more, with two exceptions that come before them:

- a run request (an operator's ``run``) keeps its place at the front;
- the *floor of service*: a schedule ``floor_periods`` periods stale (its
  deadline passed ``floor_periods - 1`` periods ago) is served before any
  other in ERROR, the most overdue first. No schedule is starved for longer
  (plus the wait for a slot among the others at the floor).

The order switches back as soon as the demand fits. A schedule's value is
read when it enters ERROR (its stats do not change while it is indexed).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

from .index import live_heap
from .late_order import is_run_request
from .laxity import DEFAULT_LAXITY_FLOOR_S, LaxityIndex
from .lookahead import demand_period_s
from .spec import CheckSpec, ScheduleSpec
from .stats import ScheduleStats

_Item = tuple[float, float, str, int]

#: What beat gives up when demand exceeds capacity (``dgs_overload``): ``fair``
#: (everyone served, staleness bounded: the overload policy's order alone) or
#: ``fewest_errors`` (this module's order).
OVERLOAD_GOALS = ("fair", "fewest_errors")
DEFAULT_OVERLOAD_GOAL = "fair"
#: Default ``dgs_overload_floor``: a schedule this many periods stale is served
#: before the others in ERROR.
DEFAULT_FLOOR_PERIODS = 5.0
#: The shortest run time the value divides by (a run of no measured duration).
_MIN_RUN_S = 1.0


@dataclass(frozen=True)
class Waiting:
    """A schedule in ERROR the ``fewest_errors`` order makes wait: the fresh
    seconds its run buys per slot-second, and when it reaches the floor of
    service (seconds on the index's clock)."""

    name: str
    value: float
    floor_at: float


def run_value(period_s: float, expected_s: float) -> float:
    """OK time bought per slot-second by a run: ``(P - d) / d``."""
    if not math.isfinite(period_s):
        return math.inf
    d = max(expected_s, _MIN_RUN_S)
    return (period_s - d) / d


def period_seconds(spec: ScheduleSpec, stats: ScheduleStats) -> float:
    """Seconds between a schedule's obligations
    (:func:`~celery_dgs.core.lookahead.demand_period_s`); a deferred check's:
    infinite (never given up)."""
    if isinstance(spec, CheckSpec):
        return math.inf
    return demand_period_s(spec, stats)


class FewestErrorsIndex(LaxityIndex):
    """:class:`~celery_dgs.core.laxity.LaxityIndex` whose schedules in ERROR
    go by :func:`run_value` while ``overloaded()``, behind the run requests
    and the schedules at the floor of service.

    ``period_s(name)``: seconds between the schedule's obligations
    (:func:`period_seconds`)."""

    def __init__(
        self,
        expected_s: Callable[[str], float],
        margin_s: Callable[[str], float],
        period_s: Callable[[str], float],
        overloaded: Callable[[], bool],
        aging: float,
        floor_s: float = DEFAULT_LAXITY_FLOOR_S,
        floor_periods: float = DEFAULT_FLOOR_PERIODS,
    ) -> None:
        super().__init__(expected_s, margin_s, aging, floor_s)
        if not (math.isfinite(floor_periods) and floor_periods >= 1):
            raise ValueError(f"overload floor must be >= 1 period, got {floor_periods!r}")
        self.period_s, self.overloaded = period_s, overloaded
        self.floor_periods = floor_periods
        #: the schedules in ERROR by value, highest first: (-value, can, name, version)
        self._valued: list[_Item] = []
        #: the same by the moment they reach the floor: (floor_at, can, name, version)
        self._floored: list[_Item] = []

    def _late_entry(self, name: str, should: float, can: float, version: int) -> _Item:
        entry = super()._late_entry(name, should, can, version)
        if is_run_request(can, should):
            value, floor_at = math.inf, -math.inf
        else:
            period = self.period_s(name)
            value = run_value(period, self.expected_s(name))
            error_at = should + max(self.margin_s(name), 0.0)
            floor_at = error_at + (self.floor_periods - 1) * period
            if not math.isfinite(floor_at):
                floor_at = math.inf
        heapq.heappush(self._valued, (-value, can, name, version))
        heapq.heappush(self._floored, (floor_at, can, name, version))
        return entry

    def _clean(self, heap: list[_Item]) -> None:
        version = self._version
        while heap and version.get(heap[0][2]) != heap[0][3]:
            heapq.heappop(heap)

    def _top(self, now: float) -> list[_Item] | None:
        heap = super()._top(now)
        if heap is not self._late or not heap or not self.overloaded():
            return heap
        self._clean(self._floored)
        if self._floored and self._floored[0][0] <= now:
            return self._floored
        self._clean(self._valued)
        return self._valued or heap

    def waiting_in_error(self, now: float, limit: int = 20) -> tuple[int, list[Waiting]]:
        """While overloaded, the schedules in ERROR the order makes wait (every
        one but the next choice): how many, and the ``limit`` of the lowest
        value, lowest first; ``(0, [])`` otherwise."""
        if self._top(now) is not self._valued:
            return 0, []
        version = self._version
        live = [i for i in self._valued if version.get(i[2]) == i[3]]
        first = min(live)
        lowest = heapq.nlargest(limit, (i for i in live if i is not first))
        floor_of = {i[2]: i[0] for i in self._floored if version.get(i[2]) == i[3]}
        return len(live) - 1, [Waiting(i[2], -i[0], floor_of.get(i[2], math.inf)) for i in lowest]

    def _compact_if_bloated(self) -> None:
        super()._compact_if_bloated()
        valued = getattr(self, "_valued", None)
        if valued is None or len(valued) <= 4 * len(self._times) + 1024:
            return
        self._valued = live_heap(valued, self._version, 2, 3)
        self._floored = live_heap(self._floored, self._version, 2, 3)
