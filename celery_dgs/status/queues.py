"""Each queue the live workers consume: its workers, slots and busy slots
(``status`` and the metrics; a pool is a queue)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..leases.types import LeaseInfo
from ..registry import WorkerInfo


@dataclass(frozen=True)
class QueueLoad:
    """One queue (pool) the live workers consume: how many of them consume it,
    their slots, and how many of those run a schedule now (a worker that
    consumes several queues counts in each)."""

    queue: str
    workers: int
    slots: int
    busy: int

    @property
    def text(self) -> str:
        """``celery 4 slots (1 busy)``, or ``gpu 1 slot (all busy)``: a queue
        whose slots are all busy serves nothing more until one ends."""
        busy = "all busy" if self.slots and self.busy >= self.slots else f"{self.busy} busy"
        return f"{self.queue} {self.slots} slot{'' if self.slots == 1 else 's'} ({busy})"


def queue_loads(leases: Iterable[LeaseInfo], workers: Iterable[WorkerInfo]) -> list[QueueLoad]:
    """Each queue of ``workers``, by name: its workers, slots and busy slots
    (the ``leases`` its workers own, at most their slots). A worker's own
    direct queue, where beat sends its runs, is not a pool and not listed."""
    owned: dict[str, int] = {}
    for lease in leases:
        owned[lease.owner_name] = owned.get(lease.owner_name, 0) + 1
    loads: dict[str, list[int]] = {}
    for worker in workers:
        for queue in dict.fromkeys(worker.pools):
            load = loads.setdefault(queue, [0, 0, 0])
            load[0] += 1
            load[1] += worker.slots
            load[2] += min(owned.get(worker.name, 0), worker.slots)
    return [QueueLoad(queue, *loads[queue]) for queue in sorted(loads)]
