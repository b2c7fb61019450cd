"""Deferred checks in the simulator: each check runs at or after its time,
asks for its second check and ends (the core's check_end, as in the
stores); the three orders against schedules differ as documented
(docs/simulator.md, "Deferred checks")."""

from __future__ import annotations

from celery_dgs.sim.check_orders import compare_check_orders, run_check_order
from celery_dgs.sim.checks import CheckStream, with_checks
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.loop import Simulator

STREAM = CheckStream(per_hour=30, delay_s=600, duration_s=20, again_s=300, within_s=300)


def small_fleet(load: float) -> object:
    return generate(
        GeneratorOptions(
            schedules=20, slots=2, load=load, horizon_s=8 * 3600.0, warmup_s=3600.0, seed=3
        )
    )


def test_each_check_runs_twice_at_or_after_its_times_and_ends() -> None:
    fleet = small_fleet(0.5)
    workload, stats, due = with_checks(fleet, STREAM, seed=3)  # type: ignore[arg-type]
    trace: list[tuple[float, str, str]] = []
    sim = Simulator(workload, "dgs", initial_stats=stats, trace=trace)
    sim.run()
    starts: dict[str, list[float]] = {}
    for t, name, _ in trace:
        if name in due:
            starts.setdefault(name, []).append(t)
    finished = [n for n, at in due.items() if at + 2 * STREAM.again_s < sim.horizon - 3600]
    assert len(finished) > 50
    for name in finished:
        first, second = starts[name]
        assert first >= due[name] - 1e-3  # (microsecond rounding of the due time)
        assert second >= first + STREAM.again_s  # asked after the first run's end
        state = sim.states[name]
        assert state.check_count == 2
        assert state.disabled is not None  # ended: held, never dispatched again


def test_checks_first_is_prompt_checks_last_waits_under_load() -> None:
    results = {
        r.order: r
        for r in compare_check_orders(
            0.95,
            seed=3,
            stream=STREAM,
            schedules=40,
            slots=4,
            horizon_s=12 * 3600.0,
            warmup_s=3600.0,
        )
    }
    assert results["checks-first"].check_p50_late_s < results["deadline"].check_p50_late_s
    assert results["deadline"].check_p99_late_s <= results["checks-last"].check_p99_late_s
    quiet = run_check_order(small_fleet(0.2), STREAM, "deadline")  # type: ignore[arg-type]
    assert quiet.schedule_error_s == 0.0
    assert quiet.check_p50_late_s < STREAM.within_s
