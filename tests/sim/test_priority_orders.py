"""The priority orders of docs/simulator.md ("Priorities") on a small overloaded
fleet of three classes: the elevator's settings each run, and the default
protects the top class without starving the lowest one."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.loop import simulate
from celery_dgs.sim.metrics import SimResult
from celery_dgs.sim.workload import SimSchedule, SimWorker, Workload

DAY = 86400.0
CLASSES = ((20, 0.30), (50, 0.35), (80, 0.35))
#: dgs with the default elevator, and with strict classes (no elevator).
ORDERS = {"dgs": OrderPolicy(), "strict": OrderPolicy(elevator_interval_s=None)}


@pytest.fixture(scope="module")
def results() -> dict[str, SimResult]:
    opts = GeneratorOptions(
        schedules=150,
        slots=3,
        load=1.5,
        horizon_s=2 * DAY,
        warmup_s=DAY,
        duration_sigma=0.3,
        cooldown_fraction=0.5,
        seed=1,
        priority_classes=CLASSES,
    )
    workload = generate(opts)
    return {name: simulate(workload, "dgs", order=order) for name, order in ORDERS.items()}


def test_every_priority_order_runs(results: dict[str, SimResult]) -> None:
    for r in results.values():
        assert r.policy == "dgs"
        assert set(r.by_class) == {20, 50, 80}
        assert r.runs > 0


def test_the_default_protects_the_top_class_and_bounds_the_lowest(
    results: dict[str, SimResult],
) -> None:
    dgs, strict = results["dgs"], results["strict"]
    # at load 1.5 the top class has no ERROR (elevated work held behind its own,
    # and its lead), while the classes below it take the overload
    assert dgs.by_class[20]["error_s"] == 0
    assert min(dgs.by_class[c]["error_s"] for c in (50, 80)) > 100_000
    # strict classes starve the lowest one; the elevator starts it within (3 + 1) steps
    assert strict.by_class[80]["max_staleness"] > 2 * dgs.by_class[80]["max_staleness"]
    assert dgs.by_class[80]["max_lateness_s"] <= 4 * 7200


def test_below_capacity_the_classes_choose_nothing_after_warm_up(
    results: dict[str, SimResult],
) -> None:
    """At load 0.9 with mixed shares no due schedule waits half an elevator
    interval after warm-up, and the demand fits the slots: every dispatch is
    the overload policy's own. Under
    overload (the fixture's 1.5) the classes choose."""
    opts = GeneratorOptions(
        schedules=150,
        slots=3,
        load=0.9,
        horizon_s=2 * DAY,
        warmup_s=DAY,
        duration_sigma=0.3,
        cooldown_fraction=0.5,
        seed=1,
        share_spread=4.0,
        priority_classes=CLASSES,
    )
    workload = generate(opts)
    assert simulate(workload, "dgs").class_picks == 0
    assert (results["dgs"].class_picks or 0) > 100


def test_when_half_the_workers_die_the_top_class_keeps_precedence_at_once() -> None:
    """Load 0.6 on 4 slots until 2 of them die for 12 h (load 1.2): the demand
    exceeds the live slots, so the classes take over at once: the top class
    stays (nearly) out of ERROR from the onset, while the lowest one takes the
    overload."""
    opts = GeneratorOptions(
        schedules=150,
        slots=4,
        slots_per_worker=2,
        load=0.6,
        horizon_s=3 * DAY,
        warmup_s=DAY,
        duration_sigma=0.3,
        cooldown_fraction=0.5,
        seed=1,
        priority_classes=CLASSES,
        outage_s=12 * 3600.0,
        outage_at_s=1.5 * DAY,
        outage_workers=0.5,
    )
    workload = generate(opts)
    [outage] = workload.outages
    assert len(outage.nodes) == 1  # one of the two 2-slot workers
    dgs = simulate(workload, "dgs")
    print(f"ERROR-s by class: { {c: round(v['error_s']) for c, v in dgs.by_class.items()} }")
    assert dgs.by_class[80]["error_s"] > 100_000
    assert dgs.by_class[20]["error_s"] < 100


def test_one_pool_short_of_slots_turns_the_classes_on_beside_idle_ones() -> None:
    """Five schedules of pool ``prio`` need 5/3 slots and have one; the default
    queue's worker has two slots and little to do, so the fleet's demand fits
    its slots. The pool's does not: the classes order its due work, and its
    class-10 schedule stays out of ERROR while the class-90 ones take the
    overload (without the pool's own signal, nothing waits long enough for
    the classes: all five share the slot in turn, each as often in ERROR)."""
    minute = timedelta(minutes=1)

    def scheduled(name: str, priority: int, pool: str | None, run_s: float) -> SimSchedule:
        spec = PeriodicSpec(
            task=name,
            scheduling_period=minute,
            priority=priority,
            pool=pool,
            duration_override=timedelta(seconds=run_s),
        )
        return SimSchedule(spec, run_s, duration_sigma=0.0)

    prio = [scheduled("t.top", 10, "prio", 20.0)]
    prio += [scheduled(f"t.low{i}", 90, "prio", 20.0) for i in range(4)]
    spare = [scheduled(f"t.other{i}", 50, None, 5.0) for i in range(2)]
    workers = [
        SimWorker("celery@w1", "w1", 1, frozenset({"prio"})),
        SimWorker("celery@w2", "w2", 2, frozenset({"celery"})),
    ]
    workload = Workload([*prio, *spare], workers, horizon_s=4 * 3600.0, warmup_s=3600.0)
    result = simulate(workload, "dgs")
    top, low = result.by_class[10]["error_s"], result.by_class[90]["error_s"] / 4
    print(f"ERROR-s: class 10 {top:.0f}, class 90 {low:.0f} per schedule")
    assert top < 0.1 * low
    assert result.by_class[50]["error_s"] == 0
