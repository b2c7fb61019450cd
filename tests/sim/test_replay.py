"""The replay of real runs (celery_dgs/sim/replay.py) measures as the
simulator does: replaying a simulation's own runs gives its figures."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from celery_dgs.sim.agreement import (
    Agreement,
    agreement,
    fleet_figures,
    percentile_resolution,
    spread,
)
from celery_dgs.sim.draws import KeyedDraw, RecordedDraw, StreamDraw, keyed_run
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.replay import RecordedRun, in_order, refill_gaps, replay
from celery_dgs.sim.workload import Workload


def small_fleet(load: float, failure_rate: float = 0.0) -> Workload:
    workload = generate(
        GeneratorOptions(
            schedules=25,
            slots=4,
            slots_per_worker=2,
            load=load,
            period_min_s=60,
            period_max_s=300,
            horizon_s=6000,
            warmup_s=1200,
            failure_rate=failure_rate,
            seed=3,
        )
    )
    return replace(workload, warm_start=False)


def simulated_runs(workload: Workload, delay_s: float = 0.0):
    """A simulation of ``workload`` and its runs as records, the k-th run of
    each schedule started ``k * delay_s`` later than simulated."""
    draw = KeyedDraw(11)
    trace: list[tuple[float, str, str]] = []
    simulation = Simulator(workload, "dgs", draw=draw, trace=trace)
    simulation.run()
    by_name = {s.name: s for s in workload.schedules}
    counts: dict[str, int] = {}
    runs = []
    for t, name, worker in trace:
        k = counts.get(name, 0)
        counts[name] = k + 1
        duration, failed = draw(by_name[name], k)
        start = t + delay_s * k
        runs.append(RecordedRun(name, start, start + duration, failed, worker))
    return simulation, runs


@pytest.mark.parametrize(("load", "failure_rate"), [(0.8, 0.0), (1.2, 0.0), (0.9, 0.1)])
def test_replaying_a_simulation_gives_its_figures(load: float, failure_rate: float) -> None:
    simulation, runs = simulated_runs(small_fleet(load, failure_rate))
    replayed = fleet_figures(replay(simulation.workload, runs))
    simulated = fleet_figures(simulation)
    assert simulated.runs_per_schedule > 5
    assert replayed.runs_per_schedule == simulated.runs_per_schedule
    assert replayed.error_s == pytest.approx(simulated.error_s, rel=1e-9, abs=1e-6)
    assert replayed.lateness_median_s == pytest.approx(simulated.lateness_median_s)
    assert replayed.lateness_p95_s == pytest.approx(simulated.lateness_p95_s)
    if load > 1:
        assert simulated.error_s > 0


def test_a_replay_that_starts_runs_later_shows_more_error() -> None:
    simulation, late = simulated_runs(small_fleet(0.8), delay_s=30.0)
    delayed = fleet_figures(replay(simulation.workload, late))
    simulated = fleet_figures(simulation)
    assert delayed.error_s > simulated.error_s
    assert not all(row.agrees for row in agreement(simulated, delayed))
    assert all(row.agrees for row in agreement(simulated, delayed, spread([simulated, delayed])))


def test_a_dispatch_latency_delays_every_start() -> None:
    workload = small_fleet(0.8)
    at_once, _ = simulated_runs(workload)
    later, _ = simulated_runs(replace(workload, dispatch_latency_s=2.0))
    assert fleet_figures(later).lateness_median_s > fleet_figures(at_once).lateness_median_s


def test_refill_gaps_are_a_slot_s_wait_for_its_next_run() -> None:
    runs = [
        RecordedRun("a", 0.0, 10.0, worker="w1"),
        RecordedRun("b", 10.2, 20.0, worker="w1"),  # 0.2 s after a's end
        RecordedRun("c", 25.0, 30.0, worker="w1"),  # 5 s: idle, not a wait
        RecordedRun("d", 10.0, 11.0, worker="w2"),
    ]
    assert refill_gaps(runs) == pytest.approx([0.2])


def test_the_keyed_draw_depends_only_on_its_keys() -> None:
    workload = small_fleet(0.8)
    sched = workload.schedules[0]
    first = keyed_run(5, sched.name, 3, sched.duration_s, sched.duration_sigma)
    assert KeyedDraw(5)(sched, 3) == first
    StreamDraw(1)(sched, 0)  # drawing elsewhere changes nothing
    assert KeyedDraw(5)(sched, 3) == first
    assert KeyedDraw(5)(sched, 4) != first
    assert keyed_run(5, sched.name, 3, 2.0, 0.0) == (2.0, False)


def test_recorded_runs_are_put_in_order_and_never_overlap() -> None:
    runs = [
        RecordedRun("a", 10.0, 12.0),
        RecordedRun("a", 0.0, 10.5),  # its end was written after the next start
        RecordedRun("b", 1.0, None),
    ]
    ordered = in_order(runs)
    assert [(r.start_s, r.end_s) for r in ordered["a"]] == [(0.0, 10.0), (10.0, 12.0)]
    sched = small_fleet(0.8).schedules[0]
    draw = RecordedDraw({sched.name: [(2.0, True)]})
    assert draw(sched, 0) == (2.0, True)
    assert draw(sched, 1) == (math.inf, False)  # still running when the record ends


def test_agreement_allows_the_tolerance_and_the_slack() -> None:
    assert Agreement("x", 100.0, 109.0, 0.0).agrees
    assert not Agreement("x", 100.0, 112.0, 0.0).agrees
    assert Agreement("x", 0.0, 0.4, 0.5).agrees
    assert not Agreement("x", 0.0, 0.6, 0.5).agrees
    assert "DIFFER" in Agreement("x", 0.0, 0.6, 0.5).line()


def test_a_percentile_of_a_small_sample_is_resolved_to_a_few_ranks() -> None:
    hundred = [float(i) for i in range(100)]
    # p95: the 95th of 100, give or take sqrt(100 x 0.95 x 0.05) = 2.2 ranks
    assert percentile_resolution(hundred, 95) == 3.0
    assert percentile_resolution(hundred, 50) == 5.0, "the median: give or take 5 ranks"
    many = [float(i) / 100 for i in range(10_000)]
    assert percentile_resolution(many, 95) < 0.25, "a large sample resolves it finely"
    assert percentile_resolution([7.0], 95) == 0.0
    assert percentile_resolution([], 95) == 0.0
