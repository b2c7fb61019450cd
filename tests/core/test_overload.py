"""SheddingIndex ("shed") and RestoringIndex ("restore") against plain deadline order (pure)."""

from __future__ import annotations

import random

import pytest

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.overload import (
    RUN_REQUEST_PRIORITY_S,
    RestoringIndex,
    SheddingIndex,
    make_index,
)
from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings


def fill(index: DeadlineIndex) -> None:
    index.upsert("late", 0, 90)  # should_start_by passed at now = 100
    index.upsert("due_soon", 0, 150)  # on time, due within the horizon (100 s)
    index.upsert("early", 0, 5000)  # on time, far ahead: an early run
    index.upsert("request", 100, 100 - RUN_REQUEST_PRIORITY_S)  # operator run request


def drain(index: DeadlineIndex, now: float) -> list[str]:
    out = []
    while (name := index.pop(now)) is not None:
        out.append(name)
    return out


def test_greedy_serves_the_lowest_should_start_by_first() -> None:
    index = make_index("greedy")
    fill(index)
    assert drain(index, 100) == ["request", "late", "due_soon", "early"]


def test_shed_serves_on_time_due_soon_then_late_then_early() -> None:
    index = SheddingIndex(horizon_s=100)
    fill(index)
    assert drain(index, 100) == ["request", "due_soon", "late", "early"]


def test_shed_pop_placeable_skips_without_losing_entries() -> None:
    index = SheddingIndex(horizon_s=100)
    fill(index)
    assert index.pop_placeable(100, lambda n: n == "late") == "late"
    assert sorted(index) == ["due_soon", "early", "request"]
    assert index.ready_count(100) == 3
    assert drain(index, 100) == ["request", "due_soon", "early"]


def test_a_late_entry_upserted_again_is_judged_by_its_new_times() -> None:
    index = SheddingIndex(horizon_s=100)
    index.upsert("a", 0, 90)
    index.upsert("b", 0, 120)
    assert index.peek(100) == "b"  # a is late
    assert index.late_count(100) == 1
    index.upsert("a", 0, 110)  # a ran: on time again
    assert drain(index, 100) == ["a", "b"]


def test_setting_validation() -> None:
    assert DgsSettings().overload_policy == "restore"  # the default (greedy while <= 1 is late)
    assert DgsSettings(overload_policy="shed").overload_policy == "shed"
    with pytest.raises(SettingsError, match="dgs_overload_policy"):
        DgsSettings(overload_policy="drop")
    with pytest.raises(ValueError, match="overload policy"):
        make_index("drop")
    assert DgsSettings(overload_policy="restore", restore_aging=0).restore_aging == 0
    for bad in (-1.0, float("inf"), float("nan"), "10", True):
        with pytest.raises(SettingsError, match="dgs_restore_aging"):
            DgsSettings(restore_aging=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected run times"):
        make_index("restore")


# --- restore: late schedules shortest expected run first, with aging ---


def test_restore_serves_late_ones_shortest_first_then_on_time_in_deadline_order() -> None:
    runs = {
        "late_long": 300.0,
        "late_short": 10.0,
        "late_mid": 60.0,
        "due_soon": 1.0,
        "early": 1.0,
        "request": 500.0,
    }
    index = RestoringIndex(runs.__getitem__, aging=10)
    index.upsert("late_long", 0, 50)  # key 50 + 3000
    index.upsert("late_short", 0, 90)  # key 90 + 100
    index.upsert("late_mid", 0, 80)  # key 80 + 600
    index.upsert("due_soon", 0, 150)
    index.upsert("early", 0, 5000)
    index.upsert("request", 100, 100 - RUN_REQUEST_PRIORITY_S)
    assert index.late_count(100) == 4  # the request is in the late heap, first by far
    assert drain(index, 100) == [
        "request",
        "late_short",
        "late_mid",
        "late_long",
        "due_soon",
        "early",
    ]


def test_restore_ages_a_long_late_schedule_before_later_short_ones() -> None:
    # late_long (10 s late) against late_short, 1000 s later late: 10 * (300 - 10) > 1000.
    runs = {"late_long": 300.0, "late_short": 10.0}
    index = RestoringIndex(runs.__getitem__, aging=10)
    index.upsert("late_long", 0, 90)
    index.upsert("late_short", 0, 1090)
    assert drain(index, 2000) == ["late_short", "late_long"]
    index = RestoringIndex(runs.__getitem__, aging=2)  # 2 * 290 < 1000: the older one first
    index.upsert("late_long", 0, 90)
    index.upsert("late_short", 0, 1090)
    assert drain(index, 2000) == ["late_long", "late_short"]


def test_restore_nothing_starves_under_a_stream_of_short_late_schedules() -> None:
    """One slot, one 1000-s schedule late since t=0, and a new 10-s schedule late
    every 10 s forever (overload): the long one runs once a new short one's key
    ``now + aging * 10`` passes its key ``0 + aging * 1000``, never later."""
    aging = 10.0
    index = RestoringIndex(lambda n: 1000.0 if n == "long" else 10.0, aging=aging)
    index.upsert("long", 0, 0)
    now, started_long = 0.0, None
    for i in range(5000):
        index.upsert(f"short{i}", now, now - 0.5)
        name = index.pop(now)
        if name == "long":
            started_long = now
            break
        now += 10.0  # the short run
    assert started_long is not None
    assert aging * (1000 - 10) <= started_long <= aging * (1000 - 10) + 10


@pytest.mark.parametrize("seed", range(20))
def test_restore_is_greedy_when_at_most_one_schedule_is_late(seed: int) -> None:
    rng = random.Random(seed)
    runs: dict[str, float] = {}
    greedy, restore = DeadlineIndex(), RestoringIndex(lambda n: runs[n], aging=10)
    now = 1000.0
    late_left = rng.choice((0, 1))
    for step in range(300):
        op = rng.random()
        name = f"s{rng.randrange(40)}"
        if op < 0.6:
            runs[name] = rng.uniform(1, 500)
            can = now + rng.uniform(-300, 300)
            lowest = now + 1 if not late_left else now - rng.uniform(1, 100)
            late_left = 0 if lowest < now else late_left
            should = max(can, lowest) + rng.uniform(0, 3000) if lowest >= now else lowest
            for index in (greedy, restore):
                index.upsert(name, can, should)
        elif op < 0.7:
            assert greedy.remove(name) == restore.remove(name)
        else:
            assert restore.pop(now) == greedy.pop(now), step
        now += rng.uniform(0, 5)
    assert drain(restore, now) == drain(greedy, now)


def test_restore_with_no_aging_weight_is_greedy_and_pop_placeable_keeps_entries() -> None:
    rng = random.Random(7)
    greedy, restore = DeadlineIndex(), RestoringIndex(lambda n: rng.uniform(1, 900), aging=0)
    for i in range(200):
        can, should = rng.uniform(0, 1000), rng.uniform(0, 3000)
        greedy.upsert(f"s{i}", can, should)
        restore.upsert(f"s{i}", can, should)
    picked = restore.pop_placeable(1500, lambda n: n.endswith("7"))
    assert picked == greedy.pop_placeable(1500, lambda n: n.endswith("7"))
    assert len(restore) == len(greedy) == 199
    assert drain(restore, 1500) == drain(greedy, 1500)
