"""Whether a full window's pick is the whole fleet's (pure): the certainty rule.

While beat's window of schedules is full (:mod:`~celery_dgs.core.window`),
every eligible schedule it does not hold is past its ends
(:class:`~celery_dgs.core.window_buckets.WindowEnds`): its kept
``should_start_by`` is at or after ``E``, the should-order slice's end (or
the eligible part's, :meth:`ScheduleBounds.should_end
<celery_dgs.core.window.ScheduleBounds.should_end>`), and
for one of margin bucket ``m`` its ``error_at`` is at or after ``E_m``, that
bucket's slice end, and at or after ``E`` plus the bucket's least margin
(together ``B_m``). In the deadline order ``E`` alone makes the window's top
the fleet's. Beat's default order (``restore`` with relative laxity,
:mod:`~celery_dgs.core.laxity`) ranks by what moves with ``now``; the ends
still bound every schedule not held, so each candidate the index offers can
be checked against them before it is taken (:meth:`PickBound.refusal`):

* a run request is always held: certain;
* a candidate in ERROR (``error_at = should + margin`` passed) is taken by
  its late key ``k = should + aging * expected run``; a schedule not held
  in ERROR has a late key at or after its ``should_start_by``: at or after
  ``E``, and ``E_m`` less the bucket's greatest margin. ``k`` below that,
  for every bucket whose ``B_m`` is before now, makes it the fleet's first
  in ERROR;
* a candidate not in ERROR is taken by relative laxity ``(error_at - now) /
  (margin + floor)`` among the tops of the laxity buckets (each ordered by
  ``(error_at, next start, name)``). It is the fleet's pick if no bucket
  may hold one not held in ERROR (every ``B_m`` at or after now), its
  laxity is below the least laxity each bucket's bounds allow over its
  margins outside the candidate's laxity bucket, and, for the margins
  inside it, it goes before the bucket's end (it is that laxity bucket's
  top): its ``error_at`` is below ``B_m``, or equal to a cut slice's last
  ``error_at`` with its ``(next start, name)`` at most that key's. So a
  fleet registered at once, whose schedules share one ``error_at``, is
  taken from its bucket's slice in name order, as the whole fleet takes it;
* without relative laxity (``dgs_laxity_floor = None``) a candidate not late
  is taken by ``should_start_by``: certain once ``E >= now``.

With no bucket listed, one bucket of any margin stands for all: ``E`` alone
bounds them. A candidate the rule cannot vouch for is not taken: the window
reads on the slice the refusal names (:class:`Refusal`) and the round asks
again, so the picks are the fleet's, at the cost of holding more while the
window reads on (the next start-over lets the extra go). How far it may
read on is the window's ``read_on`` (``dgs_schedule_window_read_on``: 10
window sizes by default; 0: no check), and :func:`read_on_helps` stops it where reading
that far could not make the pick certain. The priority classes and the
revisit groups choose among the candidates the rule vouched for; ``shed``
and the ``fewest_errors`` goal are not checked (they choose among the
held).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from .index import DeadlineIndex, IndexedTimes
from .late_order import is_run_request
from .laxity import bucket_of
from .laxity_bounds import (
    before_end,
    bucket_ends,
    inside_laxity_bucket,
    laxity_bucket_edges,
    laxity_summary,
    least_past_ends,
    outside_laxity_bucket,
)
from .ranking import OrderPolicy
from .window import ScheduleBounds
from .window_buckets import WindowEnds

__all__ = [
    "PickBound",
    "Refusal",
    "Vouching",
    "choose_reading_on",
    "pick_bound",
    "read_on_helps",
    "vouching_for",
]

_T = TypeVar("_T")


#: The slice a refusal asks the window to read on: a margin bucket's, or
#: ``None``: the should-order slice's.
SliceToRead = int | None


class _Vouched(enum.Enum):
    """The rule vouched for the candidate: no slice to read."""

    VOUCHED = enum.auto()


_VOUCHED: Final = _Vouched.VOUCHED
#: What the rule says of a candidate: vouched for, or the slice to read on.
_Verdict = SliceToRead | _Vouched


@dataclass(frozen=True)
class Refusal:
    """The rule could not vouch for candidate ``name``: the window reads on
    ``bucket``'s slice (``None``: the should-order slice)."""

    name: str
    bucket: SliceToRead


