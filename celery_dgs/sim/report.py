"""Running several policies, searching the slot count, and the lines and
table ``celery dgs simulate`` prints."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from ..core.durations import format_duration
from ..core.ranking import OrderPolicy
from ..core.servable import Unservable, never_servable
from ..core.spec import CheckSpec
from .deadline_policy import DEFAULT_ORDER
from .loop import WASTED_FRACTION, Simulator, simulate
from .metrics import CAUSES, SimResult, Tally
from .workload import DEFAULT_SLOTS_PER_WORKER, Workload

#: (header, SimResult field, format) of the table's columns.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("policy", "policy", "{}"),
    ("load", "load", "{:.2f}"),
    ("slots", "slots", "{}"),
    ("ERROR %", "error_fraction", "{:.3%}"),
    ("WARN %", "warning_fraction", "{:.3%}"),
    ("ERROR s", "error_s", "{:.0f}"),
    ("episodes", "error_episodes", "{}"),
    ("in ERROR", "schedules_in_error", "{}"),
    ("max stale", "max_staleness", "{:.2f}"),
    ("p99 stale", "p99_staleness", "{:.2f}"),
    ("late starts", "late_starts", "{}"),
    ("p99 late s", "p99_lateness_s", "{:.0f}"),
    ("util", "utilization", "{:.1%}"),
    ("runs", "runs", "{}"),
    ("wasted", "wasted_runs", "{}"),
    ("recovery s", "recovery_s", "{:.0f}"),
    ("wall s", "wall_s", "{:.1f}"),
)


def format_table(results: Sequence[SimResult], *, label: Sequence[str] | None = None) -> str:
    """One row per result; ``label`` adds a first column (e.g. the scenario).
    After "ERROR s", the ERROR-seconds of each cause that any row has."""
    causes = [c for c in CAUSES if any(r.error_by_cause.get(c) for r in results)]
    split = [h for h, _, _ in COLUMNS].index("ERROR s") + 1
    heads = [h for h, _, _ in COLUMNS]
    headers = ([""] if label else []) + heads[:split] + causes + heads[split:]
    rows = []
    for i, r in enumerate(results):
        cells = [label[i]] if label else []
        for j, (_, attr, fmt) in enumerate(COLUMNS):
            if j == split:
                cells += [f"{r.error_by_cause.get(c, 0.0):.0f}" for c in causes]
            value = getattr(r, attr)
            cells.append("-" if value is None else fmt.format(value))
        rows.append(cells)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def wasted_note(results: Sequence[SimResult]) -> str | None:
    """What the table's ``wasted`` column counts, when a row has any."""
    if not any(r.wasted_runs for r in results):
        return None
    return (
        f"wasted: runs started less than {WASTED_FRACTION:g} of a period after the previous "
        "good start (freshness did not need them: a longer cooldown keeps them down)"
    )


def slots_text(slots: float) -> str:
    """A number of slots with two decimals, or two significant digits below
    0.01 (``0.00034``), so a small demand does not read as none."""
    return f"{slots:.2f}" if slots >= 0.01 or slots == 0 else f"{slots:.2g}"


def workload_summary(w: Workload, *, searching: bool = False) -> str:
    """The workload in one line; ``searching`` (``--find-slots``): the demand in
    slots instead of the slot count and load."""
    outages = ", ".join(f"{o.start_s / 3600:g}h-{o.end_s / 3600:g}h" for o in w.outages)
    size = (
        f"demand {slots_text(w.load() * w.slots)} slots"
        if searching
        else f"{w.slots} slot{'' if w.slots == 1 else 's'}, load {w.load():.2f}"
    )
    return (
        f"{len(w.schedules)} schedules, {size}, "
        f"horizon {format_duration(round(w.horizon_s))}, "
        f"warm-up {format_duration(round(w.effective_warmup()))}, "
        f"seed {w.seed}" + (f", outages {outages}" if outages else "")
    )


def unservable(workload: Workload) -> dict[str, Unservable]:
    """Schedules that can never be served with their mean run time, by name
    (deferred checks are not looked at: each is one run at its time)."""
    found = {}
    for sched in workload.schedules:
        if isinstance(sched.spec, CheckSpec):
            continue
        problem = never_servable(
            sched.spec, workload.start, duration=timedelta(seconds=sched.duration_s)
        )
        if problem is not None:
            found[sched.name] = problem
    return found


def format_order(order: OrderPolicy) -> str:
    """``dgs``'s order settings in one line."""

    def seconds(value: float | None) -> str:
        return "off" if value is None else f"{value:g} s"

    parts = [f"dgs order: overload {order.overload}"]
    if order.overload == "shed":
        parts.append(f"shed horizon {seconds(order.shed_horizon_s)}")
    if order.overload == "restore":
        parts.append(f"restore aging {order.restore_aging:g}")
        parts.append(f"laxity floor {seconds(order.laxity_floor_s)}")
    if order.goal != "fair":
        parts.append(f"giving up: {order.goal} (floor {order.floor_periods:g} periods)")
    parts.append(f"elevator {seconds(order.elevator_interval_s)}")
    parts.append(f"look-ahead {'on' if order.lookahead else 'off'}")
    if order.window_size is not None:
        parts.append(f"window {order.window_size} schedules, {order.window_s:g} s ahead")
        read_on = order.window_read_on
        if read_on != 0:
            far = "as far as needed" if read_on is None else f"{read_on:g} sizes"
            parts.append(f"picks checked, reading on {far}")
    return ", ".join(parts)


