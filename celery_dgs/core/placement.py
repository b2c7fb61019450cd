"""Which worker gets a dispatch, and how many dispatches fit (pure).

Beat and the simulator both decide with :func:`plan_dispatches`: take the
eligible schedule with the lowest ``should_start_by`` that can be placed on a
worker with a free slot, place it, and repeat while slots and schedules last.
With a full window of schedules, each schedule the index offers is first
vouched for (:mod:`~celery_dgs.core.window_certainty`); the round stops at
the first it cannot vouch for, which stays in the index.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

from .index import DeadlineIndex


class _Placed(Protocol):
    """What a spec says of where it may run (:class:`~celery_dgs.core.spec.ScheduleSpec`)."""

    @property
    def pool(self) -> str | None: ...
    @property
    def dont_run_on_nodes(self) -> frozenset[str]: ...
    @property
    def task(self) -> str: ...


@dataclass(frozen=True)
class Constraints:
    """Where a schedule may run: its pool (queue; ``None`` = the default queue),
    the nodes it must not run on, and its task (``None``: any worker has it)."""

    pool: str | None = None
    excluded_nodes: frozenset[str] = frozenset()
    task: str | None = None

    @classmethod
    def of(cls, spec: _Placed) -> Constraints:
        """A spec's constraints."""
        return cls(spec.pool, spec.dont_run_on_nodes, spec.task)


def worker_allowed(
    queue: str,
    excluded_nodes: Collection[str],
    *,
    name: str,
    node: str,
    queues: Collection[str],
    task: str | None = None,
    tasks: Collection[str] | None = None,
) -> bool:
    """Whether the worker ``name`` on host ``node``, consuming ``queues`` and
    having ``tasks`` (``None``: any), may run a schedule of the pool ``queue``
    and the task ``task`` that must not run on ``excluded_nodes``: it consumes
    the queue, has the task, and neither its node nor its name is excluded. A
    dispatch also needs one of its slots free."""
    return (
        queue in queues
        and node not in excluded_nodes
        and name not in excluded_nodes
        and (task is None or tasks is None or task in tasks)
    )


@dataclass
class WorkerSlots:
    """A live worker: Celery node name (``celery@host``), host node, the queues it
    consumes, how many of its slots are free right now, and the tasks it has
    (``None``: any)."""

    name: str
    node: str
    queues: frozenset[str]
    free: int
    tasks: frozenset[str] | None = None


class Placement:
    """Free slots across workers; places a schedule on the allowed worker with
    the most free slots (ties by name, so decisions are reproducible)."""

    def __init__(self, workers: Iterable[WorkerSlots], default_queue: str) -> None:
        #: Every live worker, busy or not (what :meth:`serves` asks about).
        self.live = tuple(workers)
        self.workers = sorted((w for w in self.live if w.free > 0), key=lambda w: w.name)
        self.default_queue = default_queue

    @property
    def live_key(self) -> frozenset[tuple[str, str, frozenset[str], frozenset[str] | None]]:
        """What the live workers may run: when it changes, a schedule none of
        them could run (:meth:`serves`) may have a worker again."""
        return frozenset((w.name, w.node, w.queues, w.tasks) for w in self.live)

    def serves(self, constraints: Constraints) -> bool:
        """Whether some live worker may run a schedule of ``constraints``,
        whether or not it has a slot free now."""
        return any(self._allows(w, constraints) for w in self.live)

    def _allows(self, worker: WorkerSlots, constraints: Constraints) -> bool:
        """Whether ``worker`` may run a schedule of ``constraints`` (slots aside)."""
        return worker_allowed(
            constraints.pool or self.default_queue,
            constraints.excluded_nodes,
            name=worker.name,
            node=worker.node,
            queues=worker.queues,
            task=constraints.task,
            tasks=worker.tasks,
        )

    @property
    def free(self) -> int:
        return sum(w.free for w in self.workers)

    def _best(self, constraints: Constraints) -> WorkerSlots | None:
        best: WorkerSlots | None = None
        for worker in self.workers:
            if (
                worker.free > 0
                and (best is None or worker.free > best.free)
                and self._allows(worker, constraints)
            ):
                best = worker
        return best

    def can_place(self, constraints: Constraints) -> bool:
        return self._best(constraints) is not None

    def free_for(self, constraints: Constraints) -> int:
        """The free slots of the workers that may run a schedule of ``constraints``."""
        return sum(w.free for w in self.workers if self._allows(w, constraints))

    def place(self, constraints: Constraints) -> str | None:
        worker = self._best(constraints)
        if worker is None:
            return None
        worker.free -= 1
        return worker.name

    def give_back(self, worker: str) -> None:
        """Return a slot taken by :meth:`place` (the choice was not dispatched)."""
        for w in self.workers:
            if w.name == worker:
                w.free += 1
                return


class _Unvouched(Exception):
    """The index offered a schedule ``vouch`` refused (it stays in the index)."""


