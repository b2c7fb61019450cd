"""The simulator against hand-computed small cases: two schedules, one slot."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.core.spec import CronSpec, PeriodicSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.loop import Simulator, simulate
from celery_dgs.sim.workload import Outage, SimSchedule, Workload, make_workers


def two_on_one_slot(cooldown: float = 20.0, **options: object) -> Workload:
    """a and b: period 100 s, runs of exactly 30 s, one slot, never ran at t=0."""
    scheds = [
        SimSchedule(
            PeriodicSpec(
                task=t,
                scheduling_period=timedelta(seconds=100),
                cooldown_duration=timedelta(seconds=cooldown),
            ),
            30.0,
            0.0,
        )
        for t in ("a", "b")
    ]
    opts: dict[str, object] = {"horizon_s": 1000.0, "warmup_s": 0.0, "warm_start": False}
    opts.update(options)
    return Workload(scheds, make_workers(1), **opts)  # type: ignore[arg-type]


def starts(workload: Workload, policy: str) -> list[tuple[float, str]]:
    trace: list[tuple[float, str, str]] = []
    Simulator(workload, policy, trace=trace).run()
    return [(t, name) for t, name, _ in trace]


def test_dgs_alternates_and_never_errors() -> None:
    # t=0: both eligible, same should_start_by (100): a by name; b at 30.
    # At 60 a (can 50, should 0+100-30=70) goes; b can 80. At 90 b (should 100).
    # From there on each runs every 60 s, well inside its 100 s period.
    got = starts(two_on_one_slot(), "dgs")
    assert got[:6] == [(0, "a"), (30, "b"), (60, "a"), (90, "b"), (120, "a"), (150, "b")]
    result = simulate(two_on_one_slot(), "dgs")
    assert result.error_s == 0
    assert result.error_episodes == 0
    assert result.utilization == pytest.approx(1.0)


def test_beat_enqueues_every_period_and_is_error_until_each_run_ends() -> None:
    # Celery beat: both enqueued at 100, 200, ...: a runs 100-130, b 130-160.
    # First cycle: deadlines 100 (registered + period): a ERROR (100, 130], b (100, 160].
    # Later cycles (200..900, 8 of them): a's deadline is its previous start + 100 = the
    # enqueue time, so ERROR for its 30 s run; b's is the previous start (+30) + 100,
    # ERROR for its 30 s too: 60 s a cycle. Total 90 + 8 * 60 = 570 s.
    got = starts(two_on_one_slot(), "beat")
    assert got[:4] == [(100, "a"), (130, "b"), (200, "a"), (230, "b")]
    result = simulate(two_on_one_slot(), "beat")
    assert result.error_s == pytest.approx(570.0)
    assert result.error_episodes == 18
    assert result.utilization == pytest.approx(540 / 1000)
    assert result.max_staleness == pytest.approx(1.3)  # b: start 30 -> next good end at 160


def test_fifo_serves_the_oldest_due_first() -> None:
    # cooldown 0: a (can 0) then b (can 0); at 30 a is due again (can 30) but b
    # has waited since 0: FIFO runs b... already running? No: b started at 30.
    # At 60: a (can 30) before b (can 60).
    got = starts(two_on_one_slot(cooldown=0.0), "fifo")
    assert got[:4] == [(0, "a"), (30, "b"), (60, "a"), (90, "b")]


def test_dgs_greedy_reruns_the_most_urgent_without_cooldown() -> None:
    # cooldown 0: at 30 a is eligible again with should 0+100-30 = 70, b waits
    # with should 100: the greedy order reruns a (a wasted run: 30 < 0 + 50).
    got = starts(two_on_one_slot(cooldown=0.0), "dgs")
    assert got[:3] == [(0, "a"), (30, "a"), (60, "b")]
    assert simulate(two_on_one_slot(cooldown=0.0), "dgs").wasted_runs >= 1


def test_outage_interrupts_and_recovery_is_measured() -> None:
    # All workers down 200-500: the run in progress at 200 is interrupted; the
    # deadlines pass during the outage; after 500 a runs 500-530, b 530-560:
    # no ERROR from 560 on, so recovery takes 60 s.
    workload = two_on_one_slot(outages=[Outage(200.0, 500.0)])
    trace: list[tuple[float, str, str]] = []
    result = Simulator(workload, "dgs", trace=trace).run()
    assert [t for t, _, _ in trace if 200 <= t < 560] == [500, 530]
    assert result.interrupted == 1
    assert result.recovery_s == pytest.approx(60.0)


def test_same_seed_same_result_and_different_seed_differs() -> None:
    opts = GeneratorOptions(
        schedules=60, slots=3, load=1.0, horizon_s=86400.0, failure_rate=0.05, seed=7
    )
    first = simulate(generate(opts), "dgs").to_dict()
    again = simulate(generate(opts), "dgs").to_dict()
    first.pop("wall_s"), again.pop("wall_s")
    assert first == again
    other = simulate(generate(GeneratorOptions(**{**opts.__dict__, "seed": 8})), "dgs").to_dict()
    other.pop("wall_s")
    assert other != first


def test_dispatch_rechecks_blackouts_like_beat() -> None:
    # Start Monday 00:00 UTC; a (never ran, period 3000, should 3000) has a blackout
    # 00:10-00:20 (600-1200 s). b last succeeded at -9500 (period 10000, 700 s
    # runs): should -200, so b takes the only slot 0-700 while a stays indexed as
    # eligible (can 0). At 700 a is the most urgent (b's should is now 9300), but
    # the re-check at dispatch time finds it inside its window: b goes again
    # (700-1400) and a runs at 1400 (plain deadline order among on-time schedules).
    a = SimSchedule(
        PeriodicSpec(
            task="a",
            scheduling_period=timedelta(seconds=3000),
            blackout_periods=[("00:10", "00:20")],
        ),
        10.0,
        0.0,
    )
    b = SimSchedule(PeriodicSpec(task="b", scheduling_period=timedelta(seconds=10000)), 700.0, 0.0)
    workload = Workload([a, b], make_workers(1), horizon_s=3000.0, warmup_s=0.0, warm_start=False)
    t0 = workload.start
    b_stats = ScheduleStats(
        registered_at=t0 - timedelta(days=1),
        last_good_start_at=t0 - timedelta(seconds=9500),
        last_good_end_at=t0 - timedelta(seconds=8800),
        failure_count=0,
        average_good_duration=timedelta(seconds=700),
    )
    trace: list[tuple[float, str, str]] = []
    # Plain deadline order for the on-time ones: in relative-laxity order (dgs)
    # b (laxity 9300/760 at 1400) would go before a (1600/60), see test_laxity_*.
    order = OrderPolicy(laxity_floor_s=None)
    Simulator(workload, "dgs", order=order, initial_stats={"b": b_stats}, trace=trace).run()
    assert [(t, name) for t, name, _ in trace][:3] == [(0, "b"), (700, "b"), (1400, "a")]


def test_cron_schedule_runs_at_each_fire_time_under_dgs_and_beat() -> None:
    # Every 10 minutes, within 5 minutes, 60 s runs, one slot, one day from
    # midnight: both policies start at each fire time (144 a day), no ERROR.
    spec = CronSpec(
        task="c", cron_schedule="*/10 * * * *", cron_max_schedule_duration=timedelta(minutes=5)
    )
    cron = SimSchedule(spec, 60.0, 0.0)
    workload = Workload([cron], make_workers(1), horizon_s=86400.0, warmup_s=0.0, warm_start=False)
    for policy in ("dgs", "beat"):
        got = starts(workload, policy)
        assert [t for t, _ in got[:3]] == [600, 1200, 1800], policy
        result = simulate(workload, policy)
        assert result.error_s == 0, policy
        assert result.runs == 144  # 00:10 ... 24:00 (the horizon itself is included)
