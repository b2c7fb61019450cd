"""The deadline index and dispatch plan: the greedy choice of seed 000."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.placement import Constraints, Placement, WorkerSlots, plan_dispatches


def test_pop_returns_lowest_should_start_by_among_eligible_only() -> None:
    index = DeadlineIndex()
    index.upsert("late-deadline", can_start_by=0, should_start_by=500)
    index.upsert("urgent-but-not-eligible", can_start_by=200, should_start_by=10)
    index.upsert("urgent", can_start_by=50, should_start_by=100)
    assert index.pop(now=100) == "urgent"
    assert index.pop(now=100) == "late-deadline"
    assert index.pop(now=100) is None
    assert index.next_wakeup() == 200
    assert index.pop(now=200) == "urgent-but-not-eligible"
    assert len(index) == 0


def test_eligibility_boundary_is_inclusive() -> None:
    index = DeadlineIndex()
    index.upsert("a", can_start_by=100, should_start_by=100)
    assert index.pop(now=99.999) is None
    assert index.pop(now=100) == "a"


def test_upsert_replaces_and_remove_drops() -> None:
    index = DeadlineIndex()
    index.upsert("a", 0, 10)
    index.upsert("b", 0, 20)
    index.upsert("a", 0, 30)  # a's deadline moved later
    assert index.peek(now=0) == "b"
    index.upsert("a", 1000, 5)  # no longer eligible
    assert index.pop(now=0) == "b"
    assert index.pop(now=0) is None
    assert index.remove("a")
    assert not index.remove("a")
    assert index.next_wakeup() is None


def test_pop_placeable_skips_but_keeps_unplaceable() -> None:
    index = DeadlineIndex()
    index.upsert("blocked", 0, 1)
    index.upsert("ok", 0, 2)
    assert index.pop_placeable(0, lambda n: n != "blocked") == "ok"
    assert "blocked" in index
    assert index.pop(0) == "blocked"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 100), st.booleans()),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 100),
)
def test_pop_order_matches_a_full_scan(items: list[tuple[int, int, bool]], now: int) -> None:
    """The heap gives the same answer as seed 000's scan over all schedules."""
    index = DeadlineIndex()
    live: dict[str, tuple[int, int]] = {}
    for i, (can, should, removed) in enumerate(items):
        name = f"s{i % 17}"  # repeated names exercise replacement
        index.upsert(name, can, should)
        live[name] = (can, should)
        if removed and i % 3 == 0:
            index.remove(name)
            live.pop(name)
    popped = []
    while (name := index.pop(now)) is not None:
        popped.append(name)
    expected = sorted(
        (n for n, (can, _) in live.items() if can <= now), key=lambda n: (live[n][1], live[n][0], n)
    )
    assert popped == expected


def test_plan_fills_free_slots_in_deadline_order_and_respects_exclusions() -> None:
    index = DeadlineIndex()
    for i in range(10):
        index.upsert(f"s{i}", 0, 100 - i)  # s9 most urgent
    constraints = {f"s{i}": Constraints() for i in range(10)}
    constraints["s9"] = Constraints(excluded_nodes=frozenset({"n1", "n2"}))
    constraints["s8"] = Constraints(excluded_nodes=frozenset({"n1"}))
    placement = Placement(
        [
            WorkerSlots("w1@n1", "n1", frozenset({"celery"}), 2),
            WorkerSlots("w2@n2", "n2", frozenset({"celery"}), 1),
        ],
        default_queue="celery",
    )
    plan = plan_dispatches(index, 0, placement, constraints.__getitem__, limit=100)
    # s9 can run nowhere; s8 only on n2; then the next two most urgent on n1.
    assert plan == [("s8", "w2@n2"), ("s7", "w1@n1"), ("s6", "w1@n1")]
    assert "s9" in index
    assert placement.free == 0


def test_plan_routes_by_pool() -> None:
    index = DeadlineIndex()
    index.upsert("chrome-job", 0, 1)
    index.upsert("light-job", 0, 2)
    constraints = {"chrome-job": Constraints(pool="chrome"), "light-job": Constraints()}
    placement = Placement(
        [
            WorkerSlots("a@x", "x", frozenset({"celery"}), 1),
            WorkerSlots("b@y", "y", frozenset({"chrome"}), 1),
        ],
        default_queue="celery",
    )
    plan = plan_dispatches(index, 0, placement, constraints.__getitem__, limit=10)
    assert sorted(plan) == [("chrome-job", "b@y"), ("light-job", "a@x")]


