"""Beat's round with the look-ahead admission (``dgs_lookahead``): a real
BeatEngine, real Redis, a real SQLite store and an injected clock, on seed
000's example: two weekly 12-hour jobs that are eligible, an hourly one-minute
job in its cooldown, and two slots. Whichever weekly job goes first, the other
would leave the hourly job no slot for 12 hours."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.errors import SettingsError
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, Recorder

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
WEEKLY, WEEKLY2 = (
    PeriodicSpec(task=t, scheduling_period=timedelta(days=7), cooldown_duration=timedelta(days=3))
    for t in ("t.weekly", "t.weekly2")
)
HOURLY = PeriodicSpec(
    task="t.hourly", scheduling_period=timedelta(hours=1), cooldown_duration=timedelta(minutes=45)
)
#: The second weekly job last ran 12 hours from NOW - 3.5 days: eligible at NOW,
#: should_start_by NOW + 3 days (the first one: NOW - 12 h and NOW + 2.5 days).
WEEKLY2_DUE = NOW + timedelta(days=3)


def record_run(store: SqlScheduleStore, name: str, started: datetime, seconds: float) -> None:
    run_id = uuid.uuid4().hex
    token = (store.get(name).current_token or 0) + 1
    store.record_run_start(
        schedule=name,
        run_id=run_id,
        dispatch_id=None,
        owner_node="w1",
        owner_name="celery@w1",
        owner_tag=run_id,
        token=token,
        started_at=started,
    )
    store.record_run_end(
        run_id=run_id, outcome="success", ended_at=started + timedelta(seconds=seconds)
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}")
    s.sync([WEEKLY, WEEKLY2, HOURLY], NOW - timedelta(days=8))
    record_run(s, WEEKLY.name, NOW - timedelta(days=4), 12 * 3600)
    record_run(s, WEEKLY2.name, NOW - timedelta(days=3, hours=12), 12 * 3600)
    # Ended 10 minutes ago: eligible at NOW + 35 min, should_start_by NOW + 48 min.
    record_run(s, HOURLY.name, NOW - timedelta(minutes=11), 60)
    yield s
    s.close()


def engine_of(
    client: redis.Redis, store: SqlScheduleStore, clock: FakeClock, slots: int, lookahead: bool
) -> tuple[BeatEngine, Recorder]:
    keys = KeySpace(f"look{uuid.uuid4().hex[:8]}")
    registry = WorkerRegistry(client, keys, ttl=300)
    registry.register(
        WorkerInfo(
            name="celery@w1", node="w1", queues=("celery",), slots=slots, pool="prefork", pid=1
        )
    )
    publish = Recorder()
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, keys, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(client, keys),
        publish=publish,
        settings=DgsSettings(store_poll_interval=1000, lookahead=lookahead),
        clock=clock,
        monotonic=Mono(),
    )
    engine.load()
    return engine, publish


def test_plain_order_gives_both_slots_to_the_weekly_jobs(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    engine, publish = engine_of(redis_client, store, FakeClock(NOW), 2, lookahead=False)
    engine.tick()
    assert publish.names() == [WEEKLY.name, WEEKLY2.name]  # the hourly job waits 12 hours


def test_beat_holds_the_second_weekly_job_back_and_the_hourly_job_gets_the_slot(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    clock = FakeClock(NOW)
    engine, publish = engine_of(redis_client, store, clock, 2, lookahead=True)
    engine.tick()
    assert publish.names() == [WEEKLY.name]  # the second one is held: a slot waits
    times = engine.ranking.index.times(WEEKLY2.name)
    assert times is not None
    assert NOW.timestamp() < times.can_start_by <= NOW.timestamp() + 600
    clock.set(NOW + timedelta(minutes=36))
    engine.tick()
    assert publish.names() == [HOURLY.name]


def test_beat_starts_both_weekly_jobs_when_a_third_slot_is_free(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    engine, publish = engine_of(redis_client, store, FakeClock(NOW), 3, lookahead=True)
    engine.tick()
    assert publish.names() == [WEEKLY.name, WEEKLY2.name]  # nothing would be late


def test_the_held_job_waits_past_due_for_the_long_run_and_goes_when_it_ends(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    clock = FakeClock(NOW)
    engine, publish = engine_of(redis_client, store, clock, 2, lookahead=True)
    engine.tick()
    assert publish.names() == [WEEKLY.name]
    pend = engine.state.pending[WEEKLY.name]
    assert engine.leases.acquire(
        WEEKLY.name,
        owner_node="w1",
        owner_name="celery@w1",
        owner_tag="run-1",
        dispatch_id=pend.dispatch_id,
    ).granted
    # The hourly job kept running (in its cooldown again); the first weekly run
    # goes on past its expected 12 hours. Two weekly runs on two slots would
    # leave the hourly job none, so the second waits past its should_start_by.
    record_run(store, HOURLY.name, WEEKLY2_DUE - timedelta(minutes=3), 60)
    engine.loader.refresh()
    for at in (
        WEEKLY2_DUE - timedelta(seconds=60),
        WEEKLY2_DUE + timedelta(seconds=1),
        WEEKLY2_DUE + timedelta(hours=1),
    ):
        clock.set(at)
        engine.tick()
        assert WEEKLY2.name not in publish.names()  # the hourly job goes at +1 h
    # The first run ends: the second goes at its next look, within 1 % of its run time.
    record_run(store, WEEKLY.name, NOW, 3 * 86400 + 3600)
    assert engine.leases.release(WEEKLY.name, "run-1")
    clock.set(WEEKLY2_DUE + timedelta(hours=1, seconds=432))
    engine.tick()
    assert publish.names() == [WEEKLY2.name]


def test_the_setting_is_on_by_default_and_must_be_a_boolean() -> None:
    assert DgsSettings.from_conf({}).lookahead is True
    assert DgsSettings.from_conf({"dgs_lookahead": False}).lookahead is False
    with pytest.raises(SettingsError, match="dgs_lookahead must be True or False, got 'yes'"):
        DgsSettings.from_conf({"dgs_lookahead": "yes"})


def test_a_new_weekly_schedule_without_runs_counts_as_its_tasks_12_hours(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    """A third weekly schedule of ``t.weekly``, added at NOW, has no run yet
    (0 s expected): it takes its task's 12 hours, so on three slots it is the
    third long run and is held for the hourly job (counted as 0 s it would
    start)."""
    new = PeriodicSpec(
        task="t.weekly",
        configuration="new",
        scheduling_period=timedelta(days=7),
        cooldown_duration=timedelta(days=3),
    )
    store.sync([WEEKLY, WEEKLY2, HOURLY, new], NOW)
    assert store.get(new.name).stats.average_good_duration is None
    engine, publish = engine_of(redis_client, store, FakeClock(NOW), 3, lookahead=True)
    engine.tick()
    assert publish.names() == [WEEKLY.name, WEEKLY2.name]
    assert engine.ranking.demand is not None
    assert engine.ranking.demand.expected_s(new.name, 0.0) == pytest.approx(12 * 3600)
