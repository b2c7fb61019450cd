"""Projected start times from the live state (pure): who will start late?

Replays beat's order on a virtual clock from ``now``: slots become free
when the runs holding them are expected to end (their start plus the
schedule's expected duration) or now if free; each time a slot frees, the
index of beat's overload policy (built by the same
:func:`~celery_dgs.core.ranking.overload_index` as beat's: lowest
``should_start_by`` first, late ones shortest first under ``restore``)
chooses who takes it; the priority classes are not replayed. Every
projected run lasts its expected duration. A schedule projected to start
after its ``should_start_by`` gets the WARNING reason ``projected_late``
before the per-schedule rule (``now + expected > error_at``) fires: the
queue ahead of it, not its own deadline, makes it late.

With a :class:`~celery_dgs.core.lookahead.DemandBook` (``dgs_lookahead``)
each projected start is first offered to the look-ahead admission, as beat
offers its choices: a long run the admission holds is looked at again when
it says, and its slot goes to the next schedule meanwhile.

Pools are not separated: the projection is for one shared set of slots
(the caller passes the slots of the workers that serve a pool, or all).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .lookahead import AdmissionRound, CapQueue, DemandBook
from .ranking import OrderPolicy, overload_index

#: Beat's default order.
_DEFAULT_ORDER = OrderPolicy()


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
    order: OrderPolicy = _DEFAULT_ORDER,
    lookahead: DemandBook | None = None,
    busy_run_s: Sequence[float] | None = None,
    held_now: set[str] | None = None,
) -> dict[str, float]:
    """Projected start time of each waiting schedule that starts before ``now + horizon_s``.

    ``busy_until``: expected end of each run in progress (one slot each);
    ``free_slots``: slots free now. Times are float seconds (epoch). The order
    is the overload policy's index of ``order``
    (:func:`~celery_dgs.core.ranking.overload_index`), without the priority classes.
    ``lookahead``: the shares of every schedule, to apply the look-ahead
    admission; ``busy_run_s``: the expected run time of each run in
    ``busy_until`` (same order; without it they count as short runs);
    ``held_now``: filled with the schedules the admission holds at ``now``
    while a slot is free.
    """
    expected: dict[str, float] = {}
    margins: dict[str, float] = {}
    index = overload_index(order, expected_s=expected.__getitem__, margin_s=margins.__getitem__)
    waiting = list(waiting)
    for w in waiting:
        expected[w.name] = max(w.expected_s, 0.0)
        margins[w.name] = expected[w.name] if w.margin_s is None else max(w.margin_s, 0.0)
    index.upsert_many((w.name, w.can_start_by, w.should_start_by) for w in waiting)
    slots = [max(t, now) for t in busy_until] + [now] * max(free_slots, 0)
    total_slots = len(slots)
    heapq.heapify(slots)
    # The admission's view: (end, run time) of the runs in progress and
    # projected, by end (the ended ones leave as the clock passes them), and
    # the candidates its cap holds.
    runs: list[tuple[float, float]] = []
    should: dict[str, float] = {}
    queue = CapQueue()
    if lookahead is not None:
        run_s = busy_run_s if busy_run_s is not None else [0.0] * len(busy_until)
        runs = [(max(t, now), r) for t, r in zip(busy_until, run_s, strict=True)]
        heapq.heapify(runs)
        should = {w.name: w.should_start_by for w in waiting}
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
        if lookahead is not None:
            while runs and runs[0][0] <= t:
                heapq.heappop(runs)
            admission = AdmissionRound(
                lookahead, t, total_slots, functools.partial(list, runs), queue
            )
            wake = admission.hold_until(expected[name], should[name], name)
            if wake is not None:  # held: looked at again then; the slot stays free
                if held_now is not None and t <= now:
                    held_now.add(name)
                index.upsert(name, wake, should[name])
                heapq.heappush(slots, t)
                continue
            heapq.heappush(runs, (t + expected[name], expected[name]))
        projected[name] = t
        heapq.heappush(slots, t + expected[name])
    return projected
