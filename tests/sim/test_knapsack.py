"""Shedding in the bound's order (celery_dgs/sim/knapsack.py): the index's order,
and on an overloaded fleet of mixed shares, ERROR closer to the long-run bound
than ``shed`` and ``restore``."""

from __future__ import annotations

from celery_dgs.core.overload import RUN_REQUEST_PRIORITY_S
from celery_dgs.sim.bound import error_bound_s
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.knapsack import KnapsackIndex, ok_seconds_per_slot_second
from celery_dgs.sim.loop import simulate

DAY = 86400.0


def test_late_schedules_go_by_ok_time_bought_then_on_time_ones_by_deadline() -> None:
    bought = {"cheap": 10.0, "dear": 1.0, "mid": 5.0, "soon": 0.1, "later": 0.1, "asked": 0.0}
    ix = KnapsackIndex(bought.__getitem__)
    ix.upsert("dear", 0, 10)  # late at 100, buys least
    ix.upsert("cheap", 0, 50)  # late, buys most
    ix.upsert("mid", 0, 90)
    ix.upsert("later", 0, 300)  # on time
    ix.upsert("soon", 0, 200)  # on time
    ix.upsert("asked", 0, -RUN_REQUEST_PRIORITY_S)  # an operator's run request
    assert [ix.pop(100) for _ in range(6)] == ["asked", "cheap", "mid", "dear", "soon", "later"]


def test_ok_seconds_per_slot_second() -> None:
    assert ok_seconds_per_slot_second(3600, 600) == 5.0
    assert ok_seconds_per_slot_second(600, 900) == 0.0
    assert ok_seconds_per_slot_second(600, 0) > 1e5


def test_under_overload_it_is_closer_to_the_bound_than_shed_and_restore() -> None:
    opts = GeneratorOptions(
        schedules=200,
        slots=4,
        load=1.5,
        horizon_s=3 * DAY,
        warmup_s=DAY,
        duration_sigma=0.3,
        cooldown_fraction=0.5,
        seed=1,
        share_spread=4.0,
    )
    workload = generate(opts)
    bound = error_bound_s(workload)
    error = {p: simulate(workload, p).error_s for p in ("dgs", "dgs-shed", "dgs-knapsack")}
    assert error["dgs-knapsack"] < 0.8 * error["dgs"], (error, bound)
    assert error["dgs-knapsack"] < 0.8 * error["dgs-shed"], (error, bound)
    assert error["dgs-knapsack"] < 1.3 * bound, (error, bound)
