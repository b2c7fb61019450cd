"""What a simulation measures (definitions in ``docs/simulator.md``, "Metrics").

Conditions are accounted per schedule in O(1) at every change of its state
(run start, run end), never by scanning all schedules: between two changes a
schedule's deadline ``D`` (:func:`~celery_dgs.core.timing.error_at`) is fixed,
so its ERROR time in ``[a, b]`` is the part after ``D`` and its WARNING time
follows the seed's rules (``likely_late``: ``D - expected < t``;
``likely_late_running``; ``last_run_failed``). Only time inside the measured
window ``[warmup, horizon]`` counts.

Each ERROR-second is also attributed to one cause (:class:`CauseTally`, rules
in ``docs/simulator.md``, "Causes of ERROR"): the free slots' history
(:class:`SlotHistory`) answers, for any past interval, how long a slot a
schedule may use was free, or only slots it may not use.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from ..core.blackout import windows_between
from .workload import Workload

#: What an ERROR-second is attributed to, in the order of the report's columns.
CAPACITY, FAILURE, BLACKOUT, PLACEMENT, OVERRUN, ORDER = (
    "capacity",
    "failure",
    "blackout",
    "placement",
    "overrun",
    "order",
)
CAUSES = (CAPACITY, FAILURE, BLACKOUT, PLACEMENT, OVERRUN, ORDER)
#: A wait shorter than this (the rounding of a start at the moment a run
#: ended) gives no run its cause.
WAIT_EPSILON_S = 1e-6
#: Free-slot states of a placement group: no slot free anywhere, a slot the
#: group may use is free, slots free but none the group may use.
NONE_FREE, USABLE_FREE, OTHER_FREE = 0, 1, 2


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass
class Tally:
    """Running totals, filled by the event loop."""

    window_start: float
    window_end: float
    error_s: float = 0.0
    warning_s: float = 0.0
    error_episodes: int = 0
    staleness: list[float] = field(default_factory=list)  # peak age / period, per cycle
    stale_without_failures: float = 0.0  # the peak over cycles in which no run failed
    lateness: list[float] = field(default_factory=list)  # start - should_start_by, seconds
    busy_slot_s: float = 0.0
    down_slot_s: float = 0.0
    runs: int = 0
    failures: int = 0
    interrupted: int = 0
    wasted: int = 0
    skipped: int = 0
    late_starts: int = 0  # runs started after their should_start_by
    in_error: set[str] = field(default_factory=set)  # schedules with any ERROR in the window
    #: schedule -> priority class; the per-class figures are kept for these
    class_of: dict[str, int] = field(default_factory=dict)
    error_by_class: dict[int, float] = field(default_factory=dict)
    stale_by_class: dict[int, float] = field(default_factory=dict)  # peak staleness
    late_by_class: dict[int, float] = field(default_factory=dict)  # latest start, seconds

    def add_lateness(self, name: str, late: float) -> None:
        """A run of ``name`` started ``late`` seconds after its should_start_by."""
        self.lateness.append(late)
        cls = self.class_of.get(name)
        if cls is not None and late > self.late_by_class.get(cls, 0.0):
            self.late_by_class[cls] = late

    def add_staleness(self, name: str, value: float, *, failed: bool = False) -> None:
        """One cycle's peak age / period of ``name`` (``failed``: a run failed in it)."""
        self.staleness.append(value)
        if not failed and value > self.stale_without_failures:
            self.stale_without_failures = value
        cls = self.class_of.get(name)
        if cls is not None and value > self.stale_by_class.get(cls, 0.0):
            self.stale_by_class[cls] = value

    def overlap(self, a: float, b: float) -> float:
        return max(0.0, min(b, self.window_end) - max(a, self.window_start))

    def account(
        self,
        name: str,
        a: float,
        b: float,
        deadline: float,
        expected: float,
        running_since: float | None,
        failed: bool,
    ) -> None:
        """One schedule's conditions over ``[a, b]`` with a fixed deadline."""
        a = max(a, self.window_start)
        b = min(b, self.window_end)
        if b <= a:
            return
        if b > deadline:
            self.error_s += b - max(a, deadline)
            self.in_error.add(name)
            cls = self.class_of.get(name)
            if cls is not None:
                self.error_by_class[cls] = self.error_by_class.get(cls, 0.0) + b - max(a, deadline)
        ok_end = min(b, deadline)
        if ok_end <= a:
            return
        if failed:
            self.warning_s += ok_end - a
        elif running_since is not None:
            if running_since + expected > deadline:
                self.warning_s += ok_end - a
        elif ok_end > deadline - expected:
            self.warning_s += ok_end - max(a, deadline - expected)


