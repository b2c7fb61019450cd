"""The simulator runs beat's window of schedules (``OrderPolicy.window_size``,
``simulate --window``): in the deadline order, and in beat's default order
with the certainty rule, a window far smaller than the fleet gives every
figure of the whole fleet's run; the window reads on."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from benchmarks import window_quality
from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.sim.__main__ import simulate
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.window import SimWindow
from celery_dgs.sim.workload import SimSchedule, Workload, make_workers

DEADLINE = OrderPolicy(overload="greedy", laxity_floor_s=None, lookahead=False)


@pytest.mark.parametrize(("load", "seed"), [(0.8, 1), (1.3, 2)])
def test_a_small_window_gives_the_whole_fleets_figures_in_deadline_order(
    load: float, seed: int
) -> None:
    workload = generate(
        GeneratorOptions(
            schedules=300, slots=6, load=load, horizon_s=43_200, seed=seed, failure_rate=0.05
        )
    )
    whole = Simulator(workload, "dgs", order=DEADLINE).run()
    sim = Simulator(workload, "dgs", order=replace(DEADLINE, window_size=20, window_s=1800))
    windowed = sim.run()
    window = sim.policy.window  # type: ignore[attr-defined]
    assert isinstance(window, SimWindow)
    assert window.reads > 20, "the window read on as time moved and as it emptied"
    assert window.rows_read <= 20 * window.reads, "no read over the window's size"
    assert windowed.error_s == whole.error_s
    assert windowed.late_starts == whole.late_starts
    assert windowed.runs == whole.runs
    assert windowed.max_staleness == whole.max_staleness


@pytest.mark.parametrize(
    ("load", "seed", "long_fraction", "lookahead"),
    [(0.9, 1, 0.0, True), (2.0, 3, 0.0, True), (0.9, 2, 0.3, False), (1.3, 3, 0.3, False)],
)
def test_a_small_full_window_gives_the_whole_fleets_figures_in_the_default_order(
    load: float, seed: int, long_fraction: float, lookahead: bool
) -> None:
    """The certainty rule, reading on as far as it needs, makes every pick the
    fleet's. With long runs the look-ahead is left out: a horizon shorter than
    a run hides the short runs due during it."""
    workload = generate(
        GeneratorOptions(
            schedules=300,
            slots=6,
            load=load,
            horizon_s=43_200,
            seed=seed,
            failure_rate=0.05,
            long_fraction=long_fraction,
        )
    )
    order = OrderPolicy(lookahead=lookahead, window_read_on=None)
    whole = Simulator(workload, "dgs", order=order).run()
    sim = Simulator(workload, "dgs", order=replace(order, window_size=20, window_s=1800))
    windowed = sim.run()
    refusals = sim.policy.refusals  # type: ignore[attr-defined]
    assert refusals > 50, "the rule refused picks, and the window read on"
    assert windowed.error_s == whole.error_s
    assert windowed.late_starts == whole.late_starts
    assert windowed.runs == whole.runs
    assert windowed.max_staleness == whole.max_staleness


def test_beats_default_order_is_the_whole_fleets_while_the_window_holds_every_start() -> None:
    """Not full, and reaching further than the longest run (the look-ahead
    weighs a long run against the short runs due during it): beat's default
    order, look-ahead included, gives the whole fleet's figures."""
    workload = generate(
        GeneratorOptions(
            schedules=80,
            slots=6,
            load=0.85,
            horizon_s=2 * 86_400,
            seed=3,
            long_fraction=0.3,
            long_ratio_min=30,
            long_ratio_max=60,
        )
    )
    longest = max(s.duration_s for s in workload.schedules)
    order = OrderPolicy()
    whole = Simulator(workload, "dgs", order=order).run()
    sim = Simulator(workload, "dgs", order=replace(order, window_size=800, window_s=2 * longest))
    windowed = sim.run()
    assert not sim.policy.window.bounds.full  # type: ignore[attr-defined]
    assert windowed.error_s == whole.error_s
    assert windowed.runs == whole.runs


def test_simulate_takes_the_window_and_says_it() -> None:
    runner = CliRunner()
    result = runner.invoke(
        simulate,
        ["--schedules", "50", "--slots", "2", "--policy", "dgs", "--window", "10"],
    )
    assert result.exit_code in (0, 1), result.output
    assert "window 10 schedules, 3600 s ahead" in result.output
    checked = runner.invoke(
        simulate,
        ["--schedules", "50", "--slots", "2", "--window", "10", "--window-read-on", "unlimited"],
    )
    assert checked.exit_code in (0, 1), checked.output
    assert "picks checked, reading on as far as needed" in checked.output
    for bad_read_on in ("-1", "far", "inf"):
        bad = runner.invoke(
            simulate, ["--schedules", "50", "--slots", "2", "--window-read-on", bad_read_on]
        )
        assert bad.exit_code == 2
        assert "--window-read-on" in bad.output
    bad = runner.invoke(simulate, ["--schedules", "50", "--slots", "2", "--window", "none"])
    assert bad.exit_code == 2
    assert "--window" in bad.output
    assert "a whole number of schedules, or off" in bad.output


@pytest.mark.parametrize("label", ["load 0.7", "load 0.9"])
def test_schedules_with_blackouts_are_chosen_as_the_whole_fleet_chooses(label: str) -> None:
    """The realistic mix gives one schedule in twenty a daily one-hour
    blackout. The whole fleet re-times an indexed schedule when its window
    begins and ends (:mod:`celery_dgs.core.blackout_watch`), as the window's
    reads time it afresh: reading on as far as the certainty rule needs,
    every figure is the whole fleet's."""
    scenario = next(s for s in window_quality.scenarios(True, 1) if s.label == label)
    workload = window_quality.workload_of(scenario, "realistic")
    assert any(s.spec.blackout_periods for s in workload.schedules)
    order = OrderPolicy(window_read_on=None)
    whole = Simulator(workload, "dgs", order=order).run()
    windowed = Simulator(workload, "dgs", order=replace(order, window_size=15, window_s=3600)).run()
    assert windowed.error_s == whole.error_s
    assert windowed.late_starts == whole.late_starts
    assert windowed.runs == whole.runs
    assert windowed.max_staleness == whole.max_staleness


