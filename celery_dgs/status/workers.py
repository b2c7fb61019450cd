"""Whether any live worker can run a schedule, and why not (the
:data:`~celery_dgs.status.holds.HOLD_NO_WORKER` hold's reason)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core.placement import worker_allowed
from ..registry import worker_names

if TYPE_CHECKING:
    from ..registry import WorkerInfo

#: The :data:`HOLD_NO_WORKER` reason shared by every schedule when no worker is live.
NO_LIVE_WORKER = "no live worker is registered (and dgs_capacity is not set)"


class WorkerCheck:
    """Whether any live worker can run a schedule of a pool and a task with
    given excluded nodes, as beat places it
    (:func:`~celery_dgs.core.placement.worker_allowed`, and a slot). Each
    (pool, excluded nodes, task) is checked once: schedules share a few."""

    def __init__(self, workers: Sequence[WorkerInfo], capacity: int | None = None) -> None:
        self.workers = list(workers)
        self.capacity = capacity
        self._why: dict[tuple[str, frozenset[str], str | None], str | None] = {}

    def why_none(self, queue: str, excluded: frozenset[str], task: str | None = None) -> str | None:
        """Why no live worker can run it, or ``None`` when one can."""
        key = (queue, excluded, task)
        if key not in self._why:
            self._why[key] = self._check(queue, excluded, task)
        return self._why[key]

    def _check(self, queue: str, excluded: frozenset[str], task: str | None) -> str | None:
        workers = self.workers
        if not workers:
            if self.capacity:
                return None  # fixed-capacity mode: beat publishes to the pool's queue
            return NO_LIVE_WORKER
        allowed = [w for w in workers if _allowed(w, queue, excluded)]
        having = [w for w in allowed if task is None or w.has_task(task)]
        if any(w.slots > 0 for w in having):
            return None
        if allowed and not having:
            return (
                f"no live worker of its pool {queue!r} it may run on has its task {task!r} "
                f"({worker_names(allowed)}: deploy the code with the task to them, or "
                "restart them)"
            )
        if allowed:
            return f"the live workers of its pool {queue!r} it may run on have no slots"
        in_pool = [w for w in workers if _allowed(w, queue, frozenset())]
        if not in_pool:
            consumed = sorted({q for w in workers for q in w.pools})
            return (
                f"no live worker consumes its pool {queue!r} (live workers consume: "
                f"{', '.join(consumed) or 'nothing'})"
            )
        nodes = ", ".join(sorted({w.node for w in in_pool}))
        return (
            f"dont_run_on_nodes excludes every live worker of its pool {queue!r} (nodes: {nodes})"
        )


def _allowed(worker: WorkerInfo, queue: str, excluded: frozenset[str]) -> bool:
    return worker_allowed(queue, excluded, name=worker.name, node=worker.node, queues=worker.queues)
