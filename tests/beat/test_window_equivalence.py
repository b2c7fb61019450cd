"""Beat with a window of schedules far smaller than the fleet chooses what beat
holding the whole fleet chooses, in the deadline order and in beat's default
order (relative laxity, late ones shortest first; the certainty rule reads on
where the window's pick may not be the fleet's; without the look-ahead, whose
demand book holds what beat holds): the same schedules at every step, in the
same order, on the simulator's benchmark fleets and on fleets drawn by
hypothesis. Real SQLite stores and Redis; a fake clock
(:mod:`tests.support.lockstep`)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import CronSpec, PeriodicSpec, ScheduleSpec
from celery_dgs.settings import DgsSettings
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.workload import Workload
from tests.support.lockstep import LockstepBeat, lockstep

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
#: The deadline order, seed 000's: most urgent ``should_start_by`` first, late
#: ones too (the window reads the store in that order).
DEADLINE: dict[str, Any] = {"lookahead": False, "laxity_floor": None, "overload_policy": "greedy"}
#: Beat's default order without the look-ahead, the window reading on as far
#: as the certainty rule needs.
DEFAULT: dict[str, Any] = {"lookahead": False, "schedule_window_read_on": None}
ORDERS = pytest.mark.parametrize("order", [DEADLINE, DEFAULT], ids=["deadline", "default"])


def run_both(
    tmp: Path,
    client: redis.Redis,
    specs: list[ScheduleSpec],
    durations: dict[str, float],
    *,
    size: int,
    horizon_s: float,
    slots: int,
    steps: int,
    step_s: float,
    failure_rate: float = 0.0,
    order: dict[str, Any],
) -> tuple[list[list[str]], list[list[str]], int]:
    """The steps' dispatches without and with the window, and the most the windowed beat held."""
    clock = FakeClock(NOW)
    whole = DgsSettings(store_poll_interval=0.001, **order)
    windowed = DgsSettings(
        store_poll_interval=0.001, schedule_window_size=size, schedule_window=horizon_s, **order
    )
    beats = [
        LockstepBeat(tmp / f"{which}.sqlite3", client, clock, s, specs, slots=slots)
        for which, s in (("whole", whole), ("window", windowed))
    ]
    try:
        sent = lockstep(
            beats,
            clock,
            steps=steps,
            step_s=step_s,
            durations=durations,
            failure_rate=failure_rate,
        )
    finally:
        for beat in beats:
            beat.close()
    return sent[0], sent[1], beats[1].most_held


def simulator_fleet(load: float, seed: int) -> Workload:
    """120 schedules of the simulator's generator on 4 slots, periods 30 min to 4 h."""
    return generate(
        GeneratorOptions(
            schedules=120,
            slots=4,
            slots_per_worker=4,
            load=load,
            period_min_s=1800,
            period_max_s=4 * 3600,
            seed=seed,
        )
    )


def run_fleet(
    tmp: Path,
    client: redis.Redis,
    specs: list[ScheduleSpec],
    durations: dict[str, float],
    order: dict[str, Any],
) -> tuple[list[list[str]], list[list[str]], int]:
    """:func:`run_both` on 4 slots with a window of 12, 15 minutes ahead: 80
    steps of 2 minutes."""
    return run_both(
        tmp,
        client,
        specs,
        durations,
        size=12,
        horizon_s=900,
        slots=4,
        steps=80,
        step_s=120,
        order=order,
    )


@pytest.mark.parametrize(
    ("load", "seed"),
    [(0.8, 1), (1.3, 2), (2.0, 3)],
    ids=["load-0.8", "backlog-1.3", "backlog-2.0"],
)
@ORDERS
def test_the_window_chooses_as_the_whole_fleet_on_simulator_fleets(
    tmp_path: Path, redis_client: redis.Redis, load: float, seed: int, order: dict[str, Any]
) -> None:
    workload = simulator_fleet(load, seed)
    specs = [s.spec for s in workload.schedules]
    durations = {s.name: s.duration_s for s in workload.schedules}
    whole, window, most_held = run_fleet(tmp_path, redis_client, specs, durations, order)
    assert sum(map(len, whole)) > 100, "the fleet kept the slots busy"
    assert window == whole
    if order is DEADLINE:
        assert most_held <= 3 * 12, "the window, and the slices read on between start-overs"