def test_plan_places_a_task_only_on_a_worker_that_has_it() -> None:
    index = DeadlineIndex()
    for i in range(4):
        index.upsert(f"s{i}", 0, i)
    tasks = {"s0": "t.new", "s1": "t.old", "s2": "t.new", "s3": None}
    placement = Placement(
        [
            WorkerSlots("a@x", "x", frozenset({"celery"}), 2, frozenset({"t.old"})),
            WorkerSlots("b@y", "y", frozenset({"celery"}), 1, frozenset({"t.old", "t.new"})),
        ],
        default_queue="celery",
    )
    plan = plan_dispatches(
        index, 0, placement, lambda name: Constraints(task=tasks[name]), limit=10
    )
    # s2 has no worker with a free slot left that has t.new: it stays.
    assert plan == [("s0", "b@y"), ("s1", "a@x"), ("s3", "a@x")]
    assert "s2" in index
    # A worker that does not say which tasks it has takes any.
    anyone = Placement([WorkerSlots("c@z", "z", frozenset({"celery"}), 1)], "celery")
    assert plan_dispatches(index, 0, anyone, lambda n: Constraints(task=tasks[n]), limit=1) == [
        ("s2", "c@z")
    ]


def test_index_stays_compact_under_many_updates() -> None:
    index = DeadlineIndex()
    rng = random.Random(1)
    for _ in range(50_000):
        index.upsert(f"s{rng.randrange(100)}", rng.random(), rng.random())
    assert len(index) == 100
    assert len(index._waiting) + len(index._ready) <= 4 * 100 + 1024 + 1


entries_strategy = st.lists(
    st.tuples(
        st.sampled_from([f"s{i}" for i in range(30)]),  # repeated names: later entries win
        st.integers(min_value=0, max_value=100).map(float),
        st.integers(min_value=0, max_value=100).map(float),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(entries_strategy, entries_strategy, st.lists(st.sampled_from([f"s{i}" for i in range(30)])))
def test_upsert_many_is_upsert_of_each(
    first: list[tuple[str, float, float]],
    bulk: list[tuple[str, float, float]],
    removed: list[str],
) -> None:
    """The start-up path (one heapify) leaves the index exactly as N upserts would,
    also on top of existing entries and with removals after."""
    one_by_one, at_once = DeadlineIndex(), DeadlineIndex()
    for index in (one_by_one, at_once):
        for name, can, should in first:
            index.upsert(name, can, should)
    for name, can, should in bulk:
        one_by_one.upsert(name, can, should)
    at_once.upsert_many(bulk)
    for index in (one_by_one, at_once):
        for name in removed:
            index.remove(name)
    assert sorted(one_by_one) == sorted(at_once)
    assert all(one_by_one.times(n) == at_once.times(n) for n in one_by_one)
    assert one_by_one.next_wakeup() == at_once.next_wakeup()
    popped = [
        [index.pop(now) for now in (10.0, 50.0, 100.0, 100.0, 100.0)]
        for index in (one_by_one, at_once)
    ]
    assert popped[0] == popped[1]
    assert one_by_one.ready_count(100.0) == at_once.ready_count(100.0)


def test_schedules_no_live_worker_serves_are_set_aside_so_the_round_looks_past_them() -> None:
    """More unserved schedules ahead than a plan looks past (``max_skips``):
    without ``set_aside`` the free slot stays idle; with it they leave the
    index and the next plan reaches the served one. A busy pool's schedules
    are not unserved: they stay."""
    from celery_dgs.core.placement import choose_dispatches

    def fill() -> tuple[DeadlineIndex, dict[str, Constraints]]:
        index, constraints = DeadlineIndex(), {}
        for i in range(1_500):
            index.upsert(f"gpu{i}", 0, i)
            constraints[f"gpu{i}"] = Constraints(pool="gpu")
        index.upsert("busy", 0, 2_000)
        constraints["busy"] = Constraints(pool="busy")
        index.upsert("cpu", 0, 3_000)
        constraints["cpu"] = Constraints()
        return index, constraints

    def placement() -> Placement:
        workers = [
            WorkerSlots("w1", "n1", frozenset({"celery"}), 1),
            WorkerSlots("w2", "n2", frozenset({"busy"}), 0),
        ]
        return Placement(workers, "celery")

    index, constraints = fill()
    never = choose_dispatches(
        index, 0, placement(), constraints.__getitem__, lambda _n: False, limit=10
    )
    assert never == []
    index, constraints = fill()
    aside: list[str] = []

    def set_aside(names: list[str]) -> None:
        aside.extend(names)
        for name in names:
            index.remove(name)

    chosen = choose_dispatches(
        index,
        0,
        placement(),
        constraints.__getitem__,
        lambda _n: False,
        limit=10,
        set_aside=set_aside,
    )
    assert chosen == [("cpu", "w1")]
    assert sorted(aside) == sorted(f"gpu{i}" for i in range(1_500))
    assert "busy" in index