def plan_dispatches(
    index: DeadlineIndex,
    now: float,
    placement: Placement,
    constraints_of: Callable[[str], Constraints],
    *,
    limit: int,
    max_skips: int = 1000,
    vouch: Callable[[str], bool] | None = None,
    unserved: list[str] | None = None,
    blocked: list[str] | None = None,
    block_all: bool = False,
) -> list[tuple[str, str]]:
    """Pop eligible schedules in ``should_start_by`` order while slots remain.

    Returns ``(schedule, worker)`` pairs; the chosen schedules are removed from
    the index (the caller re-inserts any it fails to dispatch). ``vouch(name)``
    is asked about each schedule offered, placeable or not, before it is
    taken or skipped: at the first it refuses, the plan ends there. A
    schedule skipped because no live worker may run it at all
    (:meth:`Placement.serves`) is appended to ``unserved``, if given (it
    stays in the index). When the plan ended because it looked ``max_skips``
    refused schedules deep (or with ``block_all``, whenever it skipped
    any), those a live worker may run but none with a slot free are
    appended to ``blocked``, if given (they stay in the index).
    """
    refused: list[str] = []  # the current pop's refused schedules a live worker serves
    skips = 0

    def can_place(name: str) -> bool:
        nonlocal skips
        if vouch is not None and not vouch(name):
            raise _Unvouched(name)
        constraints = constraints_of(name)
        if placement.can_place(constraints):
            return True
        skips += 1
        if unserved is not None and not placement.serves(constraints):
            unserved.append(name)
        else:
            refused.append(name)
        return False

    plan: list[tuple[str, str]] = []
    while len(plan) < limit and placement.free > 0:
        refused.clear()
        skips = 0
        try:
            name = index.pop_placeable(now, can_place, max_skips=max_skips)
        except _Unvouched:
            break
        if blocked is not None and (block_all or (name is None and skips > max_skips)):
            blocked.extend(refused)  # looked as deep as it may, or past busy ones again
        if name is None:
            break
        worker = placement.place(constraints_of(name))
        assert worker is not None  # can_place said yes a moment ago
        plan.append((name, worker))
    return plan


def choose_dispatches(
    index: DeadlineIndex,
    now: float,
    placement: Placement,
    constraints_of: Callable[[str], Constraints],
    defer: Callable[[str], bool],
    *,
    limit: int,
    vouch: Callable[[str], bool] | None = None,
    set_aside: Callable[[list[str]], None] | None = None,
    wait_for_slot: Callable[[list[str]], None] | None = None,
) -> list[tuple[str, str]]:
    """The whole dispatch decision of one beat round, shared by beat and the simulator.

    Repeats :func:`plan_dispatches` while slots, schedules and ``limit`` last;
    each chosen schedule is offered to ``defer``, which returns True when it
    must not go now (it is running, or its start times re-computed at ``now``
    say it is not due: ``defer`` has re-inserted or parked it); its slot is
    then given back. Returns the ``(schedule, worker)`` pairs to dispatch.
    ``vouch``: as :func:`plan_dispatches` (the caller knows whether it refused).

    ``set_aside(names)``: must take the schedules no live worker may run out
    of the index (until the live workers change: :attr:`Placement.live_key`),
    so the next plan looks past them: without it a plan looks at most
    ``max_skips`` such schedules deep, and more of them ahead would keep
    every free slot idle.

    ``wait_for_slot(names)``: must take out of the index the schedules a plan
    looked ``max_skips`` deep past because every live worker that may run
    them is busy (:class:`~celery_dgs.core.slot_wait.SlotWait`), so the next
    plan reaches the other pools' work; from then on in this round, every
    such schedule a plan skips goes the same way (none is left behind to be
    skipped again at every decision). Without it a busy pool's backlog of
    more than ``max_skips`` keeps the other pools' free slots idle; a
    round that never looks that deep hands it none.
    """
    chosen: list[tuple[str, str]] = []
    waiting = False  # whether a plan of this round looked past too many busy ones
    while len(chosen) < limit:
        unserved: list[str] | None = None if set_aside is None else []
        blocked: list[str] | None = None if wait_for_slot is None else []
        plan = plan_dispatches(
            index,
            now,
            placement,
            constraints_of,
            limit=limit - len(chosen),
            vouch=vouch,
            unserved=unserved,
            blocked=blocked,
            block_all=waiting,
        )
        if unserved:  # out of the index now: each such pass takes one out at least
            assert set_aside is not None
            set_aside(list(dict.fromkeys(unserved)))
        if blocked:  # likewise
            assert wait_for_slot is not None
            wait_for_slot(list(dict.fromkeys(blocked)))
            waiting = True
        deferred = False
        for name, worker in plan:
            if defer(name):
                placement.give_back(worker)
                deferred = True
                continue
            chosen.append((name, worker))
        if not deferred and not unserved and not blocked:  # for want of slots, schedules or limit
            break
        if not placement.free:
            break
    return chosen
