"""End to end: the simulator against a real beat and real workers on the same
fleet.

A generated fleet (30 periodic schedules, periods 15-45 s, lognormal run
times, near full load on 3 workers of 2 slots) runs for ``DGS_SIM_VS_REAL_S``
seconds (default 120; ``make sim-vs-real`` runs 1,200) under a real beat, and
in the simulator under beat's order. Each run lasts what the simulator's keyed
draw gives that schedule's run of that number (``celery_dgs/sim/draws.py``),
in both. The real runs, read from the store, are replayed through the
simulator's accounting (``celery_dgs/sim/replay.py``), so both sides' figures
come from the same code: ERROR-seconds after the warm-up, runs per schedule,
and the lateness of the starts at the median and p95. The simulator models
the real system's one delay it would otherwise miss, the dispatch latency
(``Workload.dispatch_latency_s``), measured on the same real run: a freed
slot's next start and a run's time beyond its draw, medians. The figures must
agree within 10 % (``celery_dgs/sim/agreement.py``), or within what the
measurement cannot resolve: how far a latency of none, twice the measured
one, or the measured p95s (a busy machine's tail, which the one median
latency does not model) moves each simulated figure, plus 0.5 s of lateness
per run (and one run per schedule at the short window's edges), and, for the
lateness percentiles, how finely the real run's sample of starts resolves
them (``percentile_resolution``: a p95 of a hundred starts is the fifth
largest, give or take two).

``DGS_SIM_VS_REAL_JSON`` names a file for the figures.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from celery_dgs.core.stats import ScheduleStats
from celery_dgs.runtime_schedules import RuntimeSchedules
from celery_dgs.sim.agreement import (
    FleetFigures,
    agreement,
    fleet_figures,
    percentile_resolution,
    spread,
)
from celery_dgs.sim.draws import KeyedDraw, keyed_run
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.replay import RecordedRun, in_order, refill_gaps, replay
from celery_dgs.sim.workload import SimSchedule, Workload
from tests.e2e.harness import wait_for

SECONDS = float(os.environ.get("DGS_SIM_VS_REAL_S", "120"))
SEED = 7
WORKERS, SLOTS_PER_WORKER = 3, 2
#: What a real run adds to a start or an end that the simulator does not:
#: beat's round, the message, the worker's lease and its 50 ms sleep steps.
LATENESS_SLACK_S = 0.5
#: Runs per schedule the window's two edges can move (a run that starts just
#: before or just after one): what 10 % of the default run's 4 runs cannot hide.
RUNS_SLACK = 1.0 if SECONDS < 600 else 0.0

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SECONDS + 180)]


def fleet(horizon_s: float) -> Workload:
    """The fleet, its schedules named as the runtime API stores them."""
    workload = generate(
        GeneratorOptions(
            schedules=30,
            slots=WORKERS * SLOTS_PER_WORKER,
            slots_per_worker=SLOTS_PER_WORKER,
            load=0.85,
            period_min_s=15,
            period_max_s=45,
            duration_sigma=0.3,
            cooldown_fraction=0.5,
            horizon_s=horizon_s,
            warmup_s=min(60.0, horizon_s / 3),
            seed=SEED,
        )
    )
    schedules = [
        SimSchedule(
            replace(s.spec, task="e2e.drawn", configuration=f"f{i:02d}"),
            s.duration_s,
            s.duration_sigma,
        )
        for i, s in enumerate(workload.schedules)
    ]
    return replace(workload, schedules=schedules, warm_start=False)


def rows(workload: Workload) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for s in workload.schedules:
        spec = s.spec
        out.append(
            {
                "name": spec.name,
                "period": spec.scheduling_period.total_seconds(),  # type: ignore[attr-defined]
                "cooldown": spec.cooldown_duration.total_seconds(),  # type: ignore[attr-defined]
                "kwargs": {
                    "name": spec.name,
                    "mean_s": s.duration_s,
                    "sigma": s.duration_sigma,
                    "seed": SEED,
                },
            }
        )
    return out


def recorded(cluster, workload: Workload, start: datetime) -> list[RecordedRun]:
    store = cluster.store()
    try:
        runs: list[RecordedRun] = []
        for s in workload.schedules:
            for r in store.runs(s.name, limit=100_000):
                if r.outcome == "skipped":
                    continue
                end = None if r.ended_at is None else (r.ended_at - start).total_seconds()
                failed = r.outcome not in ("success", "running")
                runs.append(
                    RecordedRun(s.name, (r.started_at - start).total_seconds(), end, failed)
                )
        return runs
    finally:
        store.close()


def run_overhead(workload: Workload, runs: list[RecordedRun]) -> list[float]:
    """Per ended run: recorded duration less the duration its task drew."""
    by_name = {s.name: s for s in workload.schedules}
    out: list[float] = []
    for name, seq in in_order(runs).items():
        sched = by_name[name]
        for k, run in enumerate(seq):
            if run.end_s is not None:
                drawn, _ = keyed_run(SEED, name, k, sched.duration_s, sched.duration_sigma)
                out.append(run.end_s - run.start_s - drawn)
    return out or [0.0]


def p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))]


def test_the_simulator_agrees_with_a_real_run(cluster_factory) -> None:
    cluster = cluster_factory(["drawn"], E2E_STORE_POLL="0.5")
    for i in range(WORKERS):
        cluster.start_worker(f"w{i}", f"node{i}", pool="threads", concurrency=SLOTS_PER_WORKER)
    cluster.start_beat()
    wait_for(cluster.beat_leader, 30, "beat to lead")
    workload = fleet(SECONDS)
    store = cluster.store()
    try:
        start = datetime.now(timezone.utc)
        report = RuntimeSchedules(store).upsert_many(rows(workload))
        assert report.ok, report.errors
    finally:
        store.close()
    time.sleep(max(0.0, start.timestamp() + SECONDS - time.time()))
    workload = replace(workload, start=start)
    runs = recorded(cluster, workload, start)
    registered = {s.name: ScheduleStats(registered_at=start) for s in workload.schedules}
    replayed = replay(workload, runs, initial_stats=registered)
    real = fleet_figures(replayed)
    real_lateness = sorted(replayed.tally.lateness)
    # The model's one calibration, measured on the same real run: how much
    # later than the simulator's instant a slot's next run starts and ends.
    overhead = run_overhead(workload, runs)
    gaps = refill_gaps(runs) or [0.0]
    latency = statistics.median(gaps) + statistics.median(overhead)

    def simulate(workload: Workload, latency_s: float) -> FleetFigures:
        simulator = Simulator(
            replace(workload, dispatch_latency_s=latency_s), "dgs", draw=KeyedDraw(SEED)
        )
        simulator.run()
        return fleet_figures(simulator)

    at_once = simulate(workload, 0.0)
    simulated = simulate(workload, latency)
    # What the measurement cannot resolve: how far a latency perturbation
    # (none, twice the measured one, or the p95s') moves each simulated
    # figure, plus LATENESS_SLACK_S of lateness per run and RUNS_SLACK.
    tail = p95(gaps) + p95(overhead)
    perturbed = {2 * latency, max(tail, latency)}
    noise = spread([at_once, simulated, *(simulate(workload, at) for at in sorted(perturbed))])
    runs_in_window = max(simulated.runs_per_schedule, real.runs_per_schedule)
    slack = FleetFigures(
        error_s=noise.error_s + LATENESS_SLACK_S * runs_in_window * len(workload.schedules),
        runs_per_schedule=noise.runs_per_schedule + RUNS_SLACK,
        lateness_median_s=noise.lateness_median_s
        + LATENESS_SLACK_S
        + percentile_resolution(real_lateness, 50),
        lateness_p95_s=noise.lateness_p95_s
        + LATENESS_SLACK_S
        + percentile_resolution(real_lateness, 95),
    )
    rows_of = agreement(simulated, real, slack)
    print(
        f"\n{len(workload.schedules)} schedules, {WORKERS} workers x {SLOTS_PER_WORKER} slots, "
        f"load {workload.load():.2f}, {SECONDS:.0f} s ({workload.effective_warmup():.0f} s "
        f"warm-up), {len(runs)} real runs; a real run lasts longer than its draw by "
        f"{statistics.median(overhead) * 1000:.0f} ms (median; p95 {p95(overhead) * 1000:.0f} "
        f"ms), a freed slot's next run starts {statistics.median(gaps) * 1000:.0f} ms later "
        f"(median; p95 {p95(gaps) * 1000:.0f} ms): simulated with a dispatch latency of "
        f"{latency * 1000:.0f} ms"
    )
    for row in rows_of:
        print(row.line())
    print(f"slack beside 10 %: {slack.to_dict()}")
    print(f"without the latency: {at_once.to_dict()}")
    target = os.environ.get("DGS_SIM_VS_REAL_JSON")
    if target:
        with open(target, "w") as f:
            json.dump(
                {
                    "seconds": SECONDS,
                    "load": workload.load(),
                    "dispatch_latency_s": latency,
                    "simulated": simulated.to_dict(),
                    "simulated_without_latency": at_once.to_dict(),
                    "real": real.to_dict(),
                    "agree": {row.figure: row.agrees for row in rows_of},
                },
                f,
                indent=1,
            )
    assert all(row.agrees for row in rows_of), [row.line() for row in rows_of]
