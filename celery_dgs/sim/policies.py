"""Scheduling policies the simulator compares.

``dgs`` (beat's default ``dgs_overload_policy = "restore"``), ``dgs-greedy``
and ``dgs-shed`` are the real beat's decision: the same index beat builds
(:func:`~celery_dgs.core.overload.make_index`: a
:class:`~celery_dgs.core.overload.RestoringIndex`, a plain
:class:`~celery_dgs.core.index.DeadlineIndex` or a
:class:`~celery_dgs.core.overload.SheddingIndex`), keyed by
:func:`~celery_dgs.core.timing.start_times`, and the same
:func:`~celery_dgs.core.placement.choose_dispatches`, with the same
re-check of start times before a dispatch. ``fifo`` is the same machinery
keyed by ``can_start_by`` (the oldest due first). ``beat`` is what Celery
beat does: enqueue every schedule at fixed times (every period from its
phase, or at each cron time) into a FIFO queue served by free worker slots;
a message whose schedule is running when a slot takes it is skipped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from datetime import timedelta
from typing import Literal

from ..core.cron import next_cron_time
from ..core.laxity import DEFAULT_LAXITY_FLOOR_S
from ..core.lookahead import AdmissionRound, CapQueue, DemandBook
from ..core.overload import DEFAULT_OVERLOAD_POLICY, DEFAULT_RESTORE_AGING, make_index
from ..core.placement import Constraints, Placement, choose_dispatches
from ..core.priority import (
    DEFAULT_ELEVATOR_INTERVAL_S,
    DEFAULT_TOP_HOLD_STEPS,
    PriorityIndex,
    demand_exceeds,
    short_after_s,
    short_hold_s,
    top_lead_s,
)
from ..core.spec import CronSpec
from ..core.spec_values import DEFAULT_PRIORITY
from ..core.timing import start_times
from .bound import ok_period_s
from .knapsack import KnapsackIndex, ok_seconds_per_slot_second
from .state import FIRE, PolicyHost

POLICIES = ("dgs", "dgs-deadline", "dgs-greedy", "dgs-shed", "fifo", "beat")
#: The priority orders compared in ``docs/simulator.md`` ("Priorities"); also
#: ``dgs-lead[-<seconds>]`` and ``dgs-elevator-<seconds>``.
PRIORITY_POLICIES = (
    "dgs-noprio",
    "dgs-strict",
    "dgs-seed004",
    "dgs-weights",
    "dgs-over-top",
    "dgs-nolead",
    "dgs-classes-always",
    "dgs-short-by-wait",
)
#: ``dgs`` with another elevator interval: ``dgs-elevator-<seconds>``.
ELEVATOR_PREFIX = "dgs-elevator-"
_NO_LIMIT = 1 << 62
#: ``dgs-weights``: a class's weight halves every this many priority steps.
WEIGHT_HALVING = 15.0


def priority_weight(priority: int) -> float:
    """``dgs-weights``: how much more urgent a schedule of ``priority`` looks
    than one of the default priority (2 per 15 steps up)."""
    return float(2.0 ** ((DEFAULT_PRIORITY - priority) / WEIGHT_HALVING))


class Policy:
    """What the event loop asks of a policy."""

    name = ""

    def __init__(self, sim: PolicyHost) -> None:
        self.sim = sim

    def idle(self, name: str, now: float) -> None:
        """``name`` is not running any more (or never ran): it may be scheduled."""

    def held(self, name: str) -> None:
        """``name`` ended a run and is held (a disabled adaptive schedule): it is
        not scheduled until it is idle again."""

    def dispatch(self, now: float) -> None:
        """Start runs on free slots (``sim.start_run``)."""

    def next_wakeup(self) -> float | None:
        """When a schedule that cannot start yet becomes eligible (None: never)."""
        return None

    def class_picks(self) -> int | None:
        """Dispatches after warm-up that the priority classes chose over the
        policy's own order (None: no classes)."""
        return None