@dataclass(frozen=True)
class PickBound:
    """The rule for one order: ``aging`` (``dgs_restore_aging``) and
    ``floor_s`` (``dgs_laxity_floor``; ``None``: no relative laxity);
    ``expected_s`` and ``margin_s`` as the index reads them."""

    expected_s: Callable[[str], float]
    margin_s: Callable[[str], float]
    aging: float
    floor_s: float | None

    def vouches(self, name: str, times: IndexedTimes, now: float, ends: WindowEnds | None) -> bool:
        """Whether ``name``, indexed with ``times``, goes before every eligible
        schedule the window does not hold (``ends``: what bounds them;
        ``None``: the window holds every eligible schedule)."""
        return self.refusal(name, times, now, ends) is None

    def refusal(
        self, name: str, times: IndexedTimes, now: float, ends: WindowEnds | None
    ) -> Refusal | None:
        """:meth:`vouches`, with the slice to read on when it does not."""
        read = self._slice_to_read(name, times, now, ends)
        return None if read is _VOUCHED else Refusal(name, read)

    def _slice_to_read(
        self, name: str, times: IndexedTimes, now: float, ends: WindowEnds | None
    ) -> _Verdict:
        if ends is None:
            return _VOUCHED
        should, can = times.should_start_by, times.can_start_by
        if is_run_request(can, should):
            return _VOUCHED
        floor = self.floor_s
        if floor is None:  # deadline order until late: the should-order slice decides
            if should < now:
                late_key = should + self.aging * max(self.expected_s(name), 0.0)
                return _VOUCHED if late_key < ends.should else None
            return _VOUCHED if ends.should >= now else None
        margin = self._margin(name)
        if should + margin < now:
            late_key = should + self.aging * max(self.expected_s(name), 0.0)
            return self._late_slice(late_key, now, ends)
        key = (should + margin, can, name)
        return self._laxity_slice(key, margin, now, floor, ends)

    def _late_slice(self, late_key: float, now: float, ends: WindowEnds) -> _Verdict:
        """A candidate in ERROR with ``late_key``: it goes first unless a
        schedule not held may be in ERROR with a late key below it. Such a
        one's late key is at least its ``should_start_by``: at least the
        should-order slice's end, and its ``error_at`` less its bucket's
        greatest margin."""
        for bucket, (lo, hi), error_end in bucket_ends(ends):
            if max(error_end, ends.should + lo) >= now:
                continue  # none of the bucket's not held is in ERROR
            from_bucket = error_end - hi
            if not late_key < max(ends.should, from_bucket):
                return bucket if from_bucket > ends.should else None
        return _VOUCHED

    def _laxity_slice(
        self,
        key: tuple[float, float, str],
        margin: float,
        now: float,
        floor: float,
        ends: WindowEnds,
    ) -> _Verdict:
        """A candidate not in ERROR whose laxity bucket orders it by ``key``
        (``error_at``, next start, name): it is the fleet's pick if no
        schedule not held is in ERROR, each one outside its laxity bucket has
        a higher relative laxity, and each one inside it has a greater key
        (the bucket's top). The summary of every bucket at once answers
        most; a candidate it does not vouch for is checked bucket by bucket
        (a tie with a slice's end, or which slice to read)."""
        error_at = key[0]
        scale = margin + floor
        if scale <= 0:  # no margin, no floor: taken only once late
            return None
        laxity = (error_at - now) / scale
        top = bucket_of(scale)
        summary = laxity_summary(ends, now, floor, top)
        if summary.clear and laxity < summary.least and error_at < summary.shared_bound:
            return _VOUCHED
        inside, outside = laxity_bucket_edges(top, outwards=True), laxity_bucket_edges(top, False)
        for bucket, (lo, hi), error_end in bucket_ends(ends):
            read = bucket if error_end < math.inf else None
            if max(error_end, ends.should + lo) < now:
                return read  # one of them may be in ERROR
            for part_lo, part_hi in outside_laxity_bucket(lo, hi, floor, outside):
                least = least_past_ends(ends.should, error_end, now, part_lo, part_hi, floor)
                if not laxity < least:
                    return read
            shared = inside_laxity_bucket(lo, hi, floor, inside)
            if shared is None or error_at < ends.should + max(shared[0], 0.0):
                continue
            if not before_end(key, error_end, None if bucket is None else ends.cut_at.get(bucket)):
                return read
        return _VOUCHED

    def in_error(self, name: str, times: IndexedTimes, now: float) -> bool:
        """Whether ``name`` goes by its late key at ``now``: past its
        ``error_at`` (without relative laxity: its ``should_start_by``)."""
        should = times.should_start_by
        if is_run_request(times.can_start_by, should):
            return False
        if self.floor_s is None:
            return should < now
        return should + self._margin(name) < now

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
    ``vouch`` at ``now`` against a full window's ``ends``; ``refusal``: the
    first candidate it refused, if any, and the slice to read on for it."""

    def __init__(
        self,
        bound: PickBound,
        times_of: Callable[[str], IndexedTimes | None],
        now: float,
        ends: WindowEnds,
    ) -> None:
        self.bound, self.times_of, self.now, self.ends = bound, times_of, now, ends
        self.refusal: Refusal | None = None

    @property
    def refused(self) -> str | None:
        """The first candidate refused, if any."""
        return None if self.refusal is None else self.refusal.name

    def __call__(self, name: str) -> bool:
        times = self.times_of(name)
        if times is None:
            return True
        refusal = self.bound.refusal(name, times, self.now, self.ends)
        if refusal is None:
            return True
        self.refusal = refusal
        return False


def vouching_for(
    bound: PickBound | None, index: DeadlineIndex, now: float, ends: WindowEnds | None
) -> Vouching | None:
    """The rule's check of a round at ``now`` against ``index`` (beat's and
    the simulator's ranking index) while the window is full: ``None`` when
    there is no rule for the order or the picks are not checked (``ends``
    ``None``)."""
    if bound is None or ends is None:
        return None
    return Vouching(bound, index.times, now, ends)


def read_on_helps(
    bounds: ScheduleBounds,
    bound: PickBound | None,
    name: str,
    times: IndexedTimes | None,
    now: float,
    reach: WindowEnds | None,
) -> bool:
    """Whether the window should read on for ``name``, which the rule refused
    at ``now``: reading the should-order slice on as far as the window may
    would leave the ends at ``reach`` (:meth:`ScheduleBounds.reach_ends
    <celery_dgs.core.window.ScheduleBounds.reach_ends>`; ``None``: it would
    hold every schedule within its horizon), and the rule would vouch for
    ``name`` there, with every margin bucket's slice read to its end too if
    ``name`` is not in ERROR (in ERROR, a bucket's slice by ``error_at``
    bounds a late key only by its end less its greatest margin: the
    buckets are taken as they are). If not, ``bounds`` stop checking the picks until their
    should-order bound moves (:attr:`~celery_dgs.core.window.ScheduleBounds.unchecked_end`:
    the window's end, or the eligible part's past it):
    under a backlog in ERROR the rule may not vouch for anything, and reading
    on would only fill the window's room."""
    if bound is None or times is None or reach is None:
        return True
    if not bound.in_error(name, times, now):  # the buckets' slices read to their ends
        reach = WindowEnds(reach.should, dict.fromkeys(reach.buckets, math.inf))
    if bound.vouches(name, times, now, reach):
        return True
    bounds.unchecked_end = bounds.should_end()
    return False


