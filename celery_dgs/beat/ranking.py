"""Beat's ranking index: the order policy's index over the tracked schedules,
kept at their start times.

The index is built by :func:`~celery_dgs.core.ranking.build_index` from the
settings' order policy. Its keys are each schedule's ``can_start_by`` and
``should_start_by`` (a run request's: its request time, ordered
:data:`~celery_dgs.core.overload.RUN_REQUEST_PRIORITY_S` ahead). Due work by
priority class with the elevator while capacity is short (a due schedule
waited half an elevator interval, or some pool's demand exceeds the live
slots that serve it, or either held within the last interval); the top class's
work then counts as due 1.5 margins early.

The demand book (the schedulable schedules' shares of a slot) is kept at load
and refresh once built: at start with the look-ahead, else the first time the
classes ask for the overload signal (a fleet with one class never does).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from ..core.blackout_watch import BlackoutWatch, stale_from
from ..core.clock import Clock
from ..core.cron_cache import CronFireCache
from ..core.elevator import ElevatorState
from ..core.fewest_errors import FewestErrorsIndex, Waiting, period_seconds
from ..core.index import DeadlineIndex
from ..core.laxity import margin_seconds
from ..core.lookahead import DemandBook
from ..core.overload import RUN_REQUEST_PRIORITY_S, expected_seconds
from ..core.placement import Constraints
from ..core.pool_slots import overloaded_pools
from ..core.priority import PriorityIndex
from ..core.ranking import RankingSources, build_index, overload_part
from ..core.revisit_groups import RevisitKey, revisit_key
from ..core.slot_wait import SlotWait, still_blocked
from ..core.spec_values import AD_HOC_PRIORITY, DEFAULT_PRIORITY
from ..core.timing import start_times
from ..core.window_certainty import pick_bound
from ..settings import DgsSettings
from .lookahead import BeatLookahead, note_demand
from .state import BeatState
from .types import Tracked


@dataclass(frozen=True)
class WaitingBound:
    """With a window of schedules, how many of a class may wait for a slot
    (:meth:`SlotWait.over <celery_dgs.core.slot_wait.SlotWait.over>`):
    ``size`` (the window's); ``past_window(name)``: whether ``name`` is held
    past the window's own range (only those are let go of); ``let_go``:
    forgets those taken out (the loader's)."""

    size: int
    past_window: Callable[[str], bool]
    let_go: Callable[[list[str]], None]


@dataclass(slots=True)
class IndexBatch:
    """Start times computed at one ``now`` during a load, indexed at its end."""

    now: datetime
    retry_ladder: tuple[timedelta, ...]
    entries: list[tuple[str, float, float]] = field(default_factory=list)
    cron_times: CronFireCache = field(default_factory=CronFireCache)


class BeatRanking:
    """The index of the tracked schedules that may be dispatched."""

    def __init__(self, state: BeatState, settings: DgsSettings, clock: Clock) -> None:
        self.state, self.settings, self.clock = state, settings, clock
        tracked = state.tracked

        def expected_s(name: str) -> float:
            return expected_seconds(tracked.get(name))

        def margin_s(name: str) -> float:
            return margin_seconds(tracked.get(name))

        self.index: DeadlineIndex = build_index(
            settings.order_policy,
            RankingSources(
                expected_s=expected_s,
                margin_s=margin_s,
                priority_of=self.priority_of,
                overloaded=self.overloaded,
                period_s=self.period_s,
                revisit_key_of=self.revisit_key_of,
            ),
        )
        #: The certainty rule of the order with a full window (None: none).
        self.pick_bound = pick_bound(
            settings.order_policy, expected_s=expected_s, margin_s=margin_s
        )
        self.demand: DemandBook | None = DemandBook() if settings.lookahead else None
        #: Look-ahead admission (``dgs_lookahead``) over the demand book.
        self.lookahead = BeatLookahead(self.demand) if self.demand is not None else None
        #: When the indexed schedules with blackouts need their times again.
        self.blackouts = BlackoutWatch()
        #: Out of the index until a worker that may run them has a slot free
        #: (:func:`~celery_dgs.core.placement.choose_dispatches` looked past
        #: them): eligible, still in the demand book.
        self.waiting = SlotWait()
        #: With a window of schedules: the bound on :attr:`waiting` (set by the engine).
        self.waiting_bound: WaitingBound | None = None

    # -- where a schedule is -----------------------------------------------------
    def reindex(self, name: str, batch: IndexBatch | None = None) -> None:
        """Put ``name`` in the index at its current start times (with a
        ``batch``: at the batch's ``now``, indexed when the batch ends)."""
        tracked = self.state.tracked[name]
        self.waiting.discard(name)
        if tracked.run_requested_at is not None:
            at = tracked.run_requested_at.timestamp()
            can, should = at, at - RUN_REQUEST_PRIORITY_S
        else:
            if batch is None:
                now, ladder, cron = self.clock.now(), self.settings.retry_ladder, None
            else:
                now, ladder, cron = batch.now, batch.retry_ladder, batch.cron_times
            times = start_times(
                tracked.spec, tracked.stats, now, retry_ladder=ladder, cron_times=cron
            )
            can, should = times.can_start_by.timestamp(), times.should_start_by.timestamp()
            self._watch(tracked, name, times.can_start_by, now)
        if batch is None:
            self.index.upsert(name, can, should)
        else:
            batch.entries.append((name, can, should))

    def retime_stale(self, now: float) -> int:
        """Re-time the indexed schedules whose times a blackout made stale by
        ``now`` (:mod:`~celery_dgs.core.blackout_watch`): one computed eligible
        before its window began no longer heads its bucket through it, and one
        moved to its window's end takes its own times again when the window
        ends (:func:`~celery_dgs.core.blackout_watch.takes_new_times`); how
        many moved."""
        tracked, ladder = self.state.tracked, self.settings.retry_ladder
        at = datetime.fromtimestamp(now, tz=timezone.utc)

        def times_now(name: str) -> tuple[float, float] | None:
            entry = tracked.get(name)
            if entry is None or entry.run_requested_at is not None:
                return None
            times = start_times(entry.spec, entry.stats, at, retry_ladder=ladder)
            self._watch(entry, name, times.can_start_by, at)
            return times.can_start_by.timestamp(), times.should_start_by.timestamp()

        return self.blackouts.retime_due(now, self.index, times_now)

    def _watch(self, tracked: Tracked, name: str, can_start_by: datetime, now: datetime) -> None:
        """Note when ``name``'s times computed at ``now`` go stale (a blackout)."""
        if tracked.spec.blackout_periods:
            stale = stale_from(tracked.spec, tracked.stats, can_start_by, now)
            self.blackouts.note(name, None if stale is None else stale.timestamp())
        else:
            self.blackouts.forget(name)

    def unindex(self, name: str) -> None:
        """Out of the index (and waiting for a slot), its blackouts unwatched."""
        self.index.remove(name)
        self.waiting.discard(name)
        self.blackouts.forget(name)

    def hold(self, name: str) -> None:
        """Out of the index and ``parked``; held."""
        self.unindex(name)
        self.state.hold(name)

    def set_aside(self, names: list[str]) -> None:
        """Out of the index; held until the live workers change (none of
        them may run these: :func:`~celery_dgs.core.placement.choose_dispatches`)."""
        for name in names:
            self.unindex(name)
            self.state.set_aside(name)
            self.note_demand(name)  # a held schedule's share does not count

    def wait_for_slot(self, names: list[str]) -> None:
        """Out of the index, into :attr:`waiting` with their indexed times,
        until a worker that may run each has a slot free (the live workers
        that may are all busy: :func:`~celery_dgs.core.placement.choose_dispatches`)."""
        for name in self.waiting.take(self.index, names, self.constraints_of):
            self.blackouts.forget(name)
        bound = self.waiting_bound
        if bound is not None:
            taken = self.waiting.over(bound.size, bound.past_window)
            if taken:
                bound.let_go(taken)

    def constraints_of(self, name: str) -> Constraints:
        """Where the tracked schedule ``name`` may run."""
        return Constraints.of(self.state.tracked[name].spec)

    def release_waiting(self, free_for: Callable[[Constraints], int]) -> list[str]:
        """Index again the most urgent schedules waiting for a slot of each
        class whose workers have ``free_for(constraints)`` slots free, at the
        times they had (one with blackouts at its times now); returns them."""
        released = self.waiting.release(free_for)
        tracked = self.state.tracked
        for name, can, should in released:
            if tracked[name].spec.blackout_periods:
                self.reindex(name)
            else:
                self.index.upsert(name, can, should)
        return [name for name, _can, _should in released]

    def wait_again(self, released: list[str], free_for: Callable[[Constraints], int]) -> None:
        """After the round: those of ``released`` still indexed whose class has
        no slot free any more wait again (a plan would skip them otherwise)."""
        self.wait_for_slot(still_blocked(released, self.index, self.constraints_of, free_for))

    def forget(self, name: str) -> None:
        """Out of the index, ``parked``, ``held`` and ``tracked``."""
        self.unindex(name)
        self.state.forget(name)

    def park(self, name: str) -> None:
        """Out of the index; parked (running or dispatched)."""
        self.unindex(name)
        self.state.park(name)

    # -- times -----------------------------------------------------------------------
    def due_should_start_by(self, name: str, now: float) -> float | None:
        """Re-check a chosen schedule's start times at ``now``: the index holds times
        computed earlier, and whether ``now`` is inside a blackout window changes
        with time. If it may not start yet, re-inserts it and returns None;
        otherwise returns its ``should_start_by`` (a run request's too: the
        index orders those by a priority key, not by their real time)."""
        tracked = self.state.tracked[name]
        times = start_times(
            tracked.spec, tracked.stats, self.clock.now(), retry_ladder=self.settings.retry_ladder
        )
        should = times.should_start_by.timestamp()
        if tracked.run_requested_at is not None or times.can_start_by.timestamp() <= now:
            return should
        self.index.upsert(name, times.can_start_by.timestamp(), should)
        self._watch(tracked, name, times.can_start_by, self.clock.now())
        return None

    def should_start_by(self, name: str) -> float | None:
        """The indexed schedule's ``should_start_by``; a run request's real one
        (the index holds it at a priority key far in the past)."""
        times = self.index.times(name)
        if times is None:
            return None
        tracked = self.state.tracked.get(name)
        if tracked is None or tracked.run_requested_at is None:
            return times.should_start_by
        real = start_times(
            tracked.spec, tracked.stats, self.clock.now(), retry_ladder=self.settings.retry_ladder
        )
        return real.should_start_by.timestamp()

    # -- the policy's sources ----------------------------------------------------------
    def priority_of(self, name: str) -> int:
        """The class ``name`` is indexed in: its spec's priority, or its run
        request's (an operator's ad-hoc run: 0 unless asked otherwise)."""
        tracked = self.state.tracked.get(name)
        if tracked is None:
            return DEFAULT_PRIORITY
        if tracked.run_requested_at is not None:
            priority = tracked.run_requested_priority
            return AD_HOC_PRIORITY if priority is None else priority
        return tracked.spec.priority

    def elevator_state(self) -> ElevatorState | None:
        """Where the priority classes stand now (``None``: an index without them)."""
        index = self.index
        if not isinstance(index, PriorityIndex):
            return None
        return index.elevator_state(self.clock.now().timestamp())

    def waiting_in_error(self) -> tuple[int, list[Waiting]] | None:
        """With ``dgs_overload = "fewest_errors"``: how many schedules in ERROR
        its order makes wait now, and the lowest-value of them; ``None`` with
        the fair order."""
        index = overload_part(self.index)
        if not isinstance(index, FewestErrorsIndex):
            return None
        return index.waiting_in_error(self.clock.now().timestamp())

    def period_s(self, name: str) -> float:
        """Seconds between ``name``'s obligations (infinite when unknown)."""
        tracked = self.state.tracked.get(name)
        return math.inf if tracked is None else period_seconds(tracked.spec, tracked.stats)

    def revisit_key_of(self, name: str) -> RevisitKey | None:
        """An adaptive schedule's revisit group and key (None: another kind)."""
        tracked = self.state.tracked.get(name)
        return None if tracked is None else revisit_key(tracked.spec, tracked.stats)

    def overloaded(self) -> bool:
        """The priority classes' overload signal: some pool's schedules need
        more than the live slots that can serve them (:func:`overloaded_pools`;
        the book is built on the first call that has the slots: one pass over
        the tracked schedules)."""
        return bool(self.overloaded_pools())

    def overloaded_pools(self) -> tuple[str, ...]:
        """The pools whose demand exceeds the live slots that serve them, as of
        the last round (``()``: none, or no round yet)."""
        state = self.state
        if not state.live_slots:
            return ()
        if self.demand is None:
            self.demand = DemandBook()
            for name, tracked in state.tracked.items():
                note_demand(self.demand, name, tracked, name in state.held)
        return overloaded_pools(self.demand.by_pool(), state.pool_slots)

    def note_demand(self, name: str) -> None:
        """Keep ``name``'s share in the demand book once it is built (and the
        look-ahead's queue)."""
        if self.demand is None:
            return
        tracked, held = self.state.tracked.get(name), name in self.state.held
        note_demand(self.demand, name, tracked, held)
        if self.lookahead is not None:
            self.lookahead.note(name, tracked, held)