class DeadlinePolicy(Policy):
    """The beat's own decision code on the simulator's state."""

    def __init__(
        self,
        sim: PolicyHost,
        *,
        overload: str = DEFAULT_OVERLOAD_POLICY,
        fifo: bool = False,
        aging: float = DEFAULT_RESTORE_AGING,
        laxity_floor: float | None = DEFAULT_LAXITY_FLOOR_S,
        priorities: bool = True,
        elevator_s: float | None = DEFAULT_ELEVATOR_INTERVAL_S,
        elevated_first: bool = False,
        weights: bool = False,
        lead: Literal["short", "always", "off"] = "short",
        classes: Literal["short", "always"] = "short",
        short_on_demand: bool = True,
        top_hold_steps: int = DEFAULT_TOP_HOLD_STEPS,
        lookahead: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(sim)
        default = overload == DEFAULT_OVERLOAD_POLICY
        self.name = "fifo" if fifo else "dgs" if default else f"dgs-{overload}"
        if default and not fifo and laxity_floor is None:
            self.name = "dgs-deadline"
        self.name = name or self.name
        self.priority = {s.name: s.spec.priority for s in sim.workload.schedules}
        self.weights = weights
        main = make_index(
            overload,
            expected_s=self._expected_s,
            restore_aging=aging,
            margin_s=self._margin_s,
            laxity_floor_s=laxity_floor,
        )
        # Beat's index: priority classes with the elevator over the policy's order.
        self.index = (
            PriorityIndex(
                main,
                self.priority.__getitem__,
                elevator_interval_s=elevator_s,
                elevated_first=elevated_first,
                clock_offset_s=sim.at(0.0).timestamp(),
                lead_s={"off": None, "always": self._margin_s, "short": top_lead_s(self._margin_s)}[
                    lead
                ],
                lead_top_only=lead == "short",
                lead_when_short=lead == "short",
                classes_when_short=classes == "short",
                short_when_waited_s=short_after_s(elevator_s),
                overloaded=(lambda: demand_exceeds(self.book.total(), sim.live_slots))
                if short_on_demand
                else None,
                short_hold_s=short_hold_s(elevator_s),
                top_hold_steps=top_hold_steps,
            )
            if priorities
            else main
        )
        self.fifo = fifo
        #: the index's class picks when the warm-up ended (None: not yet)
        self._picks_at_window: int | None = None
        #: The shares of the indexed schedules (as beat keeps them: the
        #: priority classes' overload signal, the look-ahead's book).
        self.book = DemandBook()
        #: Look-ahead admission (``core/lookahead.py``): the long candidates
        #: its cap holds, each one's should_start_by when indexed, and the runs
        #: this policy started: (expected end, expected run time).
        self.lookahead = lookahead
        self.cap_queue = CapQueue()
        self.should: dict[str, float] = {}
        self.running: dict[str, tuple[float, float]] = {}
        self.ladder = sim.retry_ladder
        self.blackout_names = {s.name for s in sim.workload.schedules if s.spec.blackout_periods}
        self.constraints: dict[str, Constraints] = {
            s.name: Constraints(pool=s.spec.pool, excluded_nodes=s.spec.dont_run_on_nodes)
            for s in sim.workload.schedules
        }

    # Kept by the loop with the stats (unchanged while a schedule is indexed).
    def _expected_s(self, name: str) -> float:
        expected = self.sim.states[name].expected
        return expected / priority_weight(self.priority[name]) if self.weights else expected

    def _margin_s(self, name: str) -> float:
        margin = self.sim.states[name].margin
        return margin * priority_weight(self.priority[name]) if self.weights else margin

    def _times(self, name: str, now: float) -> tuple[float, float]:
        st = self.sim.states[name]
        times = start_times(st.sched.spec, st.stats, self.sim.at(now), retry_ladder=self.ladder)
        can = self.sim.rel(times.can_start_by)
        return (can, can) if self.fifo else (can, self.sim.rel(times.should_start_by))

    def idle(self, name: str, now: float) -> None:
        can, should = self._times(name, now)
        self.index.upsert(name, can, should)
        st = self.sim.states[name]
        self.book.note_schedule(name, st.sched.spec, st.stats, st.expected)
        if self.lookahead:
            self.running.pop(name, None)
            self.should[name] = should

    def held(self, name: str) -> None:
        self.book.forget(name)  # as beat: a held schedule's share does not count

    def _defer(self, name: str, now: float, admission: AdmissionRound | None) -> bool:
        # As beat's _reindex_if_not_due: the index holds times computed earlier.
        # Without blackouts start_times does not depend on ``now`` (the anchor is
        # set, the stats have not changed since indexing): the re-check would
        # return the indexed times, so it is skipped for speed.
        if name in self.blackout_names:
            can, should = self._times(name, now)
            if can > now:
                self.index.upsert(name, can, should)
                return True
            self.should[name] = should
        if admission is None:
            return False
        should = self.should[name]
        expected = self.sim.states[name].expected
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
        if self.index.peek(now) is None:
            return
        sim = self.sim
        placement = Placement(sim.worker_slots, sim.workload.default_queue)
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
        chosen = choose_dispatches(
            self.index,
            now,
            placement,
            self.constraints.__getitem__,
            lambda name: self._defer(name, now, admission),
            limit=_NO_LIMIT,
        )
        for name, worker in chosen:
            sim.start_run(name, worker, now, slot_taken=True)

    def next_wakeup(self) -> float | None:
        return self.index.next_wakeup()


class BeatPolicy(Policy):
    """Celery beat: fixed enqueue times, FIFO queues, skip if running."""

    name = "beat"

    def __init__(self, sim: PolicyHost) -> None:
        super().__init__(sim)
        self.queues: dict[str, deque[tuple[float, str]]] = {}
        self.queued = 0
        for s in sim.workload.schedules:
            self.queues.setdefault(s.spec.pool or sim.workload.default_queue, deque())
            sim.schedule_event(self._first_fire(s.name), FIRE, s.name)

    def _first_fire(self, name: str) -> float:
        st = self.sim.states[name]
        spec = st.sched.spec
        anchor = st.stats.last_good_start_at or self.sim.at(0.0)
        if isinstance(spec, CronSpec):
            return self.sim.rel(next_cron_time(spec.cron_schedule, spec.tz, self.sim.at(0.0)))
        return self.sim.rel(anchor) + st.period  # Celery: last_run_at + run_every

    def fire(self, name: str, now: float) -> None:
        st = self.sim.states[name]
        spec = st.sched.spec
        self.queues[spec.pool or self.sim.workload.default_queue].append((now, name))
        self.queued += 1
        if isinstance(spec, CronSpec):
            nxt = self.sim.rel(
                next_cron_time(spec.cron_schedule, spec.tz, self.sim.at(now) + timedelta(seconds=1))
            )
        else:
            nxt = now + st.period
        self.sim.schedule_event(nxt, FIRE, name)

    def dispatch(self, now: float) -> None:
        if not self.queued:
            return
        sim = self.sim
        for worker in sim.worker_slots:
            while worker.free > 0 and self.queued:
                queue = self._oldest(worker.queues)
                if queue is None:
                    break
                _, name = queue.popleft()
                self.queued -= 1
                if sim.states[name].running_since is not None:
                    sim.tally.skipped += 1  # Celery's "skip if running" (a lock in the task)
                    continue
                worker.free -= 1
                sim.start_run(name, worker.name, now, slot_taken=True)
            if not self.queued:
                return

    def _oldest(self, queues: frozenset[str]) -> deque[tuple[float, str]] | None:
        best: deque[tuple[float, str]] | None = None
        for q in queues:
            dq = self.queues.get(q)
            if dq and (best is None or dq[0][0] < best[0][0]):
                best = dq
        return best


def knapsack_policy(sim: PolicyHost) -> DeadlinePolicy:
    """``dgs`` with the late schedules in the bound's order (``sim/knapsack.py``),
    no priority classes."""
    policy = DeadlinePolicy(sim, priorities=False, name="dgs-knapsack")
    period = {s.name: ok_period_s(s.spec) for s in sim.workload.schedules}
    policy.index = KnapsackIndex(
        lambda n: ok_seconds_per_slot_second(period[n], sim.states[n].expected)
    )
    return policy


def make_policy(name: str, sim: PolicyHost) -> Policy:
    factories: dict[str, Callable[[], Policy]] = {
        "dgs": lambda: DeadlinePolicy(sim),
        "dgs-deadline": lambda: DeadlinePolicy(sim, laxity_floor=None),
        "dgs-greedy": lambda: DeadlinePolicy(sim, overload="greedy"),
        "dgs-shed": lambda: DeadlinePolicy(sim, overload="shed"),
        "dgs-lookahead": lambda: DeadlinePolicy(sim, lookahead=True, name="dgs-lookahead"),
        "dgs-knapsack": lambda: knapsack_policy(sim),
        "fifo": lambda: DeadlinePolicy(sim, fifo=True, overload="greedy"),
        "beat": lambda: BeatPolicy(sim),
        # Priority orders compared in docs/simulator.md ("Priorities").
        "dgs-noprio": lambda: DeadlinePolicy(sim, priorities=False, name="dgs-noprio"),
        "dgs-strict": lambda: DeadlinePolicy(sim, elevator_s=None, name="dgs-strict"),
        "dgs-seed004": lambda: DeadlinePolicy(
            sim, elevated_first=True, lead="off", name="dgs-seed004"
        ),
        "dgs-over-top": lambda: DeadlinePolicy(
            sim, top_hold_steps=0, lead="off", name="dgs-over-top"
        ),
        "dgs-nolead": lambda: DeadlinePolicy(sim, lead="off", name="dgs-nolead"),
        "dgs-classes-always": lambda: DeadlinePolicy(
            sim, classes="always", name="dgs-classes-always"
        ),
        "dgs-short-by-wait": lambda: DeadlinePolicy(
            sim, short_on_demand=False, name="dgs-short-by-wait"
        ),
        "dgs-weights": lambda: DeadlinePolicy(
            sim, priorities=False, weights=True, name="dgs-weights"
        ),
    }
    leads: tuple[tuple[str, Literal["always", "short"]], ...] = (
        ("dgs-lead-", "always"),
        (ELEVATOR_PREFIX, "short"),
    )
    for prefix, lead in leads:
        if name.startswith(prefix):
            try:
                interval = float(name[len(prefix) :])
            except ValueError:
                interval = 0.0
            if interval > 0:
                return DeadlinePolicy(sim, elevator_s=interval, lead=lead, name=name)
    if name == "dgs-lead":
        return DeadlinePolicy(sim, elevator_s=None, lead="always", name=name)
    if name not in factories:
        raise ValueError(
            f"policy must be one of {list(POLICIES + PRIORITY_POLICIES)}, got {name!r}"
        )
    return factories[name]()