def choose_reading_on(
    choose: Callable[[int], list[_T]],
    wants_more: Callable[[int], bool],
    refusal: Callable[[], Refusal | None],
    read_further: Callable[[SliceToRead], bool],
    read_eligible: Callable[[], bool],
    reading_on_helps: Callable[[str], bool],
) -> list[_T]:
    """One dispatch round's choices with a window that may read on (beat's
    and the simulator's). ``choose(n)`` chooses more, ``n`` chosen so far;
    ``wants_more(n)``: slots are free and the round's limit not reached;
    ``refusal()``: the rule's refusal of the schedule the last choice
    stopped at, if any; ``read_further(slice)``: whether the window read on
    the refusal's slice; ``read_eligible()``: whether it read on its
    eligible part (:meth:`ScheduleBounds.read_eligible
    <celery_dgs.core.window.ScheduleBounds.read_eligible>`: the last choice
    found no eligible schedule held).

    While more is wanted: after a refusal that reading on cannot help, the
    next choice goes unchecked (:func:`read_on_helps` stopped the checks);
    otherwise the window reads on and the round chooses again. A read that
    finds nothing ends the round, after one more choice if the last one was
    refused (the window then holds every eligible schedule)."""
    chosen = choose(0)
    while wants_more(len(chosen)):
        refused = refusal()
        if refused is not None and not reading_on_helps(refused.name):
            chosen += choose(len(chosen))
            continue
        read = read_eligible() if refused is None else read_further(refused.bucket)
        if not read and refused is None:
            break
        chosen += choose(len(chosen))
        if not read:
            break
    return chosen