class SlotHistory:
    """When slots were free, per placement group (the workers a set of schedules
    may run on), from time 0 on.

    The loop calls :meth:`note` after every step's dispatch with each group's
    state (``NONE_FREE``, ``USABLE_FREE``, ``OTHER_FREE``), which holds until
    the next note. Only changes are kept, with the seconds each group has spent
    in ``USABLE_FREE`` and ``OTHER_FREE`` up to them, so :meth:`measure` of any
    past interval is two bisects."""

    def __init__(self, groups: int) -> None:
        self.groups = groups
        self.times: list[float] = [0.0]
        self.states: list[tuple[int, ...]] = [(NONE_FREE,) * groups]
        #: per change: (usable seconds, other seconds) per group before it
        self.cum: list[tuple[tuple[float, float], ...]] = [((0.0, 0.0),) * groups]

    def note(self, t: float, states: tuple[int, ...]) -> None:
        """From ``t`` on, group ``g`` is in ``states[g]``."""
        if states == self.states[-1]:
            return
        last_t, last_states, last_cum = self.times[-1], self.states[-1], self.cum[-1]
        if t <= last_t:  # a zero-length state: replaced
            self.states[-1] = states
            return
        dt = t - last_t
        self.cum.append(
            tuple(
                (u + dt if st == USABLE_FREE else u, o + dt if st == OTHER_FREE else o)
                for (u, o), st in zip(last_cum, last_states, strict=True)
            )
        )
        self.times.append(t)
        self.states.append(states)

    def _at(self, group: int, t: float) -> tuple[float, float]:
        i = max(bisect_right(self.times, t) - 1, 0)
        u, o = self.cum[i][group]
        dt = t - self.times[i]
        state = self.states[i][group]
        return (u + dt if state == USABLE_FREE else u, o + dt if state == OTHER_FREE else o)

    def measure(self, group: int, a: float, b: float) -> tuple[float, float]:
        """Seconds of ``[a, b]`` in which a slot ``group`` may use was free, and
        in which slots were free but none it may use."""
        if b <= a:
            return 0.0, 0.0
        u0, o0 = self._at(group, a)
        u1, o1 = self._at(group, b)
        return u1 - u0, o1 - o0


