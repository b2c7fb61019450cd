"""Running several policies, searching the slot count, and printing the table."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .loop import simulate
from .metrics import SimResult
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
    """One row per result; ``label`` adds a first column (e.g. the scenario)."""
    headers = ([""] if label else []) + [h for h, _, _ in COLUMNS]
    rows = []
    for i, r in enumerate(results):
        cells = [label[i]] if label else []
        for _, attr, fmt in COLUMNS:
            value = getattr(r, attr)
            cells.append("-" if value is None else fmt.format(value))
        rows.append(cells)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def run_policies(workload: Workload, policies: Sequence[str]) -> list[SimResult]:
    return [simulate(workload, p) for p in policies]


@dataclass(frozen=True)
class SlotSearch:
    slots: int | None  # the smallest slot count without ERROR after warm-up (None: not found)
    tried: dict[int, float]  # slots -> ERROR seconds
    result: SimResult | None


def find_slots(
    workload: Workload, policy: str = "dgs", *, per_worker: int = DEFAULT_SLOTS_PER_WORKER,
    max_slots: int | None = None, progress: Callable[[int, SimResult], None] | None = None,
) -> SlotSearch:  # fmt: skip
    """Binary search of the smallest slot count with no ERROR after warm-up.

    Starts at the demand (sum of mean duration / period, rounded up) and doubles
    until a count has no ERROR, then bisects (more slots never add ERROR for
    the greedy policies; the search assumes it)."""
    demand = workload.load() * workload.slots
    lo = max(1, math.ceil(demand)) - 1  # known (assumed) failing
    cap = max_slots or max(64, 64 * math.ceil(demand))
    tried: dict[int, float] = {}
    results: dict[int, SimResult] = {}

    def ok(slots: int) -> bool:
        result = simulate(workload.with_slots(slots, per_worker), policy)
        tried[slots], results[slots] = result.error_s, result
        if progress is not None:
            progress(slots, result)
        return result.error_s == 0

    hi = max(lo + 1, 1)
    while not ok(hi):
        lo = hi
        if hi >= cap:
            return SlotSearch(None, tried, None)
        hi = min(cap, max(hi + 1, math.ceil(hi * 1.25)))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return SlotSearch(hi, tried, results[hi])
