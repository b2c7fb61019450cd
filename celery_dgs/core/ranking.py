"""The ranking index: one factory for beat, the simulator and ``status`` (pure).

Beat's order is an overload policy's index (:func:`~celery_dgs.core.overload.make_index`),
with seed 001's revisit groups choosing among its adaptive schedules
(:class:`~celery_dgs.core.revisit_groups.GroupIndex`), and the priority
classes and the elevator over both
(:class:`~celery_dgs.core.priority.PriorityIndex`). Which index, and how it is
tuned, depends only on the settings in :class:`OrderPolicy`; what it reads about
each schedule (expected run time, margin, class, revisit group, the overload
signal) comes from
:class:`RankingSources`. :func:`build_index` wires the two together, so every
caller that orders schedules as beat does gets the same index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .fewest_errors import DEFAULT_FLOOR_PERIODS, DEFAULT_OVERLOAD_GOAL, FewestErrorsIndex
from .index import DeadlineIndex
from .laxity import DEFAULT_LAXITY_FLOOR_S
from .overload import (
    DEFAULT_OVERLOAD_POLICY,
    DEFAULT_RESTORE_AGING,
    DEFAULT_SHED_HORIZON_S,
    make_index,
)
from .priority import DEFAULT_ELEVATOR_INTERVAL_S, PriorityIndex, short_after_s
from .revisit_groups import DEFAULT_GROUP_SHARES, GroupIndex, GroupShares, RevisitKey
from .window import DEFAULT_SCHEDULE_WINDOW_S, DEFAULT_WINDOW_READ_ON

__all__ = [
    "TOP_LEAD_MARGINS",
    "OrderPolicy",
    "RankingSources",
    "build_index",
    "overload_index",
    "overload_part",
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
    choices; ``goal`` (``dgs_overload``) and ``floor_periods``
    (``dgs_overload_floor``) say what is given up while the demand exceeds the
    slots (:mod:`~celery_dgs.core.fewest_errors`); ``group_shares`` are the
    revisit groups' shares among adaptive schedules (``None``: adaptive
    schedules in the overload policy's order); ``window_size``, ``window_s``
    and ``window_read_on`` are beat's window of schedules
    (:mod:`~celery_dgs.core.window`: beat chooses among the schedules it
    holds; ``None``: all of them)."""

    overload: str = DEFAULT_OVERLOAD_POLICY
    goal: str = DEFAULT_OVERLOAD_GOAL
    floor_periods: float = DEFAULT_FLOOR_PERIODS
    shed_horizon_s: float = DEFAULT_SHED_HORIZON_S
    restore_aging: float = DEFAULT_RESTORE_AGING
    laxity_floor_s: float | None = DEFAULT_LAXITY_FLOOR_S
    elevator_interval_s: float | None = DEFAULT_ELEVATOR_INTERVAL_S
    lookahead: bool = True
    group_shares: GroupShares | None = DEFAULT_GROUP_SHARES
    window_size: int | None = None
    window_s: float = DEFAULT_SCHEDULE_WINDOW_S
    window_read_on: float | None = DEFAULT_WINDOW_READ_ON


@dataclass(frozen=True)
class RankingSources:
    """What the index reads about the schedules it holds.

    ``expected_s(name)``: the expected run time (seconds); ``margin_s(name)``:
    ``error_at - should_start_by`` (seconds); ``priority_of(name)``: the class it
    is indexed in, read when it is upserted; ``overloaded()``: whether the
    schedules' demand exceeds the live slots (``None``: never);
    ``clock_offset_s``: where the elevator's instants start (beat: 0, the Unix
    epoch; the simulator: its start); ``period_s(name)``: seconds between its
    obligations (the ``fewest_errors`` goal's value of a run);
    ``revisit_key_of(name)``: an adaptive schedule's revisit group and key
    (:func:`~celery_dgs.core.revisit_groups.revisit_key`), ``None`` for
    other kinds, read when it is upserted (``None``: no groups)."""

    expected_s: Callable[[str], float]
    margin_s: Callable[[str], float]
    priority_of: Callable[[str], int]
    overloaded: Callable[[], bool] | None = None
    clock_offset_s: float = 0.0
    period_s: Callable[[str], float] | None = None
    revisit_key_of: Callable[[str], RevisitKey | None] | None = None


def overload_index(
    policy: OrderPolicy,
    *,
    expected_s: Callable[[str], float],
    margin_s: Callable[[str], float],
    period_s: Callable[[str], float] | None = None,
    overloaded: Callable[[], bool] | None = None,
) -> DeadlineIndex:
    """The overload policy's index alone, without the priority classes; with
    the ``fewest_errors`` goal, :class:`~celery_dgs.core.fewest_errors.FewestErrorsIndex`
    (it needs ``period_s``; without ``overloaded`` it is never overloaded,
    so it orders as ``fair``)."""
    if policy.goal == "fewest_errors":
        if policy.overload != "restore" or policy.laxity_floor_s is None:
            raise ValueError("the fewest_errors goal needs the restore policy with a laxity floor")
        if period_s is None:
            raise ValueError("the fewest_errors goal needs the schedules' periods")
        return FewestErrorsIndex(
            expected_s,
            margin_s,
            period_s,
            overloaded or _never,
            policy.restore_aging,
            policy.laxity_floor_s,
            policy.floor_periods,
        )
    return make_index(
        policy.overload,
        policy.shed_horizon_s,
        expected_s,
        policy.restore_aging,
        margin_s=margin_s,
        laxity_floor_s=policy.laxity_floor_s,
    )


def overload_part(index: DeadlineIndex) -> DeadlineIndex:
    """The overload policy's index inside one :func:`build_index` built (below
    the priority classes and the revisit groups)."""
    while isinstance(index, (PriorityIndex, GroupIndex)):
        index = index.main
    return index


def _never() -> bool:
    return False


def build_index(policy: OrderPolicy, sources: RankingSources) -> PriorityIndex:
    """Beat's ranking index: due work by priority class with the elevator
    while capacity is short (a due schedule waited half an elevator interval,
    or ``overloaded()``, or either held within the last interval), the top
    class's work counting as due 1.5 margins early; otherwise the overload
    policy's order, in which the revisit groups choose the adaptive schedule
    that takes an adaptive pick."""
    elevator = policy.elevator_interval_s
    main = overload_index(
        policy,
        expected_s=sources.expected_s,
        margin_s=sources.margin_s,
        period_s=sources.period_s,
        overloaded=sources.overloaded,
    )
    if policy.group_shares is not None and sources.revisit_key_of is not None:
        main = GroupIndex(main, sources.revisit_key_of, policy.group_shares)
    return PriorityIndex(
        main,
        sources.priority_of,
        elevator_interval_s=elevator,
        clock_offset_s=sources.clock_offset_s,
        lead_s=top_lead_s(sources.margin_s),
        short_when_waited_s=short_after_s(elevator),
        overloaded=sources.overloaded,
        short_hold_s=short_hold_s(elevator),
    )