durations_st = st.floats(min_value=5, max_value=900)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[ScheduleSpec], dict[str, float]]:
    n = draw(st.integers(min_value=15, max_value=45))
    specs: list[ScheduleSpec] = []
    durations: dict[str, float] = {}
    for i in range(n):
        if draw(st.integers(0, 5)) == 0:
            spec: ScheduleSpec = CronSpec(
                task="w.job",
                configuration=f"c{i:02d}",
                cron_schedule=draw(st.sampled_from(["*/10 * * * *", "5 * * * *", "*/30 * * * *"])),
                cron_max_schedule_duration=timedelta(minutes=draw(st.integers(5, 40))),
            )
        else:
            period = draw(st.integers(min_value=300, max_value=6 * 3600))
            spec = PeriodicSpec(
                task="w.job",
                configuration=f"p{i:02d}",
                scheduling_period=timedelta(seconds=period),
                cooldown_duration=timedelta(
                    seconds=period * draw(st.sampled_from([0.0, 0.3, 0.6]))
                ),
            )
        specs.append(spec)
        durations[spec.name] = draw(durations_st)
    return specs, durations


@hsettings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fleet=fleets(),
    size=st.integers(min_value=3, max_value=10),
    horizon_s=st.sampled_from([300.0, 1200.0, 7200.0]),
    slots=st.integers(min_value=1, max_value=3),
    failure_rate=st.sampled_from([0.0, 0.2]),
    order=st.sampled_from([DEADLINE, DEFAULT]),
)
def test_a_window_far_smaller_than_the_fleet_chooses_alike(
    redis_client: redis.Redis,
    fleet: tuple[list[ScheduleSpec], dict[str, float]],
    size: int,
    horizon_s: float,
    slots: int,
    failure_rate: float,
    order: dict[str, Any],
) -> None:
    specs, durations = fleet
    with tempfile.TemporaryDirectory() as tmp:
        whole, window, _ = run_both(
            Path(tmp),
            redis_client,
            specs,
            durations,
            size=size,
            horizon_s=horizon_s,
            slots=slots,
            steps=40,
            step_s=150,
            failure_rate=failure_rate,
            order=order,
        )
    assert window == whole


def test_a_fleet_registered_at_once_is_served_from_a_bounded_window(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    """Two hundred never-run schedules synced at one moment share their
    ``error_at``: the fleet takes them by name, and so does the window
    (size 10, reading on up to 3 sizes), which goes by each tied pick's name
    against its margin bucket's slice end instead of reading on to its room."""
    specs: list[ScheduleSpec] = [
        PeriodicSpec(task="w.job", configuration=f"s{i:03d}", scheduling_period=timedelta(hours=6))
        for i in range(200)
    ]
    order: dict[str, Any] = {"lookahead": False, "schedule_window_read_on": 3.0}
    durations = {spec.name: 30.0 for spec in specs}
    whole, window, most_held = run_both(
        tmp_path,
        redis_client,
        specs,
        durations,
        size=10,
        horizon_s=3600,
        slots=3,
        steps=30,
        step_s=60,
        order=order,
    )
    assert window == whole
    assert next(names for names in window if names) == ["w.job@s000", "w.job@s001", "w.job@s002"]
    assert most_held < 2 * 10, "the room is 40: the tied picks did not read on to it"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_schedules_whose_blackout_begins_while_indexed_are_chosen_alike(
    tmp_path: Path, redis_client: redis.Redis, seed: int
) -> None:
    """A third of the fleet has a one-hour blackout beginning within the run,
    after it was indexed as eligible. Beat holding the whole fleet re-times
    those entries when their window begins; the window reads them inside it.
    Both choose alike in beat's default order, whose buckets' tops a stale
    entry would otherwise head."""
    workload = simulator_fleet(0.9, seed)
    specs: list[ScheduleSpec] = []
    for i, sched in enumerate(workload.schedules):
        spec = sched.spec
        if i % 3 == 0:
            start = 12 + (i // 3) % 3  # 12:00, 13:00 or 14:00 UTC
            window = [(f"{start:02d}:{(i * 7) % 60:02d}", f"{start + 1:02d}:{(i * 7) % 60:02d}")]
            spec = replace(spec, blackout_periods=window)  # type: ignore[arg-type]
        specs.append(spec)
    durations = {s.name: s.duration_s for s in workload.schedules}
    whole, window, _ = run_fleet(tmp_path, redis_client, specs, durations, DEFAULT)
    assert sum(map(len, whole)) > 100, "the fleet kept the slots busy"
    assert window == whole