class CauseTally:
    """ERROR-seconds by cause (``docs/simulator.md``, "Causes of ERROR").

    The loop reports each schedule's segments (:meth:`account`, between two
    changes of its state, with its deadline and margin fixed) and run starts
    (:meth:`started`). An idle schedule's time after its ``should_start_by``
    is its *wait*, split second by second: blackout (inside one of its
    windows), else order (a slot it may use was free), placement (slots were
    free, none it may use), capacity (no slot free); with its last run failed,
    failure. Its ERROR-seconds while idle take that split. A run's
    ERROR-seconds go to failure if the last run failed, else to overrun if it
    started by its ``should_start_by`` (it outlasted its margin), else to the
    cause that held the longest part of its wait; late without an idle wait
    (its previous run was still running at its ``should_start_by``), to its
    previous run's cause."""

    def __init__(
        self,
        window_start: float,
        window_end: float,
        history: SlotHistory,
        group_of: Mapping[str, int],
        blackouts: Mapping[str, Sequence[tuple[float, float]]],
    ) -> None:
        """``group_of``: schedule -> placement group of ``history``; ``blackouts``:
        schedule -> its blackout windows in seconds from the start, merged, in order."""
        self.window_start, self.window_end = window_start, window_end
        self.history = history
        self.group_of = group_of
        self.blackouts = {name: (tuple(s for s, _ in w), tuple(w)) for name, w in blackouts.items()}
        self.error_s: dict[str, float] = dict.fromkeys(CAUSES, 0.0)
        self.wait: dict[str, dict[str, float]] = {}
        self.run_cause: dict[str, str] = {}

    def account(
        self,
        name: str,
        a: float,
        b: float,
        deadline: float,
        margin: float,
        running: bool,
        failed: bool,
    ) -> None:
        """``name`` over ``[a, b]``: running or idle, its last run failed or not."""
        error_from = max(a, deadline, self.window_start)
        if running:
            end = min(b, self.window_end)
            if end > error_from:
                cause = FAILURE if failed else self.run_cause.get(name, CAPACITY)
                self.error_s[cause] += end - error_from
            return
        start = max(a, deadline - margin)
        if b <= start:
            return
        wait = self.wait.get(name)
        if wait is None:
            wait = self.wait[name] = dict.fromkeys(CAUSES, 0.0)
        # [start, b] is a wait; its part in [error_from, window_end] is ERROR too
        lo = min(max(error_from, start), b)
        hi = min(max(self.window_end, lo), b)
        if lo > start:
            self._add(name, start, lo, failed, wait, None)
        if hi > lo:
            self._add(name, lo, hi, failed, wait, self.error_s)
        if b > hi:
            self._add(name, hi, b, failed, wait, None)

    def _add(
        self,
        name: str,
        a: float,
        b: float,
        failed: bool,
        wait: dict[str, float],
        error: dict[str, float] | None,
    ) -> None:
        if failed:
            wait[FAILURE] += b - a
            if error is not None:
                error[FAILURE] += b - a
            return
        blackout, order, placement, capacity = self.split(name, a, b)
        wait[BLACKOUT] += blackout
        wait[ORDER] += order
        wait[PLACEMENT] += placement
        wait[CAPACITY] += capacity
        if error is not None:
            error[BLACKOUT] += blackout
            error[ORDER] += order
            error[PLACEMENT] += placement
            error[CAPACITY] += capacity

    def split(self, name: str, a: float, b: float) -> tuple[float, float, float, float]:
        """An idle, not failed schedule's ``[a, b]`` by cause: seconds of
        blackout, order, placement and capacity."""
        group = self.group_of.get(name, 0)
        usable, other = self.history.measure(group, a, b)
        blackout = 0.0
        windows = self.blackouts.get(name)
        if windows is not None:
            starts, spans = windows
            i = max(bisect_left(starts, a) - 1, 0)
            while i < len(spans) and spans[i][0] < b:
                x, y = max(spans[i][0], a), min(spans[i][1], b)
                if y > x:
                    blackout += y - x
                    u, o = self.history.measure(group, x, y)
                    usable, other = usable - u, other - o
                i += 1
        usable, other = max(usable, 0.0), max(other, 0.0)
        return blackout, usable, other, max(b - a - blackout - usable - other, 0.0)

    def started(self, name: str, late: float) -> None:
        """``name`` started ``late`` seconds after its ``should_start_by``: the
        cause its run's ERROR-seconds will take (:class:`CauseTally`)."""
        wait = self.wait.pop(name, None)
        if late <= 0:
            self.run_cause[name] = OVERRUN
        elif wait and max(wait.values()) > WAIT_EPSILON_S:  # not a rounding error's wait
            self.run_cause[name] = max(CAUSES, key=wait.__getitem__)
        else:  # late without an idle wait: its previous run kept it, and takes the blame
            self.run_cause[name] = self.run_cause.get(name, OVERRUN)


def placement_groups(workload: Workload) -> tuple[list[tuple[int, ...]], dict[str, int]]:
    """The distinct sets of workers (indices into ``workload.workers``) that
    schedules may run on (their pool's queue, not a ``dont_run_on_nodes`` node),
    and each schedule's set."""
    groups: dict[tuple[int, ...], int] = {}
    group_of: dict[str, int] = {}
    for s in workload.schedules:
        queue, excluded = s.spec.pool or workload.default_queue, s.spec.dont_run_on_nodes
        allowed = tuple(
            i
            for i, w in enumerate(workload.workers)
            if queue in w.queues and w.node not in excluded and w.name not in excluded
        )
        group_of[s.name] = groups.setdefault(allowed, len(groups))
    return list(groups), group_of


