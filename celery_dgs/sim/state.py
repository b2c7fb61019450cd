"""What the simulator's event loop and its policies share: a schedule's state,
the event kinds, and the part of the loop a policy uses (:class:`PolicyHost`).

The loop (:mod:`~celery_dgs.sim.loop`) builds a policy
(:mod:`~celery_dgs.sim.policies`) and passes itself in as the policy's host;
the policies know the loop only through :class:`PolicyHost`, so neither module
imports the other both ways.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..core.placement import WorkerSlots
from ..core.pool_slots import PoolSlots
from ..core.stats import ScheduleStats
from .metrics import Tally
from .workload import SimSchedule, Workload

#: Event kinds, in the order the loop handles events of the same time.
END, DOWN, UP, FIRE, DEADLINE = range(5)
#: An event whose payload is called with ``(now, extra)`` (the upstream's hints).
CALL = 5


@dataclass(eq=False)
class SchedState:
    sched: SimSchedule
    stats: ScheduleStats
    period: float
    deadline: float = 0.0  # error_at
    expected: float = 0.0  # expected run time
    margin: float = 0.0  # error_at - should_start_by
    seg_t: float = 0.0
    running_since: float | None = None
    worker: str | None = None
    run: int = 0  # bumped when a run ends or is interrupted: stale end events are ignored
    name: str = ""  # sched.name, built once (a property that formats a string)
    disabled: str | None = None  # an adaptive schedule's disabled_reason: held, not indexed
    check_count: int = 0  # a deferred check: checks run to a verdict


class PolicyHost(Protocol):
    """The event loop as a policy sees it (:class:`~celery_dgs.sim.loop.Simulator`)."""

    @property
    def workload(self) -> Workload: ...
    @property
    def states(self) -> Mapping[str, SchedState]: ...
    @property
    def worker_slots(self) -> Sequence[WorkerSlots]: ...
    @property
    def live_slots(self) -> int:
        """The slots of the workers that are up."""

    @property
    def live_pool_slots(self) -> PoolSlots:
        """The same by pool."""

    @property
    def retry_ladder(self) -> tuple[timedelta, ...]: ...
    @property
    def tally(self) -> Tally: ...

    def at(self, t: float) -> datetime:
        """The moment ``t`` seconds after the start."""

    def rel(self, moment: datetime) -> float:
        """Seconds from the start to ``moment``."""

    def schedule_event(self, t: float, kind: int, payload: Any, extra: Any = None) -> None:
        """Queue an event of ``kind`` (:data:`FIRE`, ...) at ``t``."""

    def start_run(self, name: str, worker: str, now: float, *, slot_taken: bool) -> None:
        """Start ``name`` on ``worker`` (whose slot the policy already took)."""


class VisitObserver(Protocol):
    """What a run's end asks of a simulated upstream (:mod:`~celery_dgs.sim.upstream`)."""

    def visited(self, name: str, started: float, ended: float) -> bool:
        """A good run of ``name`` over ``[started, ended]`` ended: whether it was
        eventful (the source changed since the previous good run's start)."""
