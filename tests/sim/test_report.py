"""The simulator's workload line: durations in words, a small demand shown
with its significant digits."""

from __future__ import annotations

from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.report import slots_text, workload_summary


def test_a_small_demand_does_not_read_as_none() -> None:
    assert [slots_text(x) for x in (0.000343, 0.0, 0.5, 12.345)] == [
        "0.00034",
        "0.00",
        "0.50",
        "12.35",
    ]


def test_the_horizon_and_warm_up_are_durations() -> None:
    workload = generate(GeneratorOptions(schedules=5, slots=2, load=0.5, horizon_s=7200.0))
    line = workload_summary(workload)
    assert ", horizon 2h, warm-up " in line, line
    assert "0.0833d" not in line
    assert line.startswith("5 schedules, 2 slots, load 0.")
    searching = workload_summary(workload, searching=True)
    demand = slots_text(workload.load() * workload.slots)
    assert searching.startswith(f"5 schedules, demand {demand} slots, horizon 2h"), searching


def test_the_wasted_column_is_explained_when_a_row_has_any() -> None:
    from celery_dgs.sim.loop import simulate
    from celery_dgs.sim.report import wasted_note
    from tests.sim.test_small_cases import two_on_one_slot

    eager = simulate(two_on_one_slot(cooldown=0.0), "dgs")
    assert eager.wasted_runs >= 1
    note = wasted_note([eager])
    assert note is not None
    assert note.startswith("wasted: runs started less than 0.5 of a period after the previous")
    calm = simulate(two_on_one_slot(cooldown=60.0), "dgs")
    assert calm.wasted_runs == 0
    assert wasted_note([calm]) is None
