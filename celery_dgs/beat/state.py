"""Beat's shared state: what it tracks, where each schedule is, what it dispatched.

One :class:`BeatState` per engine, passed to each collaborator that reads or
changes it. A tracked schedule is in exactly one of: the ranking index (may be
dispatched), ``parked`` (running or dispatched: re-indexed once its lease or
dispatch is gone), ``held`` (paused, disabled, its row could not be
applied, or no live worker may run it: ``unserved``, re-indexed once the
live workers change), or waiting for a slot of its busy workers
(:attr:`BeatRanking.waiting <celery_dgs.beat.ranking.BeatRanking.waiting>`,
which keeps that set). The methods below keep the ``parked``/``held``/``tracked`` side of
that rule; :class:`~celery_dgs.beat.ranking.BeatRanking` pairs each with the
index's side.

Beat's thread alone reads and writes it; the metrics read a
:class:`~celery_dgs.beat.snapshot.BeatSnapshot` built from it on that thread.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from ..core.placement import Constraints
from ..core.pool_slots import PoolSlots
from .types import Pending, Tracked


@dataclass(eq=False)
class BeatState:
    #: Schedulable schedules (and held ones): name -> spec, stats, request.
    #: A value is replaced, never changed in place (snapshots share them).
    tracked: dict[str, Tracked] = field(default_factory=dict)
    #: Paused, disabled, whose stored row could not be applied, or unserved.
    held: set[str] = field(default_factory=set)
    #: Held because no live worker may run it (its pool, task or nodes):
    #: re-indexed once the live workers change, or its row does.
    unserved: set[str] = field(default_factory=set)
    #: What the live workers may run, as of the last round's placement
    #: (:attr:`~celery_dgs.core.placement.Placement.live_key`).
    live_key: Hashable = None
    #: Whether some live worker may run a schedule of given constraints, as
    #: of the last round (``None`` before one: any).
    serves: Callable[[Constraints], bool] | None = None
    #: Running or dispatched: re-indexed once the lease or dispatch is gone.
    parked: set[str] = field(default_factory=set)
    #: Dispatches not started yet, in dispatch order (``since`` never decreases).
    pending: dict[str, Pending] = field(default_factory=dict)
    #: Active schedules whose stored row beat cannot schedule (an invalid spec
    #: or statistics): name -> why. Not in ``tracked``.
    unschedulable: dict[str, str] = field(default_factory=dict)
    #: Deferred checks held (in the index, parked or held): the check window.
    checks: set[str] = field(default_factory=set)
    #: Parked schedules whose latest row is outside beat's window: forgotten,
    #: not re-indexed, when freed.
    leaving: set[str] = field(default_factory=set)
    #: The store's change cursor.
    cursor: int = 0
    #: Whether the dispatch index is known to hold exactly ``pending``'s
    #: schedules (then a round reads only its size).
    dispatch_index_exact: bool = False
    #: Read the store again right after the next round's lease snapshot (set
    #: by a load and on election): runs that ended before the snapshot are
    #: then seen with their outcome, not as due schedules with stale stats.
    refresh_after_read: bool = True
    #: The live workers' slots (``dgs_capacity`` without a registered worker)
    #: as of the last dispatch round's placement; None before it and while
    #: standing by.
    live_slots: int | None = None
    #: The same slots by pool (the priority classes' overload signal), as of
    #: the same round; None when ``live_slots`` is.
    pool_slots: PoolSlots | None = None
    #: ``should_start_by`` of the most urgent eligible schedule after the last
    #: tick (``None``: none, or standing by).
    most_urgent_should_start_by: float | None = None
    dispatched_total: int = 0
    #: When the last tick completed (beat's monotonic clock); ``None``: none yet.
    last_tick: float | None = None

    def hold(self, name: str) -> None:
        """``name`` is held (out of the index: the caller removed it)."""
        self.parked.discard(name)
        self.held.add(name)

    def forget(self, name: str) -> None:
        """``name`` is no longer tracked (out of the index: the caller removed it)."""
        self.parked.discard(name)
        self.held.discard(name)
        self.unserved.discard(name)
        self.leaving.discard(name)
        self.checks.discard(name)
        self.tracked.pop(name, None)

    def set_aside(self, name: str) -> None:
        """No live worker may run ``name``: held, ``unserved`` (out of the
        index: the caller removed it)."""
        self.held.add(name)
        self.unserved.add(name)

    def release_unserved(self) -> list[str]:
        """The live workers changed: ``unserved`` leave ``held``; returns those
        to re-index."""
        freed = [name for name in self.unserved if name in self.tracked]
        self.held.difference_update(self.unserved)
        self.unserved.clear()
        return freed

    def park(self, name: str) -> None:
        """``name`` is running or dispatched (out of the index)."""
        self.parked.add(name)

    def book_dispatch(self, name: str, pending: Pending) -> None:
        """``name`` was dispatched: pending until it starts, parked meanwhile."""
        self.pending[name] = pending
        self.parked.add(name)
        self.dispatched_total += 1

    def unpark(self, freed: list[str]) -> list[str]:
        """Leave ``parked`` for ``freed``; returns those to re-index (tracked,
        not held). Those ``leaving`` the window are forgotten."""
        self.parked.difference_update(freed)
        for name in self.leaving.intersection(freed):
            self.forget(name)
        return [name for name in freed if name in self.tracked and name not in self.held]
