"""Adaptive schedules in the simulator: the store's run-end rule moves the
ladder, failures disable, hints enable and pull visits in; the fixed-period
baseline spends the same visits; results are seeded."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from itertools import pairwise

import pytest

from celery_dgs.core.adaptive import EARLY_FRACTION, ladder_interval
from celery_dgs.core.spec import AdaptiveSpec
from celery_dgs.sim.loop import Simulator, simulate
from celery_dgs.sim.revisit import (
    DAY,
    HOUR,
    RevisitOptions,
    adaptive_workload,
    matched_fixed,
    simulate_revisit,
    source_name,
)
from celery_dgs.sim.upstream import Source, Upstream
from celery_dgs.sim.workload import nominal_period, workload_from_dict

ONE = RevisitOptions(
    sources=1,
    slots=1,
    duration_s=60.0,
    duration_sigma=0.0,
    horizon_s=30 * DAY,
    warmup_s=0.0,
    interval_unit_s=HOUR,
)
NAME = source_name(0)


def _run(
    opts: RevisitOptions,
    source: Source,
    changes: list[float] | None = None,
) -> tuple[Simulator, Upstream, list[tuple[float, str, str]]]:
    workload = adaptive_workload(opts, [NAME])
    upstream = Upstream(
        {NAME: source},
        horizon_s=opts.horizon_s,
        window_start=opts.warmup_s,
        hint_delay_s=opts.hint_delay_s,
        seed=3,
    )
    if changes is not None:
        upstream.changes(NAME).extend(changes)
    trace: list[tuple[float, str, str]] = []
    sim = Simulator(workload, "dgs", upstream=upstream, trace=trace)
    upstream.attach(sim)
    sim.run()
    return sim, upstream, trace


def test_an_adaptive_spec_counts_its_initial_interval_as_its_period() -> None:
    spec = AdaptiveSpec(task="t", interval_unit=timedelta(hours=1), initial_interval_index=5)
    assert nominal_period(spec) == 4 * HOUR


def test_a_dead_source_climbs_the_ladder_one_step_per_visit() -> None:
    sim, upstream, trace = _run(ONE, Source(0.0, group="dead"))
    starts = [t for t, _, _ in trace]
    # 4 -> 5 -> ... -> 10: intervals 2h, 4h, 16h, 64h, 256h; the next (1024h) is past 30 days.
    assert sim.states[NAME].stats.interval_index == min(4 + len(starts), 10)
    gaps = [b - a for a, b in pairwise(starts)]
    for k, gap in enumerate(gaps):
        interval = ladder_interval(4 + k + 1, timedelta(hours=1)).total_seconds()
        # eligible EARLY_FRACTION before the fudged (x0.9-1.1) target, served at once
        assert (1 - EARLY_FRACTION) * 0.9 * interval - 120 <= gap <= 1.1 * interval
    assert upstream.figures().total.useless == len(starts) == upstream.figures().dead_visits


def test_a_source_that_always_changed_goes_down_two_steps_per_visit_to_the_floor() -> None:
    sim, upstream, trace = _run(replace(ONE, horizon_s=2 * DAY), Source(1 / 60.0))
    assert sim.states[NAME].stats.interval_index == 0
    starts = [t for t, _, _ in trace]
    assert len(starts) > 40  # about one visit every 0.9 h
    assert upstream.figures().total.useless == 0


def test_failures_disable_the_schedule_until_the_lister_reports_a_change() -> None:
    failing = replace(ONE, failure_rate=1.0, horizon_s=10 * DAY, hint_delay_s=60.0)
    sim, _, trace = _run(failing, Source(0.0))
    assert len(trace) == 3  # max_failures: then held
    assert sim.states[NAME].disabled is not None
    assert len(sim.policy.book) == 0  # held: its share of a slot does not count, as in beat
    sim, _, trace = _run(failing, Source(0.0, hinted=True), changes=[5 * DAY])
    # The hint (the lister's upsert) enables it and it is due at once; its
    # failure count stays, so the next failure disables it again.
    assert [t for t, _, _ in trace[3:]] == [5 * DAY + 60.0]
    assert sim.states[NAME].disabled is not None


def test_a_hinted_change_is_visited_as_its_hint_arrives_when_a_slot_is_free() -> None:
    opts = replace(ONE, interval_unit_s=DAY, hint_delay_s=600.0)
    changes = [3 * DAY + 1000.0 * k for k in range(0, 200, 7)]
    _, upstream, trace = _run(opts, Source(0.0, hinted=True), changes=changes)
    hints = upstream.figures().hints
    assert hints.changes == len(changes)
    assert hints.max_wait_s == 0.0
    assert hints.max_lag_s == pytest.approx(60.0)  # the run time
    starts = {t for t, _, _ in trace}
    assert all(c + 600.0 in starts for c in changes)


def test_results_are_deterministic_for_a_seed() -> None:
    opts = RevisitOptions(
        sources=200, slots=2, horizon_s=6 * DAY, warmup_s=2 * DAY, hint_fraction=0.3, seed=4
    )
    a, b = simulate_revisit(opts), simulate_revisit(opts)
    assert a.upstream == b.upstream
    assert a.sim.runs == b.sim.runs
    other = simulate_revisit(replace(opts, seed=5))
    assert other.upstream != a.upstream


def test_the_fixed_baseline_spends_the_same_visits_and_adaptive_wins_on_this_fleet() -> None:
    opts = RevisitOptions(sources=400, slots=4, horizon_s=20 * DAY, warmup_s=7 * DAY, seed=2)
    adaptive = simulate_revisit(opts)
    fixed = matched_fixed(opts, adaptive.visits)
    assert fixed.period_s is not None
    assert abs(fixed.visits / adaptive.visits - 1) <= 0.02
    a, f = adaptive.upstream, fixed.upstream
    assert a.total.mean_lag_s < f.total.mean_lag_s / 1.5
    assert a.total.useless_fraction < f.total.useless_fraction
    assert a.dead_visits < f.dead_visits / 3
    # the fixed period visits every class alike; adaptive visits hourly sources most
    assert a.groups["hourly"].visits > 2 * f.groups["hourly"].visits


def test_a_workload_file_may_hold_adaptive_schedules_that_stay_at_their_step() -> None:
    workload = workload_from_dict(
        {
            "slots": 1,
            "horizon": 2 * DAY,
            "warmup": 0,
            "schedules": [
                {"task": "src.a", "kind": "adaptive", "interval_unit": HOUR, "duration": 60}
            ],
        }
    )
    result = simulate(workload, "dgs")
    # index 4 (2 units) throughout: about one run every 0.9 * 2 h
    assert 2 * DAY / (2 * HOUR * 1.1) <= result.runs <= 2 * DAY / (2 * HOUR * 0.8) + 1
