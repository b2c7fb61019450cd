"""Beat's window of schedules (``dgs_schedule_window_size``): it loads only the
schedules that can start within the window, the most urgent first; reads on
as time moves and as it dispatches; takes a lister's changes at the next poll;
lets go of a schedule whose new row is past the window and reads it again
when the window reaches it. Real Redis and SQLite; an injected clock."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from celery_dgs.beat import loading
from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Recorder, fake_clock_engine

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
M = timedelta(minutes=1)
H = timedelta(hours=1)


def spec(i: int, period: timedelta = 6 * H, cooldown: timedelta = timedelta(0)) -> PeriodicSpec:
    return PeriodicSpec(
        task="t.job",
        configuration=f"s{i:04d}",
        scheduling_period=period,
        cooldown_duration=cooldown,
    )


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
    *,
    slots: int = 2,
    **settings: object,
) -> BeatEngine:
    return fake_clock_engine(
        store,
        client,
        clock,
        publish,
        slots=slots,
        monotonic=lambda: clock.now().timestamp(),
        **settings,
    )


def run_now(engine: BeatEngine, store: SqlScheduleStore, name: str, at: datetime) -> None:
    """The dispatched ``name`` runs and ends at ``at`` (its dispatch record taken)."""
    engine.dispatches.take_back(name, engine.state.pending[name].dispatch_id)
    run_id = uuid.uuid4().hex
    store.record_run_start(
        schedule=name,
        run_id=run_id,
        dispatch_id=None,
        owner_node="a",
        owner_name="celery@a",
        owner_tag=run_id,
        token=(store.get(name).current_token or 0) + 1,
        started_at=at,
    )
    store.record_run_end(run_id=run_id, outcome="success", ended_at=at + M)


def schedules(engine: BeatEngine) -> set[str]:
    return set(engine.state.tracked) - engine.state.checks


def test_beat_loads_only_what_can_start_within_the_window_and_reads_on(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    # Never ran: each can start at its registration, 10 minutes apart.
    for i in range(30):
        store.upsert_runtime([spec(i)], NOW + i * 10 * M)
    publish = Recorder()
    engine = make_engine(
        store, redis_client, clock, publish, schedule_window_size=100, schedule_window=3600
    )
    engine.load()
    assert schedules(engine) == {f"t.job@s{i:04d}" for i in range(7)}, "can start by +60 min"
    clock.advance(40 * M)  # the window's end is less than half a window ahead
    engine.tick()
    assert schedules(engine) >= {f"t.job@s{i:04d}" for i in range(7, 11)}
    assert "t.job@s0011" not in schedules(engine)


def test_beat_holding_a_large_fleet_whole_says_a_window_would_not(
    store: SqlScheduleStore,
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loading, "WINDOW_ADVICE_ROWS", 20)
    store.upsert_runtime([spec(i) for i in range(20)], NOW)

    def advice(**settings: object) -> list[logging.LogRecord]:
        engine = make_engine(store, redis_client, FakeClock(NOW), Recorder(), **settings)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="celery_dgs.beat"):
            engine.loader.load()
        return [r for r in caplog.records if "dgs_schedule_window_size" in r.getMessage()]

    (said,) = advice()
    assert said.getMessage().startswith("celery-dgs beat: holding all 20 active schedules")
    assert advice(schedule_window_size=100) == [], "a window holds what can start within it"
    store.remove_runtime(["t.job@s0000"], NOW)
    assert advice() == [], "fewer than WINDOW_ADVICE_ROWS"


def test_under_a_backlog_beat_holds_the_most_urgent_and_reads_the_next_as_it_dispatches(
    store: SqlScheduleStore, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(NOW)
    # All eligible; the older the registration, the nearer the deadline.
    for i in range(200):
        store.upsert_runtime([spec(i)], NOW - 5 * H + i * M)
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, slots=4, schedule_window_size=10)
    with caplog.at_level(logging.INFO, logger="celery_dgs.beat"):
        assert engine.loader.load() == 10
    assert schedules(engine) == {f"t.job@s{i:04d}" for i in range(10)}
    full = [r for r in caplog.records if "schedule window is full" in r.getMessage()]
    assert [r.levelno for r in full] == [logging.WARNING], "the default order: said once"
    assert "the order's picks are checked against the fleet's" in full[0].message
    sent: list[str] = []
    for _ in range(12):
        engine.tick()
        names = publish.names()
        for name in names:
            run_now(engine, store, name, clock.now())
        sent += names
        clock.advance(M)
        assert len(schedules(engine)) <= 10 + 4 + 5, "the window, its runs, one slice read on"
    assert sent == [f"t.job@s{i:04d}" for i in range(48)], "the deadline order, none skipped"


def test_a_listers_changes_reach_beat_at_the_next_poll(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    for i in range(20):
        store.upsert_runtime([spec(i)], NOW + i * 10 * M)
    publish = Recorder()
    engine = make_engine(
        store, redis_client, clock, publish, schedule_window_size=100, schedule_window=1800
    )
    engine.load()
    assert "t.job@s0010" not in schedules(engine)
    # A new schedule that can start now, one far ahead, and a removal.
    store.upsert_runtime([spec(100)], NOW)
    store.upsert_runtime([spec(101)], NOW + 5 * H)
    store.remove_runtime(["t.job@s0001"], NOW)
    engine.tick()
    assert "t.job@s0100" in schedules(engine)
    assert "t.job@s0101" not in schedules(engine), "past the window: read when it is reached"
    assert "t.job@s0001" not in schedules(engine)
    assert "t.job@s0100" in engine.state.pending, "dispatched at that tick"


def test_a_schedule_whose_new_row_is_past_the_window_is_let_go_and_read_again(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    clock = FakeClock(NOW)
    store.upsert_runtime([spec(0, period=2 * H, cooldown=H)], NOW)
    store.upsert_runtime([spec(1, period=2 * H, cooldown=H)], NOW + 20 * M)
    publish = Recorder()
    engine = make_engine(
        store, redis_client, clock, publish, schedule_window_size=100, schedule_window=1800
    )
    engine.load()
    engine.tick()
    assert publish.names() == ["t.job@s0000"]
    run_now(engine, store, "t.job@s0000", NOW)
    clock.advance(M)
    engine.tick()  # the run's end is read: it can next start in 1 h, past the window
    assert "t.job@s0000" not in schedules(engine)
    assert "t.job@s0001" in schedules(engine)
    assert engine.state.leaving == set()
    clock.advance(2 * H)
    engine.tick()
    engine.tick()
    assert "t.job@s0000" in publish.names(), "read again when the window reached it"


def test_beat_says_when_a_run_is_longer_than_the_windows_horizon(
    store: SqlScheduleStore, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(NOW)
    long_run = PeriodicSpec(
        task="t.job",
        configuration="long",
        scheduling_period=timedelta(days=7),
        duration_override=2 * H,
    )
    store.upsert_runtime([spec(0), long_run], NOW)
    engine = make_engine(
        store, redis_client, clock, Recorder(), schedule_window_size=100, schedule_window=1800
    )
    with caplog.at_level(logging.WARNING, logger="celery_dgs.beat"):
        engine.load()
        engine.tick()
    said = [
        r.getMessage()
        for r in caplog.records
        if "longer than dgs_schedule_window" in r.getMessage()
    ]
    assert said == [
        "celery-dgs beat: a schedule runs 7200 s, longer than dgs_schedule_window (1800 s): "
        "the look-ahead sees only the runs due within the window; set it to the longest "
        "expected run or more"
    ]


def test_a_full_window_none_of_whose_schedules_is_eligible_reads_only_the_eligible_past_it(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    """The eligible part: the window's most urgent start in 30 minutes; beat
    reads past its end only the schedules that can start now, holds none
    that cannot, and knows when the next one past it becomes eligible."""
    clock = FakeClock(NOW)
    store.upsert_runtime([spec(i, period=H) for i in range(4)], NOW + 30 * M)  # urgent, later
    store.upsert_runtime([spec(i) for i in range(10, 13)], NOW - 10 * M)  # eligible, past it
    store.upsert_runtime([spec(i) for i in range(20, 40)], NOW + 40 * M)  # neither
    store.upsert_runtime([spec(50)], NOW + 10 * M)  # past it, eligible in 10 minutes
    publish = Recorder()
    engine = make_engine(
        store, redis_client, clock, publish, slots=4, schedule_window_size=4, schedule_window=3600
    )
    engine.load()
    assert schedules(engine) == {f"t.job@s{i:04d}" for i in range(4)}
    engine.tick()
    assert publish.names() == ["t.job@s0010", "t.job@s0011", "t.job@s0012"], "by deadline"
    held = schedules(engine)
    assert not any(f"t.job@s{i:04d}" in held for i in (*range(20, 40), 50)), held
    wake = engine.loader.window_wake()
    assert wake == (NOW + 10 * M).timestamp(), "when s0050 becomes eligible"
    clock.advance(10 * M)
    engine.tick()
    assert publish.names()[-1] == "t.job@s0050", "dispatched as it became eligible"


def eligible_past_a_later_window(store: SqlScheduleStore) -> None:
    """A window of 4 whose schedules start in 30 minutes, and ten eligible
    schedules past it (s0010..s0019, in deadline order)."""
    store.upsert_runtime([spec(i, period=H) for i in range(4)], NOW + 30 * M)
    store.upsert_runtime([spec(i) for i in range(10, 20)], NOW - 10 * M)


def test_the_eligible_part_survives_the_clock_stepping_back(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    eligible_past_a_later_window(store)
    clock = FakeClock(NOW)
    publish = Recorder()
    ticks = iter(range(1_000))  # monotonic time goes on when the wall clock steps back
    engine = fake_clock_engine(
        store,
        redis_client,
        clock,
        publish,
        slots=2,
        monotonic=lambda: float(next(ticks)),
        schedule_window_size=4,
        schedule_window=3600,
    )
    engine.load()
    engine.tick()
    first = publish.names()
    assert first == ["t.job@s0010", "t.job@s0011"]
    for name in first:
        run_now(engine, store, name, clock.now())
    clock.set(NOW - 5 * M)  # the wall clock steps back
    engine.tick()
    assert publish.names() == ["t.job@s0012", "t.job@s0013"], "the next, in order"


def test_a_store_error_after_an_eligible_read_loses_none_of_its_rows(
    store: SqlScheduleStore, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    eligible_past_a_later_window(store)
    clock = FakeClock(NOW)
    publish = Recorder()
    engine = make_engine(
        store,
        redis_client,
        clock,
        publish,
        slots=20,
        schedule_window_size=4,
        schedule_window=3600,
        schedule_window_read_on=0,
    )
    engine.load()
    real, failed = store.window_next_can, []

    def fails_once(**arguments: object) -> object:
        if not failed:
            failed.append(True)
            raise OSError("the database went away")
        return real(**arguments)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "window_next_can", fails_once)
    with pytest.raises(OSError, match="went away"):
        engine.tick()  # the scheduler logs it and ticks again
    clock.advance(M)
    engine.tick()
    assert publish.names() == [f"t.job@s{i:04d}" for i in range(10, 20)], "none skipped"


def test_eligible_schedules_whose_blackout_began_since_are_kept_past_it_not_held(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    """200 schedules written before their blackout (11:30-14:00) began: their
    kept next start has passed, but none may start at 12:00. Beat's eligible
    part reads them on its way to the three that may, keeps their start
    times past the blackout in the store and lets go of them (14:00 is past
    the window's hour, so the certainty rule's read-on does not take them
    either); at 14:00 it reads them again and dispatches the most urgent."""
    clock = FakeClock(NOW)
    window = [spec(i, period=H, cooldown=50 * M) for i in range(4)]
    store.upsert_runtime(window, NOW + 30 * M)  # the window
    blacked = [
        dataclasses.replace(spec(i), blackout_periods=[("11:30", "14:00")])
        for i in range(1000, 1200)
    ]
    store.upsert_runtime(blacked, NOW - 2 * H)  # may start since 10:00, until 11:30
    store.upsert_runtime([spec(i) for i in range(10, 13)], NOW - 10 * M)
    seq = store.get("t.job@s1000").change_seq
    publish = Recorder()
    engine = make_engine(
        store, redis_client, clock, publish, slots=4, schedule_window_size=4, schedule_window=3600
    )
    engine.load()
    engine.tick()
    first = publish.names()  # drained
    assert first == ["t.job@s0010", "t.job@s0011", "t.job@s0012"]
    held = schedules(engine)
    assert len(held) <= 8, f"holds {len(held)}: the blackout schedules were held"
    kept = store.get("t.job@s1000")
    assert kept.kept_can_start_at == NOW + 2 * H, "kept past the blackout"
    assert kept.change_seq == seq, "no change for the pollers"
    assert engine.loader.window_wake() == (NOW + 2 * H).timestamp()
    for name in first:
        run_now(engine, store, name, clock.now())
    clock.set(NOW + 2 * H)
    engine.tick()
    due = publish.names()
    assert due == [f"t.job@s{i:04d}" for i in range(4)], "due since 13:30"
    for name in due:
        run_now(engine, store, name, clock.now())
    clock.advance(2 * M)
    engine.tick()
    assert publish.names() == [f"t.job@s{i:04d}" for i in range(1000, 1004)]


def test_a_tick_reads_the_eligible_part_on_for_a_second_and_the_next_goes_on(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    """200 schedules in a blackout begun since their rows were written lie
    before the three eligible ones: reading past them all in one tick would
    keep beat from its leadership's renewals. A tick reads on for a second
    (here each look at the monotonic clock takes 0.1 s) past its first read
    and asks to be ticked again at once; the next ones go on from there,
    and the eligible three are dispatched in deadline order."""
    clock = FakeClock(NOW)
    window = [spec(i, period=H, cooldown=50 * M) for i in range(4)]
    store.upsert_runtime(window, NOW + 30 * M)
    blacked = [
        dataclasses.replace(spec(i), blackout_periods=[("11:30", "14:00")])
        for i in range(1000, 1200)
    ]
    store.upsert_runtime(blacked, NOW - 2 * H)
    store.upsert_runtime([spec(i, period=12 * H) for i in range(5000, 5003)], NOW - 10 * M)
    publish = Recorder()
    steps = iter(range(1_000_000))
    engine = fake_clock_engine(
        store,
        redis_client,
        clock,
        publish,
        slots=4,
        monotonic=lambda: next(steps) * 0.1,
        schedule_window_size=4,
        schedule_window=3600,
    )
    engine.load()

    def moved() -> int:
        return sum(store.get(s.name).kept_can_start_at == NOW + 2 * H for s in blacked)

    assert engine.tick() == 0.0, "more to read: at once"
    assert 0 < moved() < len(blacked), "a second's reads, not all"
    sent: list[str] = []
    for _ in range(100):
        sleep = engine.tick()
        sent += publish.names()
        if sleep > 0:
            break
    assert sent == ["t.job@s5000", "t.job@s5001", "t.job@s5002"]
    assert moved() == len(blacked)


def test_paused_schedules_past_the_window_are_not_held_and_come_back_on_resume(
    store: SqlScheduleStore, redis_client: redis.Redis
) -> None:
    """100 paused schedules whose kept next start has come lie before the
    three eligible ones past a full window: the eligible part reads them on
    its way and lets go of them (none is dispatched while paused); resumed,
    one comes back with the next poll and is dispatched."""
    clock = FakeClock(NOW)
    window = [spec(i, period=H, cooldown=50 * M) for i in range(4)]
    store.upsert_runtime(window, NOW + 30 * M)
    store.upsert_runtime([spec(i) for i in range(1000, 1100)], NOW - 2 * H)
    for i in range(1000, 1100):
        store.set_paused(f"t.job@s{i:04d}", True)
    store.upsert_runtime([spec(i, period=12 * H) for i in range(5000, 5003)], NOW - 10 * M)
    publish = Recorder()
    engine = make_engine(  # read-on 0: no room of 11 sizes for the certainty rule
        store,
        redis_client,
        clock,
        publish,
        slots=4,
        schedule_window_size=4,
        schedule_window=3600,
        schedule_window_read_on=0,
    )
    engine.load()
    engine.tick()
    assert publish.names() == ["t.job@s5000", "t.job@s5001", "t.job@s5002"]
    held = schedules(engine)
    assert len(held) <= 8, f"holds {len(held)}: the paused ones were held"
    store.set_paused("t.job@s1050", False)
    clock.advance(M)
    engine.tick()
    assert publish.names() == ["t.job@s1050"], "resumed: back with the poll"


def test_a_store_error_keeping_times_past_a_blackout_holds_the_rows_as_read(
    store: SqlScheduleStore, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store fails as beat writes the times of a read's blacked-out
    schedules: the part has moved past them, so beat holds them as read
    rather than lose them until the next start-over; the next tick reads on,
    keeps the rest past the blackout and serves the eligible ones. Each
    blacked-out schedule is then held or kept past it, none forgotten."""
    clock = FakeClock(NOW)
    store.upsert_runtime([spec(i, period=H, cooldown=50 * M) for i in range(4)], NOW + 30 * M)
    blacked = [
        dataclasses.replace(spec(i), blackout_periods=[("11:30", "14:00")])
        for i in range(1000, 1010)
    ]
    between = dataclasses.replace(spec(1000), configuration="s1000a")  # may start
    store.upsert_runtime([*blacked, between], NOW - 2 * H)
    store.upsert_runtime([spec(i, period=12 * H) for i in range(5000, 5003)], NOW - 10 * M)
    publish = Recorder()
    engine = make_engine(
        store, redis_client, clock, publish, slots=4, schedule_window_size=4, schedule_window=3600
    )
    engine.load()

    def fails(moved: object) -> int:
        raise OSError("the database went away")

    monkeypatch.setattr(store, "window_keep_past_blackout", fails)
    with pytest.raises(OSError, match="went away"):
        engine.tick()
    held = schedules(engine)
    assert {"t.job@s1000", "t.job@s1000a"} <= held, "the failed read's rows held as read"
    monkeypatch.undo()
    clock.advance(M)
    engine.tick()
    assert publish.names() == ["t.job@s1000a", "t.job@s5000", "t.job@s5001", "t.job@s5002"]
    for s in blacked:
        kept = store.get(s.name).kept_can_start_at
        assert s.name in schedules(engine) or kept == NOW + 2 * H, s.name