def run_policies(
    workload: Workload, policies: Sequence[str], order: OrderPolicy = DEFAULT_ORDER
) -> list[SimResult]:
    """``workload`` under each of ``policies``, ``dgs`` ordered by ``order``."""
    return [simulate(workload, p, order=order) for p in policies]


@dataclass(frozen=True)
class SlotSearch:
    """The answer of :func:`find_slots`.

    ``slots``: the smallest slot count without ERROR after warm-up (``None``:
    none). ``tried``: slots -> ERROR seconds (a count that failed may have been
    stopped at its first ERROR: its figure is then a lower bound). ``result``:
    the full run at ``slots``, else the run with a slot for every schedule.
    ``unservable``: schedules in ERROR even with :func:`ample_slots` (a slot
    for every schedule, or four times the demand) -> their ERROR seconds there;
    ``others``: then the answer for the rest of the fleet."""

    slots: int | None
    tried: dict[int, float]
    result: SimResult | None
    unservable: dict[str, float] = field(default_factory=dict)
    #: With ``unservable`` schedules: the search over every other schedule
    #: (``None``: none is left).
    others: SlotSearch | None = None


class _ErrorSeen(Exception):
    """Raised by :class:`_ErrorTally` to stop a run at its first ERROR."""


@dataclass
class _ErrorTally(Tally):
    """A :class:`Tally` that also keeps ERROR seconds per schedule, and stops the
    run at the first ERROR when ``stop_on_error``."""

    stop_on_error: bool = False
    by_schedule: dict[str, float] = field(default_factory=dict)

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
        before = self.error_s
        super().account(name, a, b, deadline, expected, running_since, failed)
        if self.error_s > before:
            self.by_schedule[name] = self.by_schedule.get(name, 0.0) + self.error_s - before
            if self.stop_on_error:
                raise _ErrorSeen


def _run(
    workload: Workload, policy: str, order: OrderPolicy, *, stop_on_error: bool
) -> tuple[SimResult | None, _ErrorTally]:
    """Simulate; ``(None, tally)`` when stopped at the first ERROR."""
    sim = Simulator(workload, policy, order=order)
    tally = _ErrorTally(sim.tally.window_start, sim.tally.window_end, stop_on_error=stop_on_error)
    sim.tally = tally
    try:
        return sim.run(), tally
    except _ErrorSeen:
        return None, tally


#: The first run of :func:`find_slots` has a slot for every schedule, or this
#: many times the demand when that is fewer (plus a few): schedules without a
#: cooldown re-run back to back on idle slots, and a thousand idle slots would
#: make that run a thousand times longer than needed.
AMPLE_DEMAND_FACTOR = 4
AMPLE_MIN_SLOTS = 8


def ample_slots(workload: Workload) -> int:
    """Slots for the first run of :func:`find_slots`: one per schedule, at most
    ``AMPLE_DEMAND_FACTOR`` times the demand (and at least ``AMPLE_MIN_SLOTS``)."""
    demand = workload.load() * workload.slots
    ample = max(AMPLE_MIN_SLOTS, AMPLE_DEMAND_FACTOR * math.ceil(demand))
    return max(1, min(len(workload.schedules), ample))


def find_slots(
    workload: Workload,
    policy: str = "dgs",
    *,
    per_worker: int = DEFAULT_SLOTS_PER_WORKER,
    progress: Callable[[int, float, bool], None] | None = None,
    order: OrderPolicy = DEFAULT_ORDER,
    search_others: bool = True,
) -> SlotSearch:
    """The smallest slot count with no ERROR after warm-up.

    First a run with a slot for every schedule (no more can ever be busy; at
    most :func:`ample_slots`): a schedule in ERROR there is in ERROR at any
    slot count: the search names it (:attr:`SlotSearch.unservable`) and runs
    again over the others (``search_others``; once). Otherwise the count
    doubles from the demand (sum of mean duration / period, rounded up) until
    one has no ERROR, then bisects; a run that fails is stopped at its first
    ERROR. More slots never add ERROR for the greedy policies; the search
    assumes it. ``progress(slots, error_s, complete)`` is told each run;
    ``order`` orders ``dgs``."""
    tried: dict[int, float] = {}
    results: dict[int, SimResult] = {}
    demand = workload.load() * workload.slots
    unlimited = ample_slots(workload)

    def ok(slots: int) -> bool:
        stop = slots != unlimited
        sized = workload.with_slots(slots, per_worker)
        result, tally = _run(sized, policy, order, stop_on_error=stop)
        tried[slots] = tally.error_s
        if result is not None:
            results[slots] = result
        if progress is not None:
            progress(slots, tally.error_s, result is not None)
        return tally.error_s == 0

    ample = workload.with_slots(unlimited, per_worker)
    result, tally = _run(ample, policy, order, stop_on_error=False)
    tried[unlimited] = tally.error_s
    if progress is not None:
        progress(unlimited, tally.error_s, True)
    if tally.error_s > 0:
        unservable = dict(sorted(tally.by_schedule.items()))
        rest = [s for s in workload.schedules if s.name not in unservable]
        others = None
        if rest and search_others:  # the answer for the rest of the fleet
            rest_workload = replace(workload, schedules=rest)
            others = find_slots(
                rest_workload,
                policy,
                per_worker=per_worker,
                progress=progress,
                order=order,
                search_others=False,
            )
        return SlotSearch(None, tried, result, unservable, others)
    results[unlimited] = result  # type: ignore[assignment]  # complete: not stopped
    hi = min(unlimited, max(1, math.ceil(demand)))
    lo = hi - 1  # below the demand: fails (assumed, not run)
    while hi < unlimited and not ok(hi):
        lo, hi = hi, min(unlimited, hi * 2)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return SlotSearch(hi, tried, results[hi])
