"""The ranking index: one factory for beat, the simulator and ``status`` (pure).

Beat's order is an overload policy's index (:func:`~celery_dgs.core.overload.make_index`)
with the priority classes and the elevator over it
(:class:`~celery_dgs.core.priority.PriorityIndex`). Which index, and how it is
tuned, depends only on the settings in :class:`OrderPolicy`; what it reads about
each schedule (expected run time, margin, class, the overload signal) comes from
:class:`RankingSources`. :func:`build_index` wires the two together, so every
caller that orders schedules as beat does gets the same index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .index import DeadlineIndex
from .laxity import DEFAULT_LAXITY_FLOOR_S
from .overload import (
    DEFAULT_OVERLOAD_POLICY,
    DEFAULT_RESTORE_AGING,
    DEFAULT_SHED_HORIZON_S,
    make_index,
)
from .priority import DEFAULT_ELEVATOR_INTERVAL_S, PriorityIndex, short_after_s

__all__ = [
    "TOP_LEAD_MARGINS",
    "OrderPolicy",
    "RankingSources",
    "build_index",
    "overload_index",
    "short_hold_s",
    "top_lead_s",
]

#: The top class's lead while capacity is short, in margins.
TOP_LEAD_MARGINS = 1.5


def top_lead_s(margin_s: Callable[[str], float]) -> Callable[[str], float]:
    """The top class's lead: :data:`TOP_LEAD_MARGINS` of a schedule's margin."""
    return lambda name: TOP_LEAD_MARGINS * margin_s(name)


def short_hold_s(elevator_interval_s: float | None) -> float:
    """How long capacity still counts as short after no due schedule has
    waited :func:`~celery_dgs.core.priority.short_after_s` any more: one
    elevator interval (the default one without the elevator)."""
    return elevator_interval_s or DEFAULT_ELEVATOR_INTERVAL_S


@dataclass(frozen=True)
class OrderPolicy:
    """The settings that change the order in which beat dispatches.

    ``overload``, ``shed_horizon_s``, ``restore_aging`` and ``laxity_floor_s``
    choose and tune the overload policy's index; ``elevator_interval_s``
    (``None``: strict classes) is the priority classes' elevator;
    ``lookahead`` (on by default) is the long-run admission
    (:mod:`~celery_dgs.core.lookahead`), which beat applies to the index's
    choices."""

    overload: str = DEFAULT_OVERLOAD_POLICY
    shed_horizon_s: float = DEFAULT_SHED_HORIZON_S
    restore_aging: float = DEFAULT_RESTORE_AGING
    laxity_floor_s: float | None = DEFAULT_LAXITY_FLOOR_S
    elevator_interval_s: float | None = DEFAULT_ELEVATOR_INTERVAL_S
    lookahead: bool = True


@dataclass(frozen=True)
class RankingSources:
    """What the index reads about the schedules it holds.

    ``expected_s(name)``: the expected run time (seconds); ``margin_s(name)``:
    ``error_at - should_start_by`` (seconds); ``priority_of(name)``: the class it
    is indexed in, read when it is upserted; ``overloaded()``: whether the
    schedules' demand exceeds the live slots (``None``: never);
    ``clock_offset_s``: where the elevator's instants start (beat: 0, the Unix
    epoch; the simulator: its start)."""

    expected_s: Callable[[str], float]
    margin_s: Callable[[str], float]
    priority_of: Callable[[str], int]
    overloaded: Callable[[], bool] | None = None
    clock_offset_s: float = 0.0


def overload_index(
    policy: OrderPolicy,
    *,
    expected_s: Callable[[str], float],
    margin_s: Callable[[str], float],
) -> DeadlineIndex:
    """The overload policy's index alone, without the priority classes."""
    return make_index(
        policy.overload,
        policy.shed_horizon_s,
        expected_s,
        policy.restore_aging,
        margin_s=margin_s,
        laxity_floor_s=policy.laxity_floor_s,
    )


def build_index(policy: OrderPolicy, sources: RankingSources) -> PriorityIndex:
    """Beat's ranking index: due work by priority class with the elevator
    while capacity is short (a due schedule waited half an elevator interval,
    or ``overloaded()``, or either held within the last interval), the top
    class's work counting as due 1.5 margins early; otherwise the overload
    policy's order."""
    elevator = policy.elevator_interval_s
    return PriorityIndex(
        overload_index(policy, expected_s=sources.expected_s, margin_s=sources.margin_s),
        sources.priority_of,
        elevator_interval_s=elevator,
        clock_offset_s=sources.clock_offset_s,
        lead_s=top_lead_s(sources.margin_s),
        short_when_waited_s=short_after_s(elevator),
        overloaded=sources.overloaded,
        short_hold_s=short_hold_s(elevator),
    )
