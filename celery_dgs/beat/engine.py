"""The beat's decision loop, free of Celery: refresh, admit, place, dispatch.

Each :meth:`BeatEngine.tick`:

1. applies the schedule rows that changed in the store since the last look
   (``changes_since(cursor)``), at most every ``store_poll_interval``;
2. if anything is eligible, running, dispatched or waiting for a slot, reads the
   live state from Redis: running leases, pending dispatches, live workers;
   takes back dispatches older than ``dispatch_timeout``;
3. computes the free slots per worker (slots - running leases - pending
   dispatches), re-indexes the schedules waiting for a slot of a worker that
   now has one free, and pops, in ``should_start_by`` order, as many placeable
   schedules as there are free slots (:func:`~celery_dgs.core.placement.plan_dispatches`);
4. writes the dispatch records (one pipeline), then publishes the messages;
5. returns how long to sleep: until the earliest ``can_start_by``, capped.

With a :class:`~celery_dgs.beat.leader.BeatLeadership` (every real beat has
one), step 0 is the leader check: a standby only keeps its index warm (step 1)
and sleeps ``standby_interval``; a beat that just became leader first adopts
the dispatch records in Redis (the previous leader's pending dispatches are
waited for, never re-dispatched); the dispatch records of step 4 are fenced by
the leader token, and a refused write publishes nothing.

A schedule is in exactly one of: the index (may be dispatched), ``parked``
(running or dispatched: re-inserted once the lease or dispatch is gone),
``held`` (paused/inactive/invalid: not schedulable; or ``unserved``: no live
worker may run it, re-indexed once the live workers change), or waiting for a
slot (``BeatRanking.waiting``: every live worker that may run it is busy, and
a round looked past too many such; re-indexed, the most urgent first, at a
round in which one of them has a slot free). Error paths keep this
rule: a round that fails part-way (Redis or the store down) re-indexes what it
took out before re-raising, so nothing is lost until its store row changes.

The engine wires its parts around one :class:`~celery_dgs.beat.state.BeatState`:
:class:`~celery_dgs.beat.ranking.BeatRanking` (the index),
:class:`~celery_dgs.beat.loading.ScheduleLoader` (load and change poll),
:class:`~celery_dgs.beat.check_window.CheckWindow`,
:class:`~celery_dgs.beat.pending.PendingDispatches`,
:class:`~celery_dgs.beat.placement.BeatPlacement`,
:class:`~celery_dgs.beat.sending.DispatchSender`, the
:class:`~celery_dgs.beat.reaper.RunReaper`,
:class:`~celery_dgs.beat.reaper.HistoryPruner` and
:class:`~celery_dgs.beat.reaper.TallyFolder`; it runs the round, and
publishes a :class:`~celery_dgs.beat.snapshot.BeatSnapshot` when the metrics ask.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Set
from dataclasses import replace
from datetime import datetime

from ..core.clock import Clock
from ..core.pace import PaceFigures, RoundPace
from ..core.placement import Placement, choose_dispatches
from ..core.window_certainty import Refusal, Vouching, choose_reading_on, vouching_for
from ..dispatches import DispatchBackend
from ..leases.base import BeatViewSource, LeaseBackend
from ..leases.types import BeatView
from ..outcome_spool import OutcomeSpool
from ..registry import RegistryBackend
from ..settings import DgsSettings
from ..store.base import ScheduleStore
from ..store.condition_tally import FOLD_INTERVAL_S
from .busy_backlog import BusyBacklog
from .check_window import CheckWindow
from .leader import BeatLeadership, Role
from .loading import ScheduleLoader
from .lookahead import BeatLookahead
from .pending import PendingDispatches
from .placement import BeatPlacement
from .ranking import BeatRanking
from .reaper import HistoryPruner, RunReaper, TallyFolder
from .schedule_window import ScheduleWindow
from .sending import DispatchSender
from .snapshot import BeatSnapshot, SnapshotSlot
from .state import BeatState
from .types import ANY_WORKER, DispatchOrder, Pending, Publisher, Tracked

__all__ = [
    "ANY_WORKER",
    "BeatEngine",
    "DispatchOrder",
    "Pending",
    "Publisher",
    "Tracked",
]

logger = logging.getLogger("celery_dgs.beat")

#: Seconds a metrics scrape waits for beat's next round to publish a snapshot
#: before it serves the latest one.
SNAPSHOT_WAIT_S = 1.0


class BeatEngine:
    """Beat's decision loop: the parts wired around one state (see the module doc)."""

    def __init__(
        self,
        *,
        store: ScheduleStore,
        leases: LeaseBackend,
        registry: RegistryBackend,
        dispatches: DispatchBackend,
        publish: Publisher,
        settings: DgsSettings,
        clock: Clock,
        default_queue: str = "celery",
        max_interval: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
        leadership: BeatLeadership | None = None,
        wake: Callable[[], None] | None = None,
        outcome_spool: OutcomeSpool | None = None,
    ) -> None:
        self.store, self.leases, self.registry = store, leases, registry
        self.dispatches = dispatches
        #: The tick reads its poll interval and sleeps from it at each tick; the
        #: parts keep the settings they were built with.
        self.settings = settings
        self.clock, self.monotonic = clock, monotonic
        self.default_queue, self.max_interval = default_queue, max_interval
        #: ``None``: dispatch unconditionally (tests, benchmarks, a single beat tool).
        self.leadership = leadership
        self.state = state = BeatState()
        self.ranking = ranking = BeatRanking(state, settings, clock)
        self.window = CheckWindow(state, ranking, store, settings, clock)
        #: Beat's window of schedules (``dgs_schedule_window_size``); ``None``: all held.
        self.schedule_window = ScheduleWindow.configured(state, ranking, store, clock, settings)
        self.loader = ScheduleLoader(
            state,
            ranking,
            self.window,
            store,
            settings,
            clock,
            monotonic,
            schedules=self.schedule_window,
        )
        #: With a window: the bound on a busy pool's backlog waiting in memory.
        self.busy_backlog = (
            None if self.schedule_window is None else BusyBacklog(self.schedule_window, ranking)
        )
        ranking.waiting_bound = None if self.busy_backlog is None else self.busy_backlog.bound()
        self.pending_dispatches = PendingDispatches(state, ranking, dispatches, settings, monotonic)
        self.placement = BeatPlacement(
            state, registry, leases, settings, default_queue, ranking.lookahead, store.store_id()
        )
        self.sender = DispatchSender(
            state=state,
            requeue=ranking.reindex,
            dispatches=dispatches,
            publish=publish,
            store=store,
            settings=settings,
            leadership=leadership,
            monotonic=monotonic,
        )
        #: Ends as ``lost`` the running rows nobody is left to end (leader only).
        self.reaper = RunReaper(
            store,
            leases,
            clock,
            grace_s=settings.ping_timeout + settings.steal_delay,
            ping_timeout_s=settings.ping_timeout,
            interval_s=settings.reap_interval,
            batch_size=settings.reap_batch_size,
            monotonic=monotonic,
            spool=outcome_spool,
            alpha=settings.ewma_alpha,
        )
        self.pruner = HistoryPruner(store, clock, settings)
        self.tally_folder = TallyFolder(store, clock, FOLD_INTERVAL_S)
        #: Reads each round's lease/dispatch state; keeps the owners between changes.
        self.lease_view: BeatViewSource = leases.beat_view_reader()
        #: ``wake``: ends beat's wait between rounds (the metrics ask for a
        #: snapshot, which the next round publishes).
        self.snapshots = SnapshotSlot(wake)
        #: The dispatch rounds of the last minute: who limits the runs per second.
        self.pace = RoundPace()
        self._thread: int | None = None  # the thread that loads (and ticks)
        #: The certainty rule's refusal of the schedule the last choice stopped at.
        self._refusal: Refusal | None = None

    @property
    def last_tick(self) -> float | None:
        """When the last tick completed (``monotonic``); ``None``: none yet."""
        return self.state.last_tick

    # -- loading -----------------------------------------------------------------
    def load(self) -> None:
        """Load every active schedule (:meth:`ScheduleLoader.load`), the check
        window, and the dispatches a previous beat left pending."""
        self._thread = threading.get_ident()
        count = self.loader.load()
        self.loader.read_windows()
        self.pending_dispatches.adopt()
        logger.info(
            "celery-dgs beat: loaded %d schedules and %d deferred checks (cursor %d)",
            count,
            len(self.state.checks),
            self.state.cursor,
        )

    def snapshot(self, timeout_s: float = SNAPSHOT_WAIT_S) -> BeatSnapshot:
        """The state for the metrics: asked from beat's own thread (the one
        that loaded it, between its rounds), built and published at once; from
        another, the one the next round publishes (waited for up to
        ``timeout_s``), else the latest (an empty one before any)."""
        if threading.get_ident() == self._thread:
            snapshot = self._snapshot()
            self.snapshots.publish(snapshot)
            return snapshot
        return self.snapshots.request(timeout_s)

    # -- the tick ------------------------------------------------------------------
    def tick(self) -> float:
        """One round; returns how long to sleep. Records when it completed
        (``last_tick``, monotonic) for the health endpoint: a tick that raised
        does not count. Publishes a snapshot if the metrics asked for one."""
        sleep = self._tick()
        self.state.last_tick = self.monotonic()
        if self.snapshots.asked:
            self.snapshots.publish(self._snapshot())
        return sleep

    def _snapshot(self) -> BeatSnapshot:
        return BeatSnapshot.of(self.state, waiting_for_slot=len(self.ranking.waiting))

    def _tick(self) -> float:
        mono = self.monotonic()
        state, leadership = self.state, self.leadership
        role = leadership.check() if leadership is not None else Role.LEADER
        if mono - self.loader.last_poll >= self.settings.store_poll_interval:
            self.loader.refresh()
        self.loader.read_windows()
        if leadership is not None and role is Role.STANDBY:
            state.most_urgent_should_start_by = None
            state.live_slots = state.pool_slots = None  # known again at its next round as leader
            return leadership.standby_interval
        if role is Role.ELECTED:
            state.live_slots = state.pool_slots = None
            self.pending_dispatches.adopt()
            state.refresh_after_read = True  # a standby's stats may be a poll old
        self.reaper.store_kept()  # before the round: a kept outcome's schedule just ran
        moment = self.clock.now()
        now = moment.timestamp()
        index = self.ranking.index
        self.loader.begin_tick()
        self.ranking.retime_stale(now)  # before the index says what is eligible
        self.loader.refresh_eligible(moment)  # the window's eligible part, as of now
        # A full window of schedules may hold none eligible while the fleet has.
        while index.peek(now) is None and self.loader.read_eligible(moment):
            pass
        waiting = self.ranking.waiting
        # Schedules set aside for want of a live worker are served again only by
        # a round (it reads the live workers), so one runs while any wait.
        awaiting_workers = bool(state.unserved) or self.loader.passed_over_unserved
        if index.peek(now) is not None or state.parked or waiting or awaiting_workers:
            self._dispatch_round(moment)
        self.pruner.maybe_prune(mono)
        self.tally_folder.maybe_fold(mono)
        self.reaper.maybe_reap()
        top = index.peek(now)
        state.most_urgent_should_start_by = (
            None if top is None else self.ranking.should_start_by(top)
        )
        wakes = [w for w in (index.next_wakeup(), self.loader.window_wake()) if w is not None]
        sleep = self.max_interval if not wakes else max(0.0, min(wakes) - now)
        if state.parked or waiting or awaiting_workers:  # woken by a signal, or at the next poll
            sleep = min(sleep, self.settings.store_poll_interval)
        if leadership is not None:
            sleep = min(sleep, leadership.renew_interval)
        if self.loader.eligible_cut:  # the eligible part has more to read
            return 0.0
        return min(sleep, self.max_interval, self.settings.store_poll_interval * 5)

    def _read_state(self) -> BeatView:
        """The round's lease and dispatch reads, one :meth:`BeatViewSource.read`
        (with Redis, one ``beat_view.lua`` call: sweep, running leases per worker,
        stale owners; every owner only when the lease generation changed). The
        dispatch index's names are read only if its size is not the number of
        pending dispatches while the index is known to hold exactly those."""
        return self.lease_view.read(expected_dispatches=self.pending_dispatches.expected_count())

    def _free_parked(self, view: BeatView, refreshed: bool) -> None:
        """Re-index the parked schedules neither running nor pending any more."""
        state = self.state
        freed = [n for n in state.parked if n not in view.running and n not in state.pending]
        if not freed:
            return
        # Workers write the outcome to the store before releasing the lease:
        # read it now, or the schedule would be re-indexed with stale stats.
        # Refresh first: if it raises, the freed schedules are still parked and
        # are freed again next round (un-parking first would lose them). A
        # refresh made after this round's snapshot already covers them.
        if not refreshed:
            self.loader.refresh()
        leaving = state.leaving.intersection(freed)
        for name in state.unpark(freed):
            self.ranking.reindex(name)
        for name in leaving:  # past the window: forgotten, their demand too
            self.ranking.note_demand(name)

    def _serve_again(self, placement: Placement) -> None:
        """Once the live workers change, re-index the schedules set aside
        because none of them could run one, and let the window's eligible
        part read again the ones it passed over for that reason."""
        state = self.state
        key = placement.live_key
        state.serves = placement.serves
        if key == state.live_key:
            return
        state.live_key = key
        for name in state.release_unserved():
            self.ranking.reindex(name)
            self.ranking.note_demand(name)
        self.loader.live_workers_changed()

    def _dispatch_round(self, moment: datetime) -> None:
        started = self.monotonic()
        dispatched = 0
        try:
            dispatched = self._round(moment, started)
        finally:
            limit = self.settings.max_dispatches_per_tick
            self.pace.note(started, self.monotonic(), dispatched, capped=dispatched >= limit)

    def _round(self, moment: datetime, mono: float) -> int:
        """The round at ``moment``: returns how many runs it dispatched."""
        state = self.state
        view = self._read_state()
        refreshed = state.refresh_after_read
        if refreshed:
            # A worker writes its outcome before releasing its lease: any run whose
            # lease this snapshot no longer shows has its outcome in the store now.
            self.loader.refresh()
            state.refresh_after_read = False
        self.pending_dispatches.settle(view.dispatch_names, mono)
        self._free_parked(view, refreshed)
        placement = self.placement.placement(view)
        # freed at the next round (parked until then)
        self.pending_dispatches.take_back_from_gone(self.placement.live_instances)
        self._serve_again(placement)
        released = self.ranking.release_waiting(placement.free_for)
        if self.busy_backlog is not None:  # a backlog let go of, running low: read again
            self.busy_backlog.refill()
        try:
            return self._dispatch(moment, view, placement)
        finally:
            self.ranking.wait_again(released, placement.free_for)

    def _dispatch(self, moment: datetime, view: BeatView, placement: Placement) -> int:
        """The round's choice and dispatch on ``placement``'s free slots; how many."""
        now = moment.timestamp()
        if placement.free <= 0:
            return 0
        limit = self.settings.max_dispatches_per_tick
        # A full window of schedules may hold none eligible while the fleet has,
        # or offer one the certainty rule cannot vouch for: read on while slots
        # are free and reading may help (the order is the whole fleet's).
        orders = choose_reading_on(
            lambda done: self._choose(now, placement, view.running, limit - done),
            lambda done: placement.free > 0 and done < limit,
            lambda: self._refusal,
            self.loader.read_further,
            lambda: self.loader.read_eligible(moment),
            lambda name: self.loader.reading_on_helps(name, now),
        )
        if orders:
            self.sender.send(orders, now)
            self.pending_dispatches.note_instances(
                [o.schedule for o in orders], self.placement.live_instances
            )
        return len(orders)

    def pace_figures(self) -> PaceFigures:
        """The dispatch pace of the last minute, with the window of schedules
        beat holds and where its priority classes stand (what the leader
        writes for ``status`` and the page)."""
        window = self.loader.schedules
        figures = self.pace.figures(self.monotonic())
        elevator = self.ranking.elevator_state()
        if window is not None:
            figures = replace(figures, window=window.figures())
        return replace(figures, elevator=elevator)

    def _vouching(self, now: float) -> Vouching | None:
        """The certainty rule for a choice at ``now`` while the window of
        schedules is full (``None``: no rule for the order, or no check:
        :meth:`ScheduleLoader.window_ends <celery_dgs.beat.loading.ScheduleLoader.window_ends>`)."""
        ranking = self.ranking
        return vouching_for(ranking.pick_bound, ranking.index, now, self.loader.window_ends())

    def _choose(
        self, now: float, placement: Placement, running: Set[str], limit: int
    ) -> list[DispatchOrder]:
        """The orders for the schedules ``choose_dispatches`` pops from the index
        and places; a running or dispatched one is parked, one not due any more
        (e.g. its blackout began) or held back by the look-ahead is re-indexed."""
        state, ranking, tracked = self.state, self.ranking, self.state.tracked
        pending = state.pending
        # The chosen schedules have left the index: their should_start_by (for the
        # dispatch's lateness) is the one re-computed when they were confirmed due.
        should_by: dict[str, float] = {}
        admission = self.placement.admission(now, placement.free, running)

        def defer(name: str) -> bool:
            if name in running or name in pending:  # running or already dispatched: park it
                state.park(name)
                return True
            should = ranking.due_should_start_by(name, now)  # e.g. its blackout began
            if should is None:
                return True
            if admission is not None and BeatLookahead.hold(
                admission, ranking.index, name, tracked[name], should
            ):
                return True  # held back: re-indexed, eligible again when looked at next
            should_by[name] = should
            return False

        vouching = self._vouching(now)
        chosen = choose_dispatches(
            ranking.index,
            now,
            placement,
            ranking.constraints_of,
            defer,
            limit=limit,
            vouch=vouching,
            set_aside=ranking.set_aside,
            wait_for_slot=ranking.wait_for_slot,
        )
        self._refusal = None if vouching is None else vouching.refusal
        return [self.sender.order(name, worker, should_by[name]) for name, worker in chosen]
