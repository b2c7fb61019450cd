"""The overload signal by pool (celery_dgs/core/pool_slots.py): pure."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from celery_dgs.core.lookahead import DemandBook
from celery_dgs.core.pool_slots import PoolSlots, overloaded_pools
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.stats import ScheduleStats


def slots(*workers: tuple[tuple[str, ...], int]) -> PoolSlots:
    return PoolSlots.of_workers(workers, "celery")


@pytest.mark.parametrize(
    ("demand", "live", "over"),
    [
        # one pool: the whole demand against every slot
        ({None: 10.5}, slots((("celery",), 10)), ("celery",)),
        ({None: 10.0}, slots((("celery",), 10)), ()),
        ({"celery": 0.5}, slots((("celery",), 1)), ()),
        # a pool short of slots beside one with room
        ({"prio": 2.5, None: 0.1}, slots((("prio",), 1), (("celery",), 2)), ("prio",)),
        ({"prio": 0.9, None: 0.1}, slots((("prio",), 1), (("celery",), 2)), ()),
        # two pools that fit alone, on one worker that consumes both
        ({"a": 1.5, "b": 1.5}, slots((("a", "b"), 2)), ("a", "b")),
        ({"a": 1.5, "b": 1.5}, slots((("a", "b"), 2), (("b",), 2)), ()),
        # a group linked through a worker, and a pool apart with room
        ({"a": 0.9, "b": 1.5}, slots((("a", "b"), 1), (("b",), 1), (("c",), 8)), ("a", "b")),
        # a pool no live worker consumes: no slot can serve it
        ({"gpu": 5.0, None: 0.5}, slots((("celery",), 1)), ()),
        # no live slot, or none known
        ({None: 3.0}, slots(), ()),
        ({None: 3.0}, None, ()),
        # dgs_capacity: every pool shares the slots
        ({"a": 1.5, None: 1.0}, PoolSlots.every_pool(2), ("a", "celery")),
        ({"a": 1.0, None: 1.0}, PoolSlots.every_pool(2), ()),
        ({None: 1.0}, PoolSlots.every_pool(0), ()),
    ],
)
def test_overloaded_pools(
    demand: dict[str | None, float], live: PoolSlots | None, over: tuple[str, ...]
) -> None:
    assert overloaded_pools(demand, live) == over


def test_groups_join_pools_through_the_workers_that_consume_several() -> None:
    live = slots((("a", "b"), 1), (("b", "c"), 2), (("d",), 4), (("e",), 0))
    assert live.of_pool == {"a": 1, "b": 3, "c": 2, "d": 4}
    assert live.group_of["a"] == live.group_of["b"] == live.group_of["c"] != live.group_of["d"]
    assert sorted(live.group_slots) == [3, 4]
    assert live.total == 7
    assert PoolSlots.every_pool(5).total == 5


pools = st.sampled_from(["a", "b", "c", "d"])
workers = st.lists(st.tuples(st.frozensets(pools, min_size=1), st.integers(0, 4)), max_size=6)
demands = st.dictionaries(pools, st.floats(0, 8, allow_nan=False))


@given(workers, demands)
def test_the_pools_named_need_more_than_every_worker_that_serves_them(
    live_workers: list[tuple[frozenset[str], int]], demand: dict[str, float]
) -> None:
    """The pools named need more together than all the workers that consume
    any of them have (a real shortage: no placement serves them); and the
    signal is on whenever one pool alone, or the whole consumed demand,
    needs more than the slots that serve it."""
    live = PoolSlots.of_workers(live_workers)
    over = overloaded_pools(dict(demand), live)
    if over:
        serving = sum(n for queues, n in live_workers if queues & set(over))
        assert sum(demand.get(p, 0.0) for p in over) > serving
    consumed = {p: need for p, need in demand.items() if live.of_pool.get(p)}
    if any(need > live.of_pool[p] for p, need in consumed.items()):
        assert over
    if sum(consumed.values()) > live.total:
        assert over


def test_the_demand_book_keeps_each_pools_share() -> None:
    book = DemandBook()
    stats = ScheduleStats()
    hourly = timedelta(hours=1)
    book.note_schedule("a", PeriodicSpec(task="t.a", scheduling_period=hourly), stats, 1800.0)
    book.note_schedule(
        "b", PeriodicSpec(task="t.b", scheduling_period=hourly, pool="prio"), stats, 900.0
    )
    book.note_schedule(
        "c", PeriodicSpec(task="t.c", scheduling_period=hourly, pool="prio"), stats, 0.0
    )
    assert dict(book.by_pool()) == {None: 0.5, "prio": 0.25}
    assert book.total() == 0.75
    # a schedule moved to another pool moves its share
    book.note_schedule(
        "a", PeriodicSpec(task="t.a", scheduling_period=hourly, pool="prio"), stats, 1800.0
    )
    assert dict(book.by_pool()) == {"prio": 0.75}
    book.forget("b")
    book.forget("a")
    book.forget("c")  # no share: forgetting it leaves the sums as they are
    assert dict(book.by_pool()) == {}
    assert book.total() == 0.0
