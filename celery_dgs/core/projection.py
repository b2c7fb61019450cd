"""Projected start times from the live state (pure): who will start late?

Replays beat's order on a virtual clock from ``now``: slots become free
when the runs holding them are expected to end (their start plus the
schedule's expected duration) or now if free; each time a slot frees, the
index of beat's overload policy (the same
:func:`~celery_dgs.core.overload.make_index` beat decides with: lowest
``should_start_by`` first, late ones shortest first under ``restore``)
chooses who takes it. Every
projected run lasts its expected duration. A schedule projected to start
after its ``should_start_by`` gets the WARNING reason ``projected_late``
before the per-schedule rule (``now + expected > error_at``) fires: the
queue ahead of it, not its own deadline, makes it late.

Pools are not separated: the projection is for one shared set of slots
(the caller passes the slots of the workers that serve a pool, or all).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .laxity import DEFAULT_LAXITY_FLOOR_S
from .overload import (
    DEFAULT_OVERLOAD_POLICY,
    DEFAULT_RESTORE_AGING,
    DEFAULT_SHED_HORIZON_S,
    make_index,
)


@dataclass(frozen=True)
class Waiting:
    """A schedule that is not running: its start times and expected duration (seconds)."""

    name: str
    can_start_by: float
    should_start_by: float
    expected_s: float
    #: ``error_at - should_start_by`` (the laxity denominator); None: ``expected_s``.
    margin_s: float | None = None


def project_starts(
    waiting: Iterable[Waiting],
    busy_until: Sequence[float],
    free_slots: int,
    now: float,
    *,
    horizon_s: float = 86400.0,
    overload_policy: str = DEFAULT_OVERLOAD_POLICY,
    shed_horizon_s: float = DEFAULT_SHED_HORIZON_S,
    restore_aging: float = DEFAULT_RESTORE_AGING,
    laxity_floor_s: float | None = DEFAULT_LAXITY_FLOOR_S,
) -> dict[str, float]:
    """Projected start time of each waiting schedule that starts before ``now + horizon_s``.

    ``busy_until``: expected end of each run in progress (one slot each);
    ``free_slots``: slots free now. Times are float seconds (epoch). The order
    is beat's ``overload_policy`` (:func:`~celery_dgs.core.overload.make_index`).
    """
    expected: dict[str, float] = {}
    margins: dict[str, float] = {}
    index = make_index(overload_policy, shed_horizon_s, expected.__getitem__, restore_aging,
                       margin_s=margins.__getitem__, laxity_floor_s=laxity_floor_s)  # fmt: skip
    waiting = list(waiting)
    for w in waiting:
        expected[w.name] = max(w.expected_s, 0.0)
        margins[w.name] = expected[w.name] if w.margin_s is None else max(w.margin_s, 0.0)
    index.upsert_many((w.name, w.can_start_by, w.should_start_by) for w in waiting)
    slots = [max(t, now) for t in busy_until] + [now] * max(free_slots, 0)
    heapq.heapify(slots)
    projected: dict[str, float] = {}
    end = now + horizon_s
    while slots and len(index):
        t = heapq.heappop(slots)
        if t > end:
            break
        name = index.pop(t)
        if name is None:
            wake = index.next_wakeup()
            if wake is None:
                break
            heapq.heappush(slots, max(wake, t))
            continue
        projected[name] = t
        heapq.heappush(slots, t + expected[name])
    return projected
