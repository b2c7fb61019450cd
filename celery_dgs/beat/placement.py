"""Beat's side of placement: a round's free slots per worker, and the
look-ahead admission of the schedules it chooses.

The slots are the live workers' (read again only when they may have
changed: :mod:`.live_workers`; less the stalled ones, and another
store's: :mod:`.foreign_workers`), less their running
leases and pending dispatches; with no worker registered, ``dgs_capacity``
slots on a pseudo-worker that takes every queue.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set
from datetime import datetime, timedelta

from ..core.lookahead import AdmissionRound
from ..core.placement import Placement, WorkerSlots
from ..core.pool_slots import PoolSlots
from ..leases.base import LeaseBackend
from ..leases.types import BeatView
from ..registry import RegistryBackend, WorkerInfo
from ..settings import DgsSettings
from .foreign_workers import ForeignWorkers
from .live_workers import LiveWorkers
from .lookahead import BeatLookahead
from .stalled import StalledWorkers
from .state import BeatState
from .types import ANY_WORKER


class BeatPlacement:
    def __init__(
        self,
        state: BeatState,
        registry: RegistryBackend,
        leases: LeaseBackend,
        settings: DgsSettings,
        default_queue: str,
        lookahead: BeatLookahead | None,
        store: str | None = None,
    ) -> None:
        self.state, self.registry, self.leases = state, registry, leases
        self.settings, self.default_queue, self.lookahead = settings, default_queue, lookahead
        #: Workers that stopped pinging a lease: no new dispatches to them.
        self.stalled = StalledWorkers()
        #: Workers of another store (``store``: this one's id): never placed on.
        self.foreign = ForeignWorkers(store, settings.key_prefix)
        #: The registry's workers, read again only when they may have changed.
        self.live = LiveWorkers(registry)
        #: This store's live workers as of the last placement, stalled ones
        #: included, each with its instance's first registration (Redis time;
        #: a dispatch to one that left, or to an earlier instance of one that
        #: restarted, is taken back at once).
        self.live_instances: dict[str, datetime | None] = {}

    def placement(self, view: BeatView) -> Placement:
        """The round's free slots per worker; records ``live_slots`` and
        ``pool_slots`` in the state.

        A worker's running leases last pinged before it registered are an
        earlier instance's (restarted under the same name): they take none of
        the new instance's slots, and are taken over as a dead owner's."""
        state, running_by_worker = self.state, view.running_by_worker
        own = self.foreign.own(self.live.at(view, fresh=bool(view.stale_workers or self.stalled)))
        self.live_instances = {w.name: w.registered_at for w in own}
        workers = self.stalled.placeable(
            own,
            view.stale_workers,
            ping_timeout=timedelta(milliseconds=self.leases.ping_timeout_ms),
            worker_ttl=timedelta(milliseconds=self.registry.ttl_ms),
        )
        pending_by_worker = Counter(pend.worker for pend in state.pending.values())
        capacity = self.settings.capacity
        if not workers and not self.stalled and capacity:
            state.live_slots = capacity
            state.pool_slots = PoolSlots.every_pool(capacity, self.default_queue)
            used = sum(running_by_worker.values()) + len(state.pending)
            return Placement(
                [WorkerSlots(ANY_WORKER, "", _AllQueues(), capacity - used)], self.default_queue
            )
        state.live_slots = sum(w.slots for w in workers)
        state.pool_slots = PoolSlots.of_workers(
            ((w.pools, w.slots) for w in workers), self.default_queue
        )
        slots = [
            WorkerSlots(
                w.name,
                w.node,
                frozenset(w.queues),
                w.slots
                - _running_on(w, view, running_by_worker.get(w.name, 0))
                - pending_by_worker.get(w.name, 0),
                w.tasks,
            )
            for w in workers
        ]
        return Placement(slots, self.default_queue)

    def admission(self, now: float, free: int, running: Set[str]) -> AdmissionRound | None:
        """The round's look-ahead admission (``None`` without ``dgs_lookahead``)
        over ``free`` slots, given the schedules running and dispatched."""
        if self.lookahead is None:
            return None
        pending = self.state.pending
        busy = [*running, *(n for n in pending if n not in running)]
        return self.lookahead.round(now, free, self.state.tracked, busy)


def _running_on(worker: WorkerInfo, view: BeatView, running: int) -> int:
    """``worker``'s ``running`` leases less those of its earlier instances."""
    if not running or worker.registered_at is None:
        return running
    return running - view.running_pinged_before(worker.name, worker.registered_at)


class _AllQueues(frozenset[str]):
    """A queue set that contains every queue (fixed-capacity mode)."""

    def __contains__(self, item: object) -> bool:
        return True
