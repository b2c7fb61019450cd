"""Beat's window of deferred checks: it holds only the checks due within
``check_window`` (and at most ``check_window_size``), reads the next ones as
time moves on or the window empties, drops a check moved past the window,
dispatches due checks in deadline order beside schedules, and never holds
an ended one. Real Redis and SQLite; an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.store.check_types import NewCheck
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Recorder, fake_clock_engine

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
M = timedelta(minutes=1)


def check(key: str) -> CheckSpec:
    return CheckSpec(task="t.check", key=key, within=timedelta(minutes=2))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}")
    yield s
    s.close()


def make_engine(
    store: SqlScheduleStore,
    client: redis.Redis,
    clock: FakeClock,
    publish: Recorder,
    **settings: object,
) -> BeatEngine:
    return fake_clock_engine(store, client, clock, publish, slots=3, **settings)


def test_beat_holds_only_the_window_and_reads_on_as_time_moves(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    store.add_checks([NewCheck(check(f"k{i:02d}"), NOW + i * M) for i in range(30)], NOW)
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, check_window=600)
    engine.load()
    assert engine.state.checks == {f"t.check@check:k{i:02d}" for i in range(11)}  # due by +10 min
    engine.tick()
    assert publish.names() == ["t.check@check:k00"]  # only k00 is due
    clock.advance(6 * M)  # the window's end is now less than half a window ahead
    engine.tick()
    assert len(engine.state.checks) == 17, "k00 (dispatched) to k16: read up to now + 10 min"
    assert "t.check@check:k16" in engine.state.checks
    assert "t.check@check:k17" not in engine.state.checks


def test_a_full_window_reads_the_next_checks_as_it_empties(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    # 40 overdue checks (beat was down): at most 10 held, the most overdue first.
    store.add_checks([NewCheck(check(f"k{i:02d}"), NOW - (40 - i) * M) for i in range(40)], NOW)
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, check_window_size=10)
    engine.load()
    assert engine.state.checks == {f"t.check@check:k{i:02d}" for i in range(10)}
    engine.tick()
    assert publish.names() == [f"t.check@check:k{i:02d}" for i in range(3)]  # 3 slots
    # The three end (done): their rows become inactive and leave the window.
    store.cancel_checks([f"t.check@check:k{i:02d}" for i in range(3)], NOW)
    for name in [f"t.check@check:k{i:02d}" for i in range(3)]:
        engine.dispatches.take_back(name, engine.state.pending[name].dispatch_id)
    engine.loader.refresh()
    engine.tick()
    assert not {f"t.check@check:k{i:02d}" for i in range(3)} & engine.state.checks
    assert publish.names() == [f"t.check@check:k{i:02d}" for i in range(3, 6)]
    # Fewer than half the window's size held: the next ones are read.
    store.cancel_checks([f"t.check@check:k{i:02d}" for i in range(3, 6)], NOW)
    engine.loader.refresh()
    engine.loader.read_windows()
    assert len(engine.state.checks) == 10
    assert max(engine.state.checks) == "t.check@check:k15"


def test_a_check_moved_past_the_window_is_dropped_and_comes_back_when_due(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    store.sync([PeriodicSpec(task="t.p", scheduling_period=timedelta(hours=1))], NOW)
    store.add_checks([NewCheck(check("near"), NOW + M)], NOW)
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish)
    engine.load()
    assert engine.state.checks == {"t.check@check:near"}
    store.add_checks([NewCheck(check("near"), NOW + timedelta(hours=2))], NOW, on_exists="move")
    engine.loader.refresh()
    assert engine.state.checks == set()
    assert "t.check@check:near" not in engine.state.tracked
    clock.advance(timedelta(hours=2))
    engine.tick()
    assert "t.check@check:near" in publish.names()


def test_due_checks_and_schedules_share_the_deadline_order(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    # Never ran, registered 59 min ago: its deadline (an hour) is in 1 min.
    store.sync([PeriodicSpec(task="t.p", scheduling_period=timedelta(hours=1))], NOW - M * 59)
    # Due 10 min ago, within 2 min: its deadline passed 8 min ago; it goes first.
    store.add_checks([NewCheck(check("late"), NOW - 10 * M)], NOW)
    # Due now, within 2 min: its deadline is after t.p's.
    store.add_checks([NewCheck(check("now"), NOW)], NOW)
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, max_dispatches_per_tick=1)
    engine.load()
    order = []
    for _ in range(3):
        engine.tick()
        order += publish.names()
    assert order == ["t.check@check:late", "t.p", "t.check@check:now"]


def test_beat_prunes_ended_checks_past_their_retention(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    store.add_checks([NewCheck(check("old"), NOW), NewCheck(check("new"), NOW)], NOW)
    store.cancel_checks(["t.check@check:old"], NOW - timedelta(days=2))
    store.cancel_checks(["t.check@check:new"], NOW)
    engine = make_engine(store, redis_client, clock, Recorder(), check_retention=86400)
    engine.load()
    clock.advance(timedelta(hours=1))
    engine.tick()  # the first tick prunes (then hourly)
    assert [r.key for r in store.check_history()] == ["new"]


def test_look_ahead_leaves_checks_out_of_its_demand_book(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    store.sync([PeriodicSpec(task="t.p", scheduling_period=timedelta(hours=1))], NOW)
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, lookahead=True)
    engine.load()
    store.add_checks([NewCheck(check("a"), NOW - M)], NOW)  # reaches beat by its change poll
    engine.tick()
    assert sorted(publish.names()) == ["t.check@check:a", "t.p"]
