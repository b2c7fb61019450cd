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


def runs_of_live_instances(
    leases: Iterable[LeaseInfo], workers: Iterable[WorkerInfo]
) -> dict[str, int]:
    """How many of ``leases`` each live worker's instance owns, by worker
    name. A lease last pinged before its owner name's live instance
    registered is an earlier instance's (the worker restarted under the same
    name): it takes none of this instance's slots, as beat counts them."""
    registered = {w.name: w.registered_at for w in workers}
    owned: dict[str, int] = {}
    for lease in leases:
        if lease.owner_name not in registered:
            continue
        since = registered[lease.owner_name]
        if since is None or lease.last_ping_at >= since:
            owned[lease.owner_name] = owned.get(lease.owner_name, 0) + 1
    return owned


def queue_loads(leases: Iterable[LeaseInfo], workers: Iterable[WorkerInfo]) -> list[QueueLoad]:
    """Each queue of ``workers``, by name: its workers, slots and busy slots
    (the ``leases`` their live instances own, at most their slots). A
    worker's own direct queue, where beat sends its runs, is not a pool and
    not listed."""
    workers = list(workers)
    owned = runs_of_live_instances(leases, workers)
    loads: dict[str, list[int]] = {}
    for worker in workers:
        for queue in dict.fromkeys(worker.pools):
            load = loads.setdefault(queue, [0, 0, 0])
            load[0] += 1
            load[1] += worker.slots
            load[2] += min(owned.get(worker.name, 0), worker.slots)
    return [QueueLoad(queue, *loads[queue]) for queue in sorted(loads)]
