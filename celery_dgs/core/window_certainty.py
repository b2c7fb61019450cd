"""Whether a full window's pick is the whole fleet's (pure): the certainty rule.

While beat's window of schedules is full (:mod:`~celery_dgs.core.window`),
every eligible schedule it does not hold has a kept ``should_start_by`` at or
after ``E``, the window's end. In the deadline order that makes the window's
top the fleet's. Beat's default order (``restore`` with relative laxity,
:mod:`~celery_dgs.core.laxity`) ranks by what moves with ``now``; ``E``
still bounds every schedule not held, so each candidate the index offers
can be checked against it before it is taken (:meth:`PickBound.vouches`):

* a run request is always held: certain;
* a candidate in ERROR (``error_at = should + margin`` passed) is taken by
  its late key ``k = should + aging * expected run``; a schedule not held
  has a late key at or after its ``should_start_by``, so ``k < E`` makes it
  the fleet's first in ERROR;
* a candidate not in ERROR is taken by relative laxity ``(error_at - now) /
  (margin + floor)`` among the tops of the margin buckets (each bucket
  ordered by ``error_at``). With ``E >= now`` no schedule not held is in
  ERROR, each has a laxity above ``min(1, (E - now) / floor)``, and one in
  the candidate's bucket has an ``error_at`` of at least ``E`` plus the
  bucket's least margin. A candidate below both is the fleet's pick;
* without relative laxity (``dgs_laxity_floor = None``) a candidate not late
  is taken by ``should_start_by``: certain once ``E >= now``.

A candidate the rule cannot vouch for is not taken: the window reads its
next slice (``E`` moves on) and the round asks again, so the picks are the
fleet's, at the cost of holding more while the window reads on (the next
start-over lets the extra go). How far it may read on is the window's
``read_on`` (``dgs_schedule_window_read_on``; 0, the default: no check), and
:func:`read_on_helps` stops it where reading that far could not make the
pick certain (under a backlog past its deadlines, nothing can). The
priority classes and the revisit groups choose among the candidates the
rule vouched for; ``shed`` and the ``fewest_errors`` goal are not checked
(they choose among the held).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .index import IndexedTimes
from .late_order import is_run_request
from .laxity import BUCKET_WIDTH, bucket_of
from .ranking import OrderPolicy
from .window import ScheduleBounds

__all__ = ["PickBound", "Vouching", "choose_reading_on", "pick_bound", "read_on_helps"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class PickBound:
    """The rule for one order: ``aging`` (``dgs_restore_aging``) and
    ``floor_s`` (``dgs_laxity_floor``; ``None``: no relative laxity);
    ``expected_s`` and ``margin_s`` as the index reads them."""

    expected_s: Callable[[str], float]
    margin_s: Callable[[str], float]
    aging: float
    floor_s: float | None

    def vouches(self, name: str, times: IndexedTimes, now: float, end: float | None) -> bool:
        """Whether ``name``, indexed with ``times``, goes before every schedule
        the window does not hold, which all have ``should_start_by >= end``
        (``None``: the window holds every eligible schedule)."""
        if end is None:
            return True
        should, can = times.should_start_by, times.can_start_by
        if is_run_request(can, should):
            return True
        margin = self._margin(name)
        error_at = should + margin
        floor = self.floor_s
        late = error_at < now if floor is not None else should < now
        if late:
            return should + self.aging * max(self.expected_s(name), 0.0) < end
        if end < now:  # a schedule not held may be late already
            return False
        if floor is None:
            return True
        scale = margin + floor
        if scale <= 0:  # no margin, no floor: taken only once late
            return False
        laxity = (error_at - now) / scale
        least = min(1.0, (end - now) / floor) if floor > 0 else 1.0
        if not laxity < least:
            return False
        # 1e-9 below the bucket's edge: a scale rounded into the bucket is above it
        least_margin = max(0.0, BUCKET_WIDTH ** bucket_of(scale) * (1 - 1e-9) - floor)
        return error_at < end + least_margin

    def _margin(self, name: str) -> float:
        margin = self.margin_s(name)
        return margin if math.isfinite(margin) and margin > 0 else 0.0


def pick_bound(
    policy: OrderPolicy, *, expected_s: Callable[[str], float], margin_s: Callable[[str], float]
) -> PickBound | None:
    """The rule for ``policy``'s order; ``None``: no check, either because the
    window's top is the fleet's already (``greedy``, the deadline order) or
    because the order is not checked (``shed``, the ``fewest_errors`` goal)."""
    if policy.overload != "restore" or policy.goal == "fewest_errors":
        return None
    return PickBound(expected_s, margin_s, policy.restore_aging, policy.laxity_floor_s)


class Vouching:
    """One call of :func:`~celery_dgs.core.placement.choose_dispatches`'s
    ``vouch`` at ``now`` against a window whose end is ``end`` (``None``: not
    full); ``refused``: the first schedule it refused, if any."""

    def __init__(
        self,
        bound: PickBound,
        times_of: Callable[[str], IndexedTimes | None],
        now: float,
        end: float | None,
    ) -> None:
        self.bound, self.times_of, self.now, self.end = bound, times_of, now, end
        self.refused: str | None = None

    def __call__(self, name: str) -> bool:
        times = self.times_of(name)
        if times is None or self.bound.vouches(name, times, self.now, self.end):
            return True
        self.refused = name
        return False


def read_on_helps(
    bounds: ScheduleBounds,
    bound: PickBound | None,
    name: str,
    times: IndexedTimes | None,
    now: float,
    reach: float | None,
) -> bool:
    """Whether the window should read on for ``name``, which the rule refused
    at ``now``: reading on as far as it may would end at ``reach`` (the kept
    ``should_start_by`` of the last schedule it may read; ``None``: it would
    hold every schedule within its horizon), and the rule would vouch for
    ``name`` there. If not, ``bounds`` stop checking the picks until their
    end moves (:attr:`~celery_dgs.core.window.ScheduleBounds.unchecked_end`):
    under a backlog past its ``should_start_by`` the rule cannot vouch for
    anything, and reading on would only fill the window's room."""
    if bound is None or times is None or reach is None or bound.vouches(name, times, now, reach):
        return True
    bounds.unchecked_end = bounds.end
    return False


def choose_reading_on(
    choose: Callable[[int], list[_T]],
    wants_more: Callable[[int], bool],
    refused: Callable[[], str | None],
    read_further: Callable[[], bool],
    reading_on_helps: Callable[[str], bool],
) -> list[_T]:
    """One dispatch round's choices with a window that may read on (beat's
    and the simulator's). ``choose(n)`` chooses more, ``n`` chosen so far;
    ``wants_more(n)``: slots are free and the round's limit not reached;
    ``refused()``: the schedule the last choice stopped at, refused by the
    rule; ``read_further()``: whether the window read its next slice.

    While more is wanted: after a refusal that reading on cannot help, the
    next choice goes unchecked (:func:`read_on_helps` stopped the checks);
    otherwise the window reads on and the round chooses again. A read that
    finds nothing ends the round, after one more choice if the last one was
    refused (the window then holds every eligible schedule)."""
    chosen = choose(0)
    while wants_more(len(chosen)):
        name = refused()
        if name is not None and not reading_on_helps(name):
            chosen += choose(len(chosen))
            continue
        read = read_further()
        if not read and name is None:
            break
        chosen += choose(len(chosen))
        if not read:
            break
    return chosen
