"""A busy pool's backlog keeps no other pool's free slot idle: a round looks
past it (``wait_for_slot``), and a class that can be placed again gets its
most urgent waiting schedules back, a bounded slice per round."""

from __future__ import annotations

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.placement import Constraints, Placement, WorkerSlots, choose_dispatches
from celery_dgs.core.slot_wait import RELEASE_MIN, RELEASE_PER_SLOT, SlotWait, still_blocked

GPU = Constraints(pool="gpu")
CPU = Constraints()


def fill(busy: int = 1_500) -> tuple[DeadlineIndex, dict[str, Constraints]]:
    """``busy`` gpu schedules, the most urgent, then two of the default pool."""
    index, constraints = DeadlineIndex(), {}
    for i in range(busy):
        index.upsert(f"gpu{i}", 0, i)
        constraints[f"gpu{i}"] = GPU
    for i, name in enumerate(("cpu0", "cpu1")):
        index.upsert(name, 0, 10_000 + i)
        constraints[name] = CPU
    return index, constraints


def placement(gpu_free: int = 0, cpu_free: int = 2) -> Placement:
    """A gpu worker (busy unless ``gpu_free``) and a default-pool one."""
    return Placement(
        [
            WorkerSlots("g", "n1", frozenset({"gpu"}), gpu_free),
            WorkerSlots("c", "n2", frozenset({"celery"}), cpu_free),
        ],
        "celery",
    )


def choose(
    index: DeadlineIndex,
    constraints: dict[str, Constraints],
    placed: Placement,
    wait: SlotWait | None,
) -> list[tuple[str, str]]:
    def wait_for_slot(names: list[str]) -> None:
        assert wait is not None
        assert wait.take(index, names, constraints.__getitem__) == names

    return choose_dispatches(
        index,
        0,
        placed,
        constraints.__getitem__,
        lambda _n: False,
        limit=10,
        wait_for_slot=None if wait is None else wait_for_slot,
    )


def test_without_it_a_busy_pools_deep_backlog_keeps_the_other_pools_slots_idle() -> None:
    index, constraints = fill()
    assert choose(index, constraints, placement(), None) == []
    assert len(index) == 1_502, "nothing lost"


def test_the_round_looks_past_a_busy_pools_backlog() -> None:
    index, constraints = fill()
    wait = SlotWait()
    chosen = choose(index, constraints, placement(), wait)
    assert chosen == [("cpu0", "c"), ("cpu1", "c")]
    assert len(wait) == 1_500, "once past the plan's depth, every busy one it skips waits"
    assert not any(f"gpu{i}" in index for i in range(1_500))


def test_a_backlog_within_the_plans_depth_stays_in_the_index() -> None:
    """Below the plan's depth, skipping costs less than moving: nothing waits."""
    index, constraints = fill(busy=500)
    wait = SlotWait()
    assert choose(index, constraints, placement(), wait) == [("cpu0", "c"), ("cpu1", "c")]
    assert len(wait) == 0
    assert len(index) == 500


def test_a_class_with_a_free_slot_gets_its_most_urgent_back() -> None:
    index, constraints = fill(busy=3_000)
    wait = SlotWait()
    choose(index, constraints, placement(), wait)
    assert len(wait) == 3_000
    # No gpu slot free: nothing comes back.
    assert wait.release(placement(gpu_free=0).free_for) == []
    released = wait.release(placement(gpu_free=1).free_for)
    assert len(released) == RELEASE_MIN, "at least RELEASE_MIN"
    names = [name for name, _can, _should in released]
    assert names == [f"gpu{i}" for i in range(RELEASE_MIN)], "the most urgent, in order"
    for name, can, should in released:
        index.upsert(name, can, should)
    chosen = choose(index, constraints, placement(gpu_free=1, cpu_free=0), wait)
    assert chosen == [("gpu0", "g")]
    many = wait.release(placement(gpu_free=RELEASE_MIN).free_for)
    assert len(many) == RELEASE_PER_SLOT * RELEASE_MIN, "more per free slot"


def test_a_schedule_dropped_while_waiting_does_not_come_back() -> None:
    wait = SlotWait(per_slot=1, least=10)
    for i in range(5):
        wait.wait(f"s{i}", GPU, 0, i)
    wait.wait("other", CPU, 0, 0)
    assert wait.discard("s0")
    assert not wait.discard("s0")
    wait.wait("s1", GPU, 0, 9)  # set aside again, at new times
    assert len(wait) == 5
    released = wait.release(lambda c: int(c == GPU))
    assert released == [("s2", 0, 2), ("s3", 0, 3), ("s4", 0, 4), ("s1", 0, 9)]
    assert list(wait) == ["other"]
    assert wait.release(lambda c: 1) == [("other", 0, 0)]
    assert len(wait) == 0


def test_stale_entries_are_compacted() -> None:
    wait = SlotWait()
    for round_ in range(10):
        for i in range(1_000):
            wait.wait(f"s{i}", GPU, 0, round_ * 1_000 + i)
    assert len(wait) == 1_000
    assert wait._entries <= 4 * 1_000 + 1_024 + 1
    released = wait.release(lambda c: 1_000)
    assert [name for name, _c, _s in released] == [f"s{i}" for i in range(1_000)]


def test_take_moves_indexed_ones_and_still_blocked_names_those_left_without_a_slot() -> None:
    index, constraints = fill(busy=3)
    wait = SlotWait()
    assert wait.take(index, ["gpu0", "nothing", "gpu1"], constraints.__getitem__) == [
        "gpu0",
        "gpu1",
    ]
    assert "gpu0" not in index
    assert "gpu0" in wait
    full, free = placement(gpu_free=0), placement(gpu_free=1)
    released = ["gpu2", "cpu0", "gone"]
    assert still_blocked(released, index, constraints.__getitem__, full.free_for) == ["gpu2"]
    assert still_blocked(released, index, constraints.__getitem__, free.free_for) == []


def test_a_class_past_its_bound_gives_its_least_urgent_then_asks_to_be_read_again() -> None:
    """The bound of a window (:meth:`SlotWait.over`): past a quarter more, a
    class keeps its most urgent and gives the rest it may; it asks for a
    refill once fewer than half are left; schedules it may not give (the
    window's own range) are kept, and not looked at again every time."""
    from celery_dgs.core.placement import Constraints

    wait = SlotWait()
    gpu = Constraints(pool="gpu")
    for i in range(250):
        wait.wait(f"s{i:03d}", gpu, 0.0, float(i))
    assert wait.over(200, lambda name: True) == []  # 250 <= 200 + 64
    for i in range(250, 400):
        wait.wait(f"s{i:03d}", gpu, 0.0, float(i))
    taken = wait.over(200, lambda name: True)
    assert sorted(taken) == [f"s{i:03d}" for i in range(200, 400)], "the least urgent"
    assert len(wait) == 200
    assert wait.trimmed
    assert not wait.wants_refill(200)
    released = wait.release(lambda c: 30)  # 120 back to the index
    assert [name for name, _, _ in released][:2] == ["s000", "s001"]
    assert wait.wants_refill(200)  # 80 left: fewer than half
    assert not wait.trimmed
    # schedules it may not give are kept, and counted before it looks again
    looked = []
    for i in range(400, 700):
        wait.wait(f"s{i:03d}", gpu, 0.0, float(i))
    assert wait.over(200, lambda name: looked.append(name) or False) == []
    assert looked, "it looked once"
    looked.clear()
    wait.wait("s700", gpu, 0.0, 700.0)
    assert wait.over(200, lambda name: looked.append(name) or False) == []
    assert looked == [], "not again until a quarter more"