def blackout_backlog() -> Workload:
    """A backlog of 300 schedules on 4 slots, half of them (the more urgent:
    period 2 h, not 4 h) in a daily blackout from 06:00 to 09:00."""
    schedules = [
        SimSchedule(
            PeriodicSpec(
                task="t",
                configuration=f"s{i:03d}",
                scheduling_period=timedelta(hours=2 if i % 2 == 0 else 4),
                blackout_periods=[("06:00", "09:00")] if i % 2 == 0 else (),
            ),
            300.0,
            0.0,
        )
        for i in range(300)
    ]
    start = datetime(2026, 6, 1, tzinfo=timezone.utc)
    return Workload(schedules, make_workers(4), horizon_s=86400, start=start, seed=1)


@pytest.mark.parametrize(
    "order",
    [OrderPolicy(overload="greedy", lookahead=False), OrderPolicy(window_read_on=0)],
    ids=["deadline", "default, read-on 0"],
)
def test_eligible_schedules_in_a_blackout_begun_since_are_not_held(order: OrderPolicy) -> None:
    """When the blackout begins, the window's most urgent may not start and
    its eligible part reads on: the schedules whose kept times (written
    before 06:00) say they may start but whose blackout says not are kept
    past it and not held (beat's store does the same), so the window holds
    a few dozen, where it held every such schedule it read; the figures are
    the whole fleet's."""
    workload = blackout_backlog()
    whole = Simulator(workload, "dgs", order=order).run()
    sim = Simulator(workload, "dgs", order=replace(order, window_size=10, window_s=3600))
    windowed = sim.run()
    assert windowed.error_s == whole.error_s
    assert windowed.runs == whole.runs
    window = sim.policy.window  # type: ignore[attr-defined]
    assert isinstance(window, SimWindow)
    assert window.most_held <= 40, f"held {window.most_held}"


def gpu_and_default_pools(
    window_size: int | None, gpu_worker: bool
) -> tuple[Simulator, list[SimSchedule], list[SimSchedule]]:
    """1,500 schedules of pool ``gpu`` (1-minute runs, hourly), more than a
    plan looks past and more urgent than 20 of the default pool (6-hourly),
    whose 2 slots have one worker; ``gpu_worker``: and one of ``gpu`` with 1
    slot. The simulator of 4 hours, and the two pools' schedules."""
    start = datetime(2026, 3, 2, tzinfo=timezone.utc)
    gpu = [
        SimSchedule(
            PeriodicSpec(
                task="t.gpu",
                configuration=f"g{i}",
                scheduling_period=timedelta(hours=1),
                pool="gpu",
            ),
            60.0,
        )
        for i in range(1_500)
    ]
    default = [
        SimSchedule(
            PeriodicSpec(task="t.cpu", configuration=f"c{i}", scheduling_period=timedelta(hours=6)),
            60.0,
        )
        for i in range(20)
    ]
    workers = make_workers(2)
    if gpu_worker:
        workers.append(replace(make_workers(1, queue="gpu")[0], name="celery@gpu", node="gpu"))
    workload = Workload(gpu + default, workers, horizon_s=4 * 3600, start=start, seed=1)
    order = OrderPolicy(window_size=window_size, window_s=3600)
    return Simulator(workload, "dgs", order=order), gpu, default


@pytest.mark.parametrize("window_size", [None, 20])
def test_a_pool_no_worker_consumes_keeps_no_slot_idle(window_size: int | None) -> None:
    """More schedules than a plan looks past (1,000) are in a pool no worker
    consumes, and more urgent: the simulator sets them aside as beat does,
    so the default pool's run on its idle slots, and a window does not hold
    the unserved backlog."""
    sim, _gpu, _default = gpu_and_default_pools(window_size, gpu_worker=False)
    result = sim.run()
    assert result.runs >= 20, "every served schedule ran"
    window = sim.policy.window  # type: ignore[attr-defined]
    if window_size is not None:
        # The certainty rule's room (11 windows) and an eligible read, not the backlog.
        assert window.most_held <= 12 * window_size


@pytest.mark.parametrize("window_size", [None, 20])
def test_a_busy_pool_keeps_no_other_pools_slot_idle(window_size: int | None) -> None:
    """More schedules than a plan looks past (1,000) are in a pool whose one
    slot is always busy, and more urgent: the simulator lets them wait for
    it as beat does, so every schedule of the default pool runs on its idle
    slots, and the busy pool's slot stays busy."""
    sim, gpu, default = gpu_and_default_pools(window_size, gpu_worker=True)
    sim.run()
    runs = {name: st.run for name, st in sim.states.items()}
    assert all(runs[s.name] >= 1 for s in default), "every default-pool schedule ran"
    gpu_runs = sum(runs[s.name] for s in gpu)
    assert gpu_runs >= 4 * 60 - 5, f"the gpu slot stayed busy: {gpu_runs} runs of 60 s in 4 h"
    if window_size is not None:
        # A plan's depth (1,000), a read and the bounded wait, not the backlog
        # (1,520 held without the bound): the rest is let go of and read again.
        assert sim.policy.window.most_held < 1_200  # type: ignore[attr-defined]
