"""End to end: priority classes and the elevator under overload.

Real Redis, SQLite store, one real worker with one slot and a real beat
(tests/e2e/proj.py). Two class-10 schedules run 1.5 s every 2 s: together they
need more than the slot, one of them is due whenever it frees, and each
waits more than half an elevator interval for it, so capacity counts as
short (below capacity the classes would choose nothing). A class-90
schedule is due from its registration ``reg`` + 3.5 s and in ERROR from
``reg`` + 4 s; without classes beat's order (schedules in ERROR first) would
start it at the first free slot after that.

With classes, the due class-10 work goes first; the elevator (every 3 s, at
the multiples of 3 s since the epoch) moves the waiting class-90 schedule up
one class per step: after one step it is in class 10 behind that class's own
due work, and after the next (three steps: more than two intervals, at most
three after it became due) it is ahead of the class-10 work and starts.

The same three schedules in a pool of their own, on one slot, beside a
worker of the default queue with two idle slots: the fleet's demand fits
the three slots, the pool's (1.125 slots) does not, and the classes order
the pool's due work at once, without any wait reaching half an elevator
interval.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from celery_dgs.beat_pace import PaceBoard
from tests.e2e.harness import wait_for
from tests.e2e.test_cli_e2e import status

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

INTERVAL_S = 3.0


def test_one_slot_serves_the_high_class_first_then_the_elevated_low_one(cluster_factory) -> None:
    cluster = cluster_factory(
        ["prio_hi1", "prio_hi2", "prio_lo"], E2E_ELEVATOR_INTERVAL=str(INTERVAL_S)
    )
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    low = wait_for(
        lambda: [e for e in cluster.starts() if e["name"] == "prio_lo"],
        40,
        "the low class to start",
    )[0]
    registered = cluster.schedule("e2e.prio_lo").stats.registered_at.timestamp()
    in_error = registered + 4.0
    high_while_waiting = [
        e
        for e in cluster.starts()
        if e["name"] != "prio_lo" and in_error + 0.5 <= e["t"] < low["t"]
    ]
    logs = cluster.logs()
    # Without classes it would have started within about a second of its ERROR.
    assert low["t"] >= registered + 3.5 + 2 * INTERVAL_S - 0.5, logs
    # three elevator steps (at the multiples of the interval) passed before it started
    steps = math.floor(low["t"] / INTERVAL_S) - math.floor((registered + 3.5) / INTERVAL_S)
    assert steps >= 3, (steps, logs)
    assert len(high_while_waiting) >= 3, logs
    # ... and the elevator bounds the wait: three steps, then one running high run.
    assert low["t"] <= registered + 3.5 + 3 * INTERVAL_S + 3.0, logs


def test_status_shows_beats_class_whatever_rows_it_lists(cluster_factory) -> None:
    """While the class-90 schedule waits, ``status`` listing it alone shows
    the class beat serves it in (moved up by the elevator), as the whole
    list does: the classes come from the leading beat's pace, not from the
    rows listed."""
    cluster = cluster_factory(
        ["prio_hi1", "prio_hi2", "prio_lo"], E2E_ELEVATOR_INTERVAL=str(INTERVAL_S)
    )
    cluster.start_worker("w1", "node1")
    cluster.start_beat()

    def moved() -> dict[str, Any] | None:
        if any(e["name"] == "prio_lo" for e in cluster.starts()):
            raise AssertionError(f"prio_lo started before status saw it moved:\n{cluster.logs()}")
        _, alone = status(cluster, "e2e.prio_lo")
        row = alone.get("e2e.prio_lo")  # none before beat's first sync
        return row if row is not None and row["effective_priority"] < 90 else None

    row = wait_for(moved, 40, "status listing prio_lo alone to show it moved up")
    assert (row["priority"], row["effective_priority"]) == (90, 10)


def test_a_pool_short_of_slots_serves_its_high_class_first_beside_idle_slots(
    cluster_factory,
) -> None:
    """The elevator steps every hour (half an hour's wait before capacity
    counts as short): only the pool's own demand against its one slot can
    put the classes in charge. They keep prio_lo waiting past its ERROR
    while the class-10 runs take the slot; without them (ERROR first) it
    would start at the first free slot after its ERROR."""
    cluster = cluster_factory(
        ["prio_hi1", "prio_hi2", "prio_lo"], E2E_ELEVATOR_INTERVAL="3600", E2E_PRIO_POOL="prio"
    )
    cluster.start_worker("w1", "node1", queues="prio")
    cluster.start_worker("w2", "node2", pool="threads", concurrency=2)
    cluster.start_beat()
    pace = PaceBoard(cluster.redis, cluster.keyspace())

    def short() -> bool:
        figures = pace.read()
        return figures is not None and figures.elevator is not None and figures.elevator.short

    wait_for(short, 30, "beat to count the prio pool's capacity as short")
    registered = cluster.schedule("e2e.prio_lo").stats.registered_at.timestamp()
    in_error = registered + 4.0
    wait_for(lambda: time.time() > in_error + 8.0, 30, "8 s of prio_lo in ERROR")
    starts = cluster.starts()
    logs = cluster.logs()
    assert not [e for e in starts if e["name"] == "prio_lo" and e["t"] < in_error + 8.0], logs
    high = [e for e in starts if e["name"] != "prio_lo" and in_error + 0.5 <= e["t"]]
    assert len(high) >= 3, logs
    assert short(), logs
