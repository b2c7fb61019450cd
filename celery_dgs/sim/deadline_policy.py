"""``dgs`` and ``fifo`` in the simulator: beat's decision code on the
simulator's state (:class:`DeadlinePolicy`).

``dgs`` is beat's decision under an
:class:`~celery_dgs.core.ranking.OrderPolicy` (the settings that change
beat's order: ``settings.order_policy``): the ranking index of
:func:`~celery_dgs.core.ranking.build_index`, keyed by
:func:`~celery_dgs.core.timing.start_times` and re-timed as blackouts begin
and end (:mod:`~celery_dgs.core.blackout_watch`), the same
:func:`~celery_dgs.core.placement.choose_dispatches` with a re-check of
start times before a dispatch, beat's window of schedules
(:mod:`.window`) with the certainty rule, and with ``lookahead`` the
long-run admission of :mod:`~celery_dgs.core.lookahead`. ``fifo`` is the
same machinery keyed by ``can_start_by`` (the oldest due first) with the
``greedy`` overload policy.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from ..core.blackout_watch import BlackoutWatch, stale_from
from ..core.fewest_errors import period_seconds
from ..core.index import DeadlineIndex
from ..core.lookahead import AdmissionRound, CapQueue, DemandBook
from ..core.placement import Constraints, Placement, choose_dispatches
from ..core.pool_slots import overloaded_pools
from ..core.priority import PriorityIndex
from ..core.ranking import OrderPolicy, RankingSources, build_index
from ..core.revisit_groups import RevisitKey, revisit_key
from ..core.slot_wait import SlotWait, still_blocked, wait_bound
from ..core.timing import start_times
from ..core.window_certainty import (
    Refusal,
    Vouching,
    choose_reading_on,
    pick_bound,
    read_on_helps,
    vouching_for,
)
from .policy import Policy
from .state import PolicyHost
from .window import SimRead, SimWindow

#: ``fifo``'s order settings: plain deadline order, keyed by ``can_start_by``.
FIFO_ORDER = OrderPolicy(overload="greedy", group_shares=None)
#: ``dgs``'s order settings unless told: beat's defaults.
DEFAULT_ORDER = OrderPolicy()
_NO_LIMIT = 1 << 62


class DeadlinePolicy(Policy):
    """Beat's decision code on the simulator's state, ordered by ``order``
    (``fifo``: keyed by ``can_start_by`` alone)."""

    def __init__(
        self, sim: PolicyHost, order: OrderPolicy = DEFAULT_ORDER, *, fifo: bool = False
    ) -> None:
        super().__init__(sim)
        self.name = "fifo" if fifo else "dgs"
        self.order = order
        self.fifo = fifo
        self.priority = {s.name: s.spec.priority for s in sim.workload.schedules}
        #: The shares of the indexed schedules (as beat keeps them: the
        #: priority classes' overload signal, the look-ahead's book).
        self.book = DemandBook()
        self.index = self.make_index()
        #: the index's class picks when the warm-up ended (None: not yet)
        self._picks_at_window: int | None = None
        #: Look-ahead admission (``core/lookahead.py``): the long candidates
        #: its cap holds, each one's should_start_by when indexed, and the runs
        #: this policy started: (expected end, expected run time).
        self.lookahead = order.lookahead
        self.cap_queue = CapQueue()
        self.should: dict[str, float] = {}
        self.running: dict[str, tuple[float, float]] = {}
        self.ladder = sim.retry_ladder
        self.blackout_names = {s.name for s in sim.workload.schedules if s.spec.blackout_periods}
        #: When the indexed schedules with blackouts need their times again (beat's).
        self.blackouts = BlackoutWatch()
        self.constraints: dict[str, Constraints] = {
            s.name: Constraints(pool=s.spec.pool, excluded_nodes=s.spec.dont_run_on_nodes)
            for s in sim.workload.schedules
        }
        #: Out of the index because no live worker may run them (beat's
        #: ``BeatState.unserved``), until the workers change (``_live_key``).
        self.unserved: set[str] = set()
        self._live_key: Hashable = None
        self._placement_serves: Callable[[Constraints], bool] | None = None
        #: Out of the index until a worker that may run them has a slot free
        #: (beat's ``BeatRanking.waiting``).
        self.waiting = SlotWait()
        #: Beat's window of schedules (``order.window_size``); ``None``: all indexed.
        self.window = (
            None
            if order.window_size is None
            else SimWindow(
                sim,
                size=order.window_size,
                horizon_s=order.window_s,
                retry_ladder=self.ladder,
                read_on=order.window_read_on,
            )
        )
        #: The certainty rule of the order with a full window (None: none).
        self.bound = pick_bound(order, expected_s=self.expected_s, margin_s=self.margin_s)
        #: Candidates the rule refused; the one the last choice ended at.
        self.refusals = 0
        self._refusal: Refusal | None = None

    def make_index(self) -> DeadlineIndex:
        """The ranking index: :func:`~celery_dgs.core.ranking.build_index` of
        ``order`` over :meth:`sources`."""
        return build_index(self.order, self.sources())

    def sources(self) -> RankingSources:
        """What the index reads: the loop's expected run times and margins
        (kept with the stats, unchanged while a schedule is indexed), each
        schedule's class, whether the demand exceeds the live slots, and an
        adaptive schedule's revisit group."""
        return RankingSources(
            expected_s=self.expected_s,
            margin_s=self.margin_s,
            priority_of=self.priority.__getitem__,
            overloaded=self.overloaded,
            clock_offset_s=self.sim.at(0.0).timestamp(),
            period_s=self.period_s,
            revisit_key_of=self.revisit_key_of,
        )

    def revisit_key_of(self, name: str) -> RevisitKey | None:
        st = self.sim.states[name]
        return revisit_key(st.sched.spec, st.stats)

    def expected_s(self, name: str) -> float:
        return self.sim.states[name].expected

    def margin_s(self, name: str) -> float:
        return self.sim.states[name].margin

    def period_s(self, name: str) -> float:
        st = self.sim.states[name]
        return period_seconds(st.sched.spec, st.stats)

    def overloaded(self) -> bool:
        """Whether some pool's indexed schedules need more than the live slots
        that serve them (beat's :meth:`BeatRanking.overloaded
        <celery_dgs.beat.ranking.BeatRanking.overloaded>`)."""
        return bool(overloaded_pools(self.book.by_pool(), self.sim.live_pool_slots))

    def _times(self, name: str, now: float) -> tuple[float, float]:
        st = self.sim.states[name]
        at = self.sim.at(now)
        times = start_times(st.sched.spec, st.stats, at, retry_ladder=self.ladder)
        can = self.sim.rel(times.can_start_by)
        if name in self.blackout_names:
            stale = stale_from(st.sched.spec, st.stats, times.can_start_by, at)
            self.blackouts.note(name, None if stale is None else self.sim.rel(stale))
        return (can, can) if self.fifo else (can, self.sim.rel(times.should_start_by))

    def _retime_stale(self, now: float) -> None:
        """Beat's :meth:`BeatRanking.retime_stale
        <celery_dgs.beat.ranking.BeatRanking.retime_stale>`: an indexed schedule
        whose blackout began or ended since it was timed takes its new times."""
        self.blackouts.retime_due(now, self.index, lambda name: self._times(name, now))

    def idle(self, name: str, now: float) -> None:
        self.running.pop(name, None)  # its run, if any, ended: held or not, it is not busy
        window = self.window
        if window is not None:
            st = self.sim.states[name]
            if not window.idle(name, st.sched.spec, st.stats, now):
                self._let_go(name)
                return
        self._index(name, now)

    def _let_go(self, name: str) -> None:
        """Out of the index and the demand book: past the window."""
        self.index.remove(name)
        self.waiting.discard(name)
        self.blackouts.forget(name)
        self.book.forget(name)

    def _index(self, name: str, now: float) -> None:
        can, should = self._times(name, now)
        self.index.upsert(name, can, should)
        self.waiting.discard(name)
        st = self.sim.states[name]
        self.book.note_schedule(name, st.sched.spec, st.stats, st.expected)
        if self.lookahead:
            self.running.pop(name, None)
            self.should[name] = should

    def held(self, name: str) -> None:
        self.book.forget(name)  # a held schedule's share does not count
        if self.window is not None:
            self.window.forget(name)

    def _defer(self, name: str, now: float, admission: AdmissionRound | None) -> bool:
        # The index holds the times computed when the schedule was indexed; a
        # schedule with blackouts has them computed again at ``now`` and goes
        # back to the index when it cannot start yet. Without blackouts
        # start_times does not depend on ``now`` (the anchor is set, the stats
        # have not changed since indexing), so the re-check is skipped.
        if name in self.blackout_names:
            can, should = self._times(name, now)
            if can > now:
                self.index.upsert(name, can, should)
                return True
            self.should[name] = should
        if admission is None:
            return False
        should = self.should[name]
        expected = self.book.expected_s(name, self.sim.states[name].expected)
        wake = admission.hold_until(expected, should, name)
        if wake is not None:  # held back: looked at again at `wake`
            self.index.upsert(name, wake, should)
            return True
        self.running[name] = (now + expected, expected)
        return False

    def class_picks(self) -> int | None:
        if not isinstance(self.index, PriorityIndex):
            return None
        at_window = self._picks_at_window
        return 0 if at_window is None else self.index.class_picks - at_window

    def dispatch(self, now: float) -> None:
        if (
            self._picks_at_window is None
            and now >= self.sim.tally.window_start
            and isinstance(self.index, PriorityIndex)
        ):
            self._picks_at_window = self.index.class_picks
        sim = self.sim
        placement = Placement(sim.worker_slots, sim.workload.default_queue)
        self._serve_again(placement, now)
        released = self._release_waiting(placement, now)
        try:
            self._dispatch(placement, now)
        finally:
            self._wait_again(released, placement)

    def _dispatch(self, placement: Placement, now: float) -> None:
        """The round's choice on ``placement``'s free slots; starts the chosen runs."""
        sim = self.sim
        self._retime_stale(now)
        if self.window is not None:
            self._read_window(now)
            self._take_read(self.window.refresh(now, self._serves), now)
        while self.index.peek(now) is None:
            if not self.read_eligible(now):
                return
        admission = None
        if self.lookahead:
            running = self.running
            admission = AdmissionRound(
                self.book,
                now,
                placement.free + len(running),
                lambda: list(running.values()),
                self.cap_queue,
            )
        chosen = choose_reading_on(
            lambda _done: self._choose(now, placement, admission),
            lambda _done: placement.free > 0,
            lambda: self._refusal,
            lambda bucket: self.read_further(now, bucket),
            lambda: self.read_eligible(now),
            lambda name: self._read_on_helps(name, now),
        )
        for name, worker in chosen:
            sim.start_run(name, worker, now, slot_taken=True)

    def _serve_again(self, placement: Placement, now: float) -> None:
        """Beat's ``BeatEngine._serve_again``: once the workers change, the
        schedules set aside because none could run one are indexed again,
        and the window's eligible part starts again."""
        self._placement_serves = placement.serves
        key = placement.live_key
        if key == self._live_key:
            return
        self._live_key = key
        freed, self.unserved = self.unserved, set()
        for name in sorted(freed):
            self._index(name, now)
        if self.window is not None:
            self.window.live_workers_changed()

    def _serves(self, name: str) -> bool:
        """Whether some live worker may run ``name``, as of this round."""
        serves = self._placement_serves
        return serves is None or serves(self.constraints[name])

    def _set_aside(self, names: list[str]) -> None:
        """Beat's ``BeatRanking.set_aside``: out of the index and the demand
        book until the workers change."""
        for name in names:
            self.index.remove(name)
            self.waiting.discard(name)
            self.blackouts.forget(name)
            self.book.forget(name)
            self.unserved.add(name)

    def _wait_for_slot(self, names: list[str]) -> None:
        """Beat's ``BeatRanking.wait_for_slot``: out of the index (not the
        demand book) until a worker that may run each has a slot free."""
        for name in self.waiting.take(self.index, names, self.constraints.__getitem__):
            self.blackouts.forget(name)
        window = self.window
        if window is not None:  # beat's WaitingBound: the window's size, past its range
            bound = wait_bound(window.bounds.size)
            for name in self.waiting.over(bound, window.held.past_end):
                window.held.forget(name)
                self._let_go(name)

    def _release_waiting(self, placement: Placement, now: float) -> list[str]:
        """Beat's ``BeatRanking.release_waiting``: the most urgent schedules
        waiting for a slot of each class that has one free are indexed again,
        at the times they had (one with blackouts at its times now)."""
        released = self.waiting.release(placement.free_for)
        for name, can, should in released:
            if name in self.blackout_names:
                self._index(name, now)
            else:
                self.index.upsert(name, can, should)
        window = self.window  # beat's BusyBacklog.refill
        bound = (
            None if window is None or not self.waiting.trimmed else wait_bound(window.bounds.size)
        )
        if window is not None and bound is not None and self.waiting.wants_refill(bound):
            window.bounds.part.clear()
        return [name for name, _can, _should in released]

    def _wait_again(self, released: list[str], placement: Placement) -> None:
        """Beat's ``BeatRanking.wait_again``: those still indexed whose class
        has no slot free any more wait again."""
        constraints_of = self.constraints.__getitem__
        self._wait_for_slot(still_blocked(released, self.index, constraints_of, placement.free_for))

    def _choose(
        self, now: float, placement: Placement, admission: AdmissionRound | None
    ) -> list[tuple[str, str]]:
        vouching = self._vouching(now)
        chosen = choose_dispatches(
            self.picks(),
            now,
            placement,
            self.constraints.__getitem__,
            lambda name: self._defer(name, now, admission),
            limit=_NO_LIMIT,
            vouch=vouching,
            set_aside=self._set_aside,
            wait_for_slot=self._wait_for_slot,
        )
        self._refusal = None if vouching is None else vouching.refusal
        self.refusals += self._refusal is not None
        return chosen

    def picks(self) -> DeadlineIndex:
        """What a round chooses from: the ranking index (an experiment may wrap it)."""
        return self.index

    def _read_on_helps(self, refused: str, now: float) -> bool:
        """Beat's :meth:`ScheduleWindow.read_on_helps
        <celery_dgs.beat.schedule_window.ScheduleWindow.read_on_helps>` in the simulator."""
        window = self.window
        assert window is not None  # a refusal needs a window
        reach = window.reach_ends()
        times = self.index.times(refused)
        return read_on_helps(window.bounds, self.bound, refused, times, now, reach)

    def _vouching(self, now: float) -> Vouching | None:
        """The certainty rule for a round at ``now`` (beat's): ``None`` without a
        window or a rule."""
        window = self.window
        ends = None if window is None else window.ends()
        return vouching_for(self.bound, self.index, now, ends)

    def read_eligible(self, now: float) -> bool:
        """A round has free slots and no eligible schedule left: whether the
        window read on its eligible part (beat's :meth:`ScheduleLoader.read_eligible
        <celery_dgs.beat.loading.ScheduleLoader.read_eligible>`)."""
        if self.window is None:
            return False
        rows = 0
        for read in self.window.read_eligible(now, self._serves):
            rows += self._take_read(read, now)
        return rows > 0

    def read_further(self, now: float, bucket: int | None = None) -> bool:
        """The rule refused a pick on ``bucket``'s bound (``None``: the
        should-order slice's): whether the window read on (beat's
        :meth:`ScheduleLoader.read_further
        <celery_dgs.beat.loading.ScheduleLoader.read_further>`)."""
        window = self.window
        if window is None:
            return False
        return window.bounds.read_further(
            bucket, lambda read: self._read_window(now, more=True, bucket=read)
        )

    def _read_window(self, now: float, *, more: bool = False, bucket: int | None = None) -> int:
        """Index the window's next slice (the idle schedules in it; ``more``,
        ``bucket``: :meth:`SimWindow.read <celery_dgs.sim.window.SimWindow.read>`),
        let go of what it moved past; how many schedules the slice had."""
        assert self.window is not None
        return self._take_read(self.window.read(now, more=more, bucket=bucket), now)

    def _take_read(self, read: SimRead | None, now: float) -> int:
        """Index the idle schedules ``read`` holds, let go of those it moved
        past; how many schedules it had."""
        if read is None:
            return 0
        names, outside, rows = read
        states, index = self.sim.states, self.index
        for name in names:
            self.unserved.discard(name)  # read again: placed again (beat's apply_row)
            # one indexed already keeps its entry (a look-ahead hold-back with it)
            if states[name].running_since is None and name not in index:
                self._index(name, now)
        for name in outside:
            self.unserved.discard(name)
            self._let_go(name)
        return rows

    def next_wakeup(self) -> float | None:
        """The index's next start, or the window's next read if sooner (beat
        ticks at least every few polls)."""
        wake = self.index.next_wakeup()
        if self.window is None:
            return wake
        read_at = self.window.next_read_s()
        return read_at if wake is None else min(wake, read_at)
