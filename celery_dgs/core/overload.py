"""Overload policies: what the greedy order does when demand exceeds capacity (pure).

Plain deadline order (``greedy``) always serves the eligible schedule with the
lowest ``should_start_by``. Under overload that is a schedule that is already
late: started now it ends after its deadline anyway, and the slot it takes
makes the next schedule late too, so one late job cascades into many.

``shed`` serves schedules that can still finish on time and are due soon
first (``now <= should_start_by <= now + horizon``), in deadline order;
schedules that are already late come next, oldest deadline first; early runs
of on-time schedules (``should_start_by`` further ahead) last. Under
overload the set that stays on time stays on time and the rest is shed
instead of every schedule going late in turn; at normal load, when nothing
is late, the order is plain deadline order. The horizon matters: without it
(infinite), early runs of on-time schedules take every slot and late ones
starve even at load 0.9 (measured, ``docs/simulator.md``).

``restore`` keeps plain deadline order for on-time schedules but serves the
late ones (``should_start_by`` passed) first, shortest expected run first
with aging: key ``should_start_by + aging * expected run time``. Under
overload each schedule in ERROR accrues one ERROR-second per second, and a
run of a schedule whose runs are a small share of its period restores the
most freshness per slot-second; shortest-first is the classic remedy (SPT
minimises the total completion time of a backlog, e.g. after an outage). The
aging term bounds the wait: a late schedule goes after no schedule that
became late more than ``aging * its expected run time`` after it, so nothing
starves. With nothing late (or one), it is exactly ``greedy``. Beat's
default is ``restore`` with relative laxity (:mod:`~celery_dgs.core.laxity`):
there "late" means in ERROR, and the others go in relative-laxity order.

Operator run requests (``should_start_by`` pushed :data:`RUN_REQUEST_PRIORITY_S`
below ``can_start_by``) are never demoted.

The indexes live below this module: :mod:`~celery_dgs.core.late_order`
(``shed``, plain ``restore``) and :mod:`~celery_dgs.core.laxity` (``restore``
with relative laxity, built on the former); :func:`make_index` picks one.
"""

from __future__ import annotations

from collections.abc import Callable

from .index import DeadlineIndex
from .late_order import (
    DEFAULT_RESTORE_AGING,
    DEFAULT_SHED_HORIZON_S,
    RUN_REQUEST_PRIORITY_S,
    RestoringIndex,
    SheddingIndex,
    expected_seconds,
)
from .laxity import LaxityIndex

__all__ = [
    "DEFAULT_OVERLOAD_POLICY",
    "DEFAULT_RESTORE_AGING",
    "DEFAULT_SHED_HORIZON_S",
    "OVERLOAD_POLICIES",
    "RUN_REQUEST_PRIORITY_S",
    "RestoringIndex",
    "SheddingIndex",
    "expected_seconds",
    "make_index",
]

OVERLOAD_POLICIES = ("greedy", "shed", "restore")
#: Beat's default: ``restore`` is ``greedy`` while at most one schedule is late.
DEFAULT_OVERLOAD_POLICY = "restore"


def make_index(
    policy: str,
    shed_horizon_s: float = DEFAULT_SHED_HORIZON_S,
    expected_s: Callable[[str], float] | None = None,
    restore_aging: float = DEFAULT_RESTORE_AGING,
    *,
    margin_s: Callable[[str], float] | None = None,
    laxity_floor_s: float | None = None,
) -> DeadlineIndex:
    """The index for an overload policy: ``greedy`` (plain deadline order), ``shed``
    or ``restore`` (which needs ``expected_s``: a schedule's expected run time).

    ``restore`` puts on-time schedules in relative-laxity order
    (:class:`~celery_dgs.core.laxity.LaxityIndex`) when given ``margin_s`` (a
    schedule's ``error_at - should_start_by``) and a ``laxity_floor_s``
    (``None``: plain deadline order)."""
    if policy == "greedy":
        return DeadlineIndex()
    if policy == "shed":
        return SheddingIndex(shed_horizon_s)
    if policy == "restore":
        if expected_s is None:
            raise ValueError("overload policy 'restore' needs the expected run times")
        if laxity_floor_s is not None:
            if margin_s is None:
                raise ValueError("relative-laxity order needs the schedules' margins")
            return LaxityIndex(expected_s, margin_s, restore_aging, laxity_floor_s)
        return RestoringIndex(expected_s, restore_aging)
    raise ValueError(f"overload policy must be one of {OVERLOAD_POLICIES}, got {policy!r}")