def blackout_windows(workload: Workload) -> dict[str, list[tuple[float, float]]]:
    """Each schedule with blackouts: its windows over the horizon, in seconds
    from the workload's start (merged, in order)."""
    out: dict[str, list[tuple[float, float]]] = {}
    first = (workload.start - timedelta(days=1)).date()
    days = int(workload.horizon_s // 86400) + 3
    for s in workload.schedules:
        if s.spec.blackout_periods:
            windows = windows_between(s.spec.blackout_periods, s.spec.tz, first, days)
            out[s.name] = [
                ((a - workload.start).total_seconds(), (b - workload.start).total_seconds())
                for a, b in windows
            ]
    return out


@dataclass(frozen=True)
class SimResult:
    """The figures of one simulation (seconds unless named otherwise)."""

    policy: str
    schedules: int
    slots: int
    load: float
    horizon_s: float
    warmup_s: float
    error_fraction: float  # of schedule-time in the window
    warning_fraction: float
    error_s: float
    error_episodes: int
    schedules_in_error: int  # schedules with any ERROR after warm-up
    max_staleness: float  # (now - last_good_start_at) / period, peak over cycles
    p99_staleness: float
    late_starts: int  # runs started after should_start_by
    mean_lateness_s: float  # dispatch start - should_start_by, late dispatches count
    p99_lateness_s: float
    max_lateness_s: float
    utilization: float
    runs: int
    failures: int
    interrupted: int
    wasted_runs: int
    skipped: int
    recovery_s: float | None  # after the last outage: until no schedule is in ERROR
    wall_s: float
    #: priority class -> {"schedules", "error_s", "error_fraction", "max_staleness",
    #: "max_lateness_s"}
    by_class: dict[int, dict[str, float]] = field(default_factory=dict)
    #: cause (:data:`CAUSES`) -> ERROR-seconds; they add up to ``error_s``
    error_by_cause: dict[str, float] = field(default_factory=dict)
    #: ``max_staleness`` over the cycles in which no run failed
    max_staleness_without_failures: float = 0.0
    #: after warm-up: dispatches the priority classes chose over the policy's
    #: own order (None: the policy has no classes)
    class_picks: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(
    tally: Tally,
    *,
    policy: str,
    schedules: int,
    slots: int,
    load: float,
    horizon_s: float,
    recovery_s: float | None,
    wall_s: float,
    error_by_cause: Mapping[str, float] | None = None,
) -> SimResult:
    window = max(tally.window_end - tally.window_start, 0.0)
    sizes: dict[int, int] = {}
    for cls in tally.class_of.values():
        sizes[cls] = sizes.get(cls, 0) + 1
    by_class = {
        cls: {
            "schedules": float(n),
            "error_s": tally.error_by_class.get(cls, 0.0),
            "error_fraction": tally.error_by_class.get(cls, 0.0) / (window * n or 1.0),
            "max_staleness": tally.stale_by_class.get(cls, 0.0),
            "max_lateness_s": tally.late_by_class.get(cls, 0.0),
        }
        for cls, n in sorted(sizes.items())
    }
    schedule_time = window * schedules or 1.0
    stale = sorted(tally.staleness)
    late = sorted(max(x, 0.0) for x in tally.lateness)
    available = slots * window - tally.down_slot_s
    return SimResult(
        policy=policy,
        schedules=schedules,
        slots=slots,
        load=round(load, 4),
        horizon_s=horizon_s,
        warmup_s=tally.window_start,
        error_fraction=tally.error_s / schedule_time,
        warning_fraction=tally.warning_s / schedule_time,
        error_s=tally.error_s,
        error_episodes=tally.error_episodes,
        schedules_in_error=len(tally.in_error),
        max_staleness=stale[-1] if stale else 0.0,
        p99_staleness=percentile(stale, 99),
        late_starts=tally.late_starts,
        mean_lateness_s=sum(late) / len(late) if late else 0.0,
        p99_lateness_s=percentile(late, 99),
        max_lateness_s=late[-1] if late else 0.0,
        utilization=tally.busy_slot_s / available if available > 0 else 0.0,
        runs=tally.runs,
        failures=tally.failures,
        interrupted=tally.interrupted,
        wasted_runs=tally.wasted,
        skipped=tally.skipped,
        recovery_s=recovery_s,
        wall_s=round(wall_s, 3),
        by_class=by_class,
        error_by_cause=dict(error_by_cause or {}),
        max_staleness_without_failures=tally.stale_without_failures,
    )
