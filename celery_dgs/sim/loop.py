"""Discrete-event simulation on a virtual clock.

Events live in one heap (run ends, outages, Celery beat's enqueue times, and
deadline crossings while measuring recovery). Between events the loop asks
the policy for the next eligibility time (the index's ``next_wakeup``), so
nothing scans all schedules per step. Run statistics are updated with the
core's ``record_start`` and the store's run-end rule
(:func:`~celery_dgs.store.base.stats_after`: the core recorders, and an
adaptive schedule's ladder; :func:`~celery_dgs.store.base.disabled_after`),
deadlines with :func:`~celery_dgs.core.timing.error_at`, exactly as the
worker and the store do. An optional upstream
(:class:`~celery_dgs.sim.state.VisitObserver`) says whether a good run was
eventful and sends the lister's hints (:meth:`Simulator.upstream_modified`).

Simplifications (documented in ``docs/simulator.md``): a dispatch starts at
once (no broker or dispatch latency); a node that goes down ends its runs at
that moment (interrupted; the real steal delay is not modelled); a run in
progress when a blackout begins is not terminated.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..core.placement import WorkerSlots
from ..core.pool_slots import PoolSlots
from ..core.ranking import OrderPolicy
from ..core.run_end import disabled_after, stats_after
from ..core.spec import CheckSpec
from ..core.stats import DEFAULT_EWMA_ALPHA, ScheduleStats, record_start
from ..core.timing import DEFAULT_RETRY_LADDER, error_at, expected_duration, start_margin
from .celery_beat_policy import BeatPolicy
from .checks import end_of_check
from .deadline_policy import DEFAULT_ORDER
from .draws import RunDraw, StreamDraw
from .metrics import (
    NONE_FREE,
    OTHER_FREE,
    USABLE_FREE,
    CauseTally,
    SimResult,
    SlotHistory,
    Tally,
    blackout_windows,
    placement_groups,
    summarise,
)
from .policies import make_policy
from .policy import PolicyFactory
from .state import CALL, DEADLINE, DOWN, END, FIRE, UP, SchedState, VisitObserver
from .workload import Workload, nominal_period

#: Runs started sooner than this fraction of the period after the previous
#: good start count as wasted.
WASTED_FRACTION = 0.5


class Simulator:
    """The event loop; its policy sees it as a :class:`~.state.PolicyHost`."""

    END, DOWN, UP, FIRE, DEADLINE = END, DOWN, UP, FIRE, DEADLINE

    def __init__(
        self,
        workload: Workload,
        policy: str | PolicyFactory,
        *,
        order: OrderPolicy = DEFAULT_ORDER,
        retry_ladder: tuple[timedelta, ...] | None = None,
        initial_stats: Mapping[str, ScheduleStats] | None = None,
        trace: list[tuple[float, str, str]] | None = None,
        upstream: VisitObserver | None = None,
        draw: RunDraw | None = None,
    ) -> None:
        """``policy``: one of :data:`~celery_dgs.sim.policies.POLICIES`, ordered
        by ``order`` when it is ``dgs``, or a factory that builds one on the loop;
        ``retry_ladder`` replaces the workload's (beat's default when it has none);
        ``initial_stats`` are added to the workload's, replacing the generated
        starting stats (e.g. a store's);
        ``trace`` receives ``(time, schedule, worker)`` for every run started;
        ``upstream`` says whether each good run was eventful (adaptive schedules);
        ``draw`` gives each run's duration and failure (default: one random
        stream seeded by the workload, :class:`~.draws.StreamDraw`)."""
        self.workload = workload
        self.upstream = upstream
        self.trace = trace
        self._initial_stats = {**workload.initial_stats, **(initial_stats or {})}
        self.retry_ladder = retry_ladder or workload.retry_ladder or DEFAULT_RETRY_LADDER
        self._alpha = workload.ewma_alpha or DEFAULT_EWMA_ALPHA
        self.start = workload.start
        self._start_ts = workload.start.timestamp()
        self._at_t, self._at_dt = 0.0, workload.start
        self.horizon = workload.horizon_s
        self.tally = Tally(
            workload.effective_warmup(),
            workload.horizon_s,
            class_of={s.name: s.spec.priority for s in workload.schedules},
        )
        self.draw: RunDraw = draw or StreamDraw(workload.seed + 1)
        self._groups, group_of = placement_groups(workload)
        # One group holding every worker: its state is whether any slot is free.
        self._one_group = self._groups == [tuple(range(len(workload.workers)))]
        self.slot_history = SlotHistory(len(self._groups))
        self.causes = CauseTally(
            self.tally.window_start,
            self.tally.window_end,
            self.slot_history,
            group_of,
            blackout_windows(workload),
        )
        self._events: list[tuple[float, int, int, Any, Any]] = []
        self._seq = 0
        self.worker_slots = [
            WorkerSlots(w.name, w.node, w.queues, w.slots) for w in workload.workers
        ]
        self._workers = {w.name: w for w in self.worker_slots}
        self.free_slots = sum(w.free for w in self.worker_slots)
        #: the slots of the workers that are up (beat: the live workers' slots)
        self.live_slots = self.free_slots
        self._spec_workers = {w.name: w for w in workload.workers}
        self._down: dict[str, int] = {}
        #: the same by pool (the priority classes' overload signal)
        self.live_pool_slots = self._pool_slots()
        self._down_since: dict[str, float] = {}
        self._recovery_t0 = 0.0
        self.states = self._initial_states()
        self._recovering = False
        self._in_error = 0
        self.recovery_s: float | None = None
        self._recovery_from = max(
            (o.end_s for o in workload.outages if o.end_s <= self.horizon), default=None
        )
        for outage in workload.outages:
            self.schedule_event(outage.start_s, self.DOWN, outage)
            self.schedule_event(outage.end_s, self.UP, outage)
        self.policy = make_policy(policy, self, order) if isinstance(policy, str) else policy(self)
        for name in self.states:
            self.policy.idle(name, 0.0)

    # -- time -------------------------------------------------------------------------
    def at(self, t: float) -> datetime:
        if t == self._at_t:  # the loop asks for the same moment several times per step
            return self._at_dt
        moment = self.start + timedelta(seconds=t)
        self._at_t, self._at_dt = t, moment
        return moment

    def rel(self, moment: datetime) -> float:
        return moment.timestamp() - self._start_ts

    def schedule_event(self, t: float, kind: int, payload: Any, extra: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, kind, self._seq, payload, extra))

    # -- set-up -----------------------------------------------------------------------
    def _initial_states(self) -> dict[str, SchedState]:
        phase_rng = random.Random(self.workload.seed)
        states: dict[str, SchedState] = {}
        for s in self.workload.schedules:
            period = nominal_period(s.spec)
            if s.name in self._initial_stats:
                stats = self._initial_stats[s.name]
            elif self.workload.warm_start:
                last = -phase_rng.random() * period
                stats = ScheduleStats(
                    registered_at=self.at(-period),
                    last_good_start_at=self.at(last),
                    last_good_end_at=self.at(min(last + s.duration_s, 0.0)),
                    last_start_at=self.at(last),
                    last_end_at=self.at(min(last + s.duration_s, 0.0)),
                    failure_count=0,
                    average_good_duration=timedelta(seconds=s.duration_s),
                )
            else:
                stats = ScheduleStats(registered_at=self.at(0.0))
            st = SchedState(s, stats, period, name=s.name)
            self._refresh_deadline(st)
            states[s.name] = st
        return states

    def _refresh_deadline(self, st: SchedState) -> None:
        st.deadline = self.rel(error_at(st.sched.spec, st.stats))
        st.expected = expected_duration(st.sched.spec, st.stats).total_seconds()
        st.margin = start_margin(st.sched.spec, st.stats).total_seconds()

    # -- runs -------------------------------------------------------------------------
    def _account(self, st: SchedState, t: float) -> None:
        self.tally.account(
            st.name,
            st.seg_t,
            t,
            st.deadline,
            st.expected,
            st.running_since,
            bool(st.stats.failure_count),
        )
        running = st.running_since is not None
        # Only a segment that reaches its deadline (running) or its
        # should_start_by (idle) has anything to attribute.
        if t > (st.deadline if running else st.deadline - st.margin):
            self.causes.account(
                st.name, st.seg_t, t, st.deadline, st.margin, running, bool(st.stats.failure_count)
            )
        st.seg_t = t

    def _note_slots(self, now: float) -> None:
        """The free slots after ``now``'s dispatch, per placement group."""
        if self._one_group:
            self.slot_history.note(now, (USABLE_FREE if self.free_slots > 0 else NONE_FREE,))
            return
        free = [w.free > 0 for w in self.worker_slots]
        other = OTHER_FREE if any(free) else NONE_FREE
        self.slot_history.note(
            now,
            tuple(USABLE_FREE if any(free[i] for i in group) else other for group in self._groups),
        )

    def start_run(self, name: str, worker: str, now: float, *, slot_taken: bool) -> None:
        """Start ``name`` on ``worker`` (whose slot the policy already took):
        dispatched at ``now``, started the workload's dispatch latency later."""
        st = self.states[name]
        tally = self.tally
        if self.trace is not None:
            self.trace.append((now, name, worker))
        self._account(st, now)
        started = now + self.workload.dispatch_latency_s
        late = started - (st.deadline - st.margin)  # after should_start_by
        self.causes.started(name, late)
        if started >= tally.window_start:
            tally.runs += 1
            tally.add_lateness(name, late)
            tally.late_starts += late > 0
            good = st.stats.last_good_start_at
            if good is not None and started < self.rel(good) + WASTED_FRACTION * st.period:
                tally.wasted += 1
        sched = st.sched
        duration, failed = self.draw(sched, st.run)
        limit = sched.spec.max_allowed_duration
        if limit is not None and duration > limit.total_seconds():
            duration, failed = limit.total_seconds(), True
        self.free_slots -= 1
        st.stats = record_start(st.stats, self.at(started))
        st.running_since, st.worker = now, worker
        self.schedule_event(started + duration, self.END, name, (st.run, failed))

    def _end_run(self, name: str, now: float, failed: bool | None) -> None:
        """A run ends: ``failed`` True/False, or None when its node went down."""
        st = self.states[name]
        started, worker_name = st.running_since, st.worker
        assert started is not None
        assert worker_name is not None
        self._account(st, now)
        tally = self.tally
        tally.busy_slot_s += tally.overlap(started, now)
        begin, end = self.at(started), self.at(now)
        # The store's rule for a run's end (stats, an adaptive schedule's ladder
        # and disabling); the run's count stands for its fencing token.
        outcome = "stolen" if failed is None else "failure" if failed else "success"
        eventful = None
        if self.upstream is not None and outcome == "success":
            eventful = self.upstream.visited(name, started, now)
        new = stats_after(
            st.stats,
            outcome,
            begin,
            end,
            self._alpha,
            spec=st.sched.spec,
            eventful=eventful,
            run_key=st.run,
        )
        st.disabled = disabled_after(st.sched.spec, outcome, new, st.disabled)
        if isinstance(st.sched.spec, CheckSpec):  # its next check, or its end (then held)
            new = end_of_check(st, new, outcome, end)
        previous, good = st.deadline, st.stats.last_good_start_at
        failed_before = bool(st.stats.failure_count)  # a run failed since the last good one
        st.stats = new
        if failed is None:
            tally.interrupted += now >= tally.window_start
        elif failed:
            tally.failures += now >= tally.window_start
        else:
            if now > tally.window_start:
                if good is not None:
                    tally.add_staleness(
                        name, (now - self.rel(good)) / st.period, failed=failed_before
                    )
                if previous < min(now, tally.window_end):
                    tally.error_episodes += 1
            if self._recovering and previous < now:
                self._in_error -= 1
        self._refresh_deadline(st)
        if self._recovering and failed is False:
            self.schedule_event(st.deadline, self.DEADLINE, name, st.deadline)
        st.running_since, st.worker = None, None
        st.run += 1
        if failed is not None and not self._down.get(worker_name):
            self._workers[worker_name].free += 1
            self.free_slots += 1
        if st.disabled is None:  # beat holds a disabled schedule
            self.policy.idle(name, now)
        else:
            self.policy.held(name)

    def upstream_modified(self, name: str, modified: float, now: float) -> None:
        """The lister reports at ``now`` that ``name``'s source last changed at
        ``modified`` (the runtime API's upsert with ``last_modified``): the hint
        is stored, a disabled schedule is enabled, and an idle one re-indexed."""
        st = self.states[name]
        self._account(st, now)
        st.stats = replace(st.stats, upstream_modified_at=self.at(modified))
        st.disabled = None
        self._refresh_deadline(st)
        if st.running_since is None:
            self.policy.idle(name, now)

    # -- outages ----------------------------------------------------------------------
    def _down_up(self, outage: Any, now: float, down: bool) -> None:
        for spec_worker in self.workload.workers:
            if not outage.hits(spec_worker):
                continue
            worker = self._workers[spec_worker.name]
            count = self._down.get(worker.name, 0) + (1 if down else -1)
            self._down[worker.name] = count
            if down and count == 1:
                for name, st in self.states.items():
                    if st.worker == worker.name:
                        self._end_run(name, now, None)
                self._down_since[worker.name] = now
                self.free_slots -= worker.free
                self.live_slots -= spec_worker.slots
                worker.free = 0
            elif not down and count == 0:
                since = self._down_since.pop(worker.name)
                self.tally.down_slot_s += spec_worker.slots * self.tally.overlap(since, now)
                worker.free = spec_worker.slots
                self.free_slots += spec_worker.slots
                self.live_slots += spec_worker.slots
        self.live_pool_slots = self._pool_slots()
        if not down and outage.end_s == self._recovery_from and not self._recovering:
            self._start_recovery(now)

    def _pool_slots(self) -> PoolSlots:
        """The slots of the workers that are up, by pool."""
        up = ((w.queues, w.slots) for w in self.workload.workers if not self._down.get(w.name, 0))
        return PoolSlots.of_workers(up, self.workload.default_queue)

    def _start_recovery(self, now: float) -> None:
        self._recovering = True
        self._in_error = 0
        for name, st in self.states.items():
            if st.deadline < now:
                self._in_error += 1
            else:
                self.schedule_event(st.deadline, self.DEADLINE, name, st.deadline)
        self._recovery_t0 = now

    def _check_recovery(self, now: float) -> None:
        if self._recovering and self._in_error == 0:
            self._recovering = False
            self.recovery_s = now - self._recovery_t0

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> SimResult:
        wall = time.perf_counter()
        events, policy, states = self._events, self.policy, self.states
        one_group, history, any_free = self._one_group, self.slot_history, False
        now = 0.0
        while True:
            t = events[0][0] if events else math.inf
            if self.free_slots > 0:
                wake = policy.next_wakeup()
                if wake is not None and wake < t:
                    t = max(wake, now)
            if t > self.horizon or t == math.inf:
                break
            now = t
            while events and events[0][0] <= now:
                _, kind, _, payload, extra = heapq.heappop(events)
                if kind == self.END:
                    run, failed = extra
                    if states[payload].run == run:
                        self._end_run(payload, now, failed)
                elif kind == self.FIRE:
                    assert isinstance(policy, BeatPolicy)
                    policy.fire(payload, now)
                elif kind == self.DEADLINE:
                    if self._recovering and states[payload].deadline == extra:
                        self._in_error += 1
                elif kind == CALL:
                    payload(now, extra)
                else:
                    self._down_up(payload, now, kind == self.DOWN)
            self._check_recovery(now)
            policy.dispatch(now)
            if not one_group:
                self._note_slots(now)
            elif (self.free_slots > 0) != any_free:
                any_free = self.free_slots > 0
                history.note(now, (USABLE_FREE if any_free else NONE_FREE,))
        self._finish()
        result = summarise(
            self.tally,
            policy=policy.name,
            schedules=len(states),
            slots=self.workload.slots,
            load=self.workload.load(),
            horizon_s=self.horizon,
            recovery_s=self.recovery_s,
            wall_s=time.perf_counter() - wall,
            error_by_cause=self.causes.error_s,
        )
        return replace(result, class_picks=policy.class_picks())

    def _finish(self) -> None:
        horizon, tally = self.horizon, self.tally
        for st in self.states.values():
            self._account(st, horizon)
            if st.running_since is not None:
                tally.busy_slot_s += tally.overlap(st.running_since, horizon)
            good = st.stats.last_good_start_at
            # A deferred check has no period to grow stale against after its run.
            if good is not None and not isinstance(st.sched.spec, CheckSpec):
                tally.add_staleness(
                    st.name,
                    (horizon - self.rel(good)) / st.period,
                    failed=bool(st.stats.failure_count),
                )
            if st.deadline < horizon:
                tally.error_episodes += 1
        for name, since in self._down_since.items():
            tally.down_slot_s += self._spec_workers[name].slots * tally.overlap(since, horizon)


def simulate(workload: Workload, policy: str | PolicyFactory = "dgs", **options: Any) -> SimResult:
    """Run ``workload`` under ``policy`` (see :class:`Simulator`; ``order=`` an
    :class:`~celery_dgs.core.ranking.OrderPolicy` orders ``dgs``)."""
    return Simulator(workload, policy, **options).run()
