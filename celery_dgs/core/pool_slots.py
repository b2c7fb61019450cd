"""The live workers' slots as the pools see them, and whether the schedules'
demand exceeds them (pure): the priority classes' overload signal.

A schedule runs only on a worker that consumes its pool (its queue), so a
pool can be short of slots while another has room: one slot for the
schedules of pool ``reports`` is overloaded whatever the idle slots of the
default queue. The demand (each schedule's share of a slot, expected run
time / period: :class:`~celery_dgs.core.lookahead.DemandBook`) is compared
with the slots that can serve it:

- each pool's demand with the slots of the workers consuming it;
- each *group* of pools (pools linked by a worker that consumes more than
  one: its slots serve any of them) with the slots of the group's workers.

Either over is overload. A pool no live worker consumes is left out: no
slot can serve it, and no order changes that. Node exclusions and the
workers' task lists are not separated (a schedule that may run on fewer
workers than its pool's counts on them all). With ``dgs_capacity`` and no
worker registered, every pool shares that many slots.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PoolSlots:
    """``of_pool``: each consumed pool's slots (its workers' slots);
    ``group_of``: each consumed pool's group, ``group_slots``: each group's
    slots (:func:`pool_groups`); ``any_pool``: slots that serve every pool
    (``dgs_capacity`` without a registered worker; ``None``: workers);
    ``default_pool``: the pool of a schedule that names none (the app's
    default queue)."""

    of_pool: Mapping[str, int]
    group_of: Mapping[str, int]
    group_slots: tuple[int, ...]
    default_pool: str = "celery"
    any_pool: int | None = None

    @classmethod
    def of_workers(
        cls, workers: Iterable[tuple[Iterable[str], int]], default_pool: str = "celery"
    ) -> PoolSlots:
        """The slots of ``workers``: each one's queues and slots."""
        of_pool: dict[str, int] = {}
        served: list[tuple[frozenset[str], int]] = []
        for queues, slots in workers:
            pools = frozenset(queues)
            if slots <= 0 or not pools:
                continue
            served.append((pools, slots))
            for pool in pools:
                of_pool[pool] = of_pool.get(pool, 0) + slots
        group_of, group_slots = pool_groups(served)
        return cls(of_pool, group_of, group_slots, default_pool)

    @classmethod
    def every_pool(cls, slots: int, default_pool: str = "celery") -> PoolSlots:
        """``slots`` that serve every pool."""
        return cls({}, {}, (), default_pool, slots)

    @property
    def total(self) -> int:
        """Every live slot."""
        return self.any_pool if self.any_pool is not None else sum(self.group_slots)


def pool_groups(
    workers: Iterable[tuple[frozenset[str], int]],
) -> tuple[dict[str, int], tuple[int, ...]]:
    """The pools linked by workers that consume several (each worker's
    queues and slots): each pool's group number, and each group's slots."""
    parent: dict[str, str] = {}

    def root(pool: str) -> str:
        while parent.setdefault(pool, pool) != pool:
            parent[pool] = parent[parent[pool]]
            pool = parent[pool]
        return pool

    workers = list(workers)
    for pools, _ in workers:
        first, *rest = pools
        for pool in rest:
            parent[root(pool)] = root(first)
        root(first)
    number: dict[str, int] = {}
    group_of = {pool: number.setdefault(root(pool), len(number)) for pool in sorted(parent)}
    slots = [0] * len(number)
    for pools, count in workers:
        slots[group_of[next(iter(pools))]] += count
    return group_of, tuple(slots)


def overloaded_pools(
    demand: Mapping[str | None, float], slots: PoolSlots | None
) -> tuple[str, ...]:
    """The pools whose demand (slots they need on average, by pool; ``None``:
    the default pool) exceeds the live slots that can serve them: the first
    pool over its own slots, else the first group of pools over its
    workers' slots, else every pool sharing ``any_pool`` when the whole
    demand exceeds it; ``()`` when none is (or while the slots are unknown)."""
    if slots is None:
        return ()
    if len(demand) == 1 and slots.any_pool is None:
        # One pool (the common case): its group has at least its own slots.
        ((pool, need),) = demand.items()
        key = slots.default_pool if pool is None else pool
        serving = slots.of_pool.get(key)
        return (key,) if serving is not None and need > serving else ()
    by_pool: dict[str, float] = {}
    for pool, need in demand.items():
        key = slots.default_pool if pool is None else pool
        by_pool[key] = by_pool.get(key, 0.0) + need
    if slots.any_pool is not None:
        over = slots.any_pool > 0 and sum(by_pool.values()) > slots.any_pool
        return tuple(sorted(p for p, need in by_pool.items() if need > 0)) if over else ()
    by_group = [0.0] * len(slots.group_slots)
    for pool in sorted(by_pool):
        serving = slots.of_pool.get(pool)
        if serving is None:
            continue  # no live worker consumes it
        need = by_pool[pool]
        if need > serving:
            return (pool,)
        by_group[slots.group_of[pool]] += need
    for group, need in enumerate(by_group):
        if need > slots.group_slots[group]:
            return tuple(sorted(p for p, g in slots.group_of.items() if g == group))
    return ()
