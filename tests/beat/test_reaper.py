"""Beat's run reaper on a real Redis server and each store backend (SQLite file,
PostgreSQL): a ``running`` row whose owner's lease is gone for longer than
``ping_timeout + steal_delay`` is ended as ``lost``; a live run never is; a run
fenced by a newer token leaves the newer run's statistics alone."""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine, DispatchOrder
from celery_dgs.beat.reaper import RunReaper
from celery_dgs.core.clock import SystemClock
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.leases.types import AcquireStatus
from celery_dgs.outcome_spool import OutcomeSpool
from celery_dgs.registry import WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, open_store
from tests.leases.helpers import MsClock

KEYS = KeySpace("reap")
#: Redis time for every lease script of a test (pinned: pings keep leases fresh).
REDIS_CLOCK = MsClock()
PING_TIMEOUT_S, STEAL_DELAY_S = 2.0, 1.0
GRACE_S = PING_TIMEOUT_S + STEAL_DELAY_S
INTERVAL_S = 1.0


def no_publish(orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
    return []


@pytest.fixture
def store(database_url: str) -> Iterator[SqlScheduleStore]:
    s = open_store(database_url, 1, 2, 3)
    yield s
    s.close()


def engine_on(
    client: redis.Redis, store: SqlScheduleStore, batch: int = 500, *, kept: bool = False
) -> BeatEngine:
    settings = DgsSettings(
        ping_interval=1,
        ping_timeout=PING_TIMEOUT_S,
        steal_delay=STEAL_DELAY_S,
        reap_interval=INTERVAL_S,
        reap_batch_size=batch,
        store_poll_interval=1000,
    )
    engine = BeatEngine(
        store=store,
        leases=leases_on(client),
        registry=WorkerRegistry(client, KEYS, ttl=300),
        dispatches=DispatchRecords(client, KEYS),
        publish=no_publish,
        settings=settings,
        clock=SystemClock(),
        monotonic=Mono(),
        outcome_spool=OutcomeSpool(client, KEYS) if kept else None,
    )
    engine.load()
    return engine


def leases_on(client: redis.Redis) -> RedisLeases:
    return RedisLeases(
        client, KEYS, ping_timeout=PING_TIMEOUT_S, steal_delay=STEAL_DELAY_S, clock_ms=REDIS_CLOCK
    )


def start_run(store: SqlScheduleStore, leases: RedisLeases, name: str) -> tuple[str, str]:
    """A worker's run start: lease first, then the running row. Returns (run_id, tag)."""
    tag, run_id = uuid.uuid4().hex, uuid.uuid4().hex
    for _ in range(2):
        got = leases.acquire(
            name,
            owner_node="w1",
            owner_name="celery@w1",
            owner_tag=tag,
            min_token=store.token_floor(name),
        )
        if got.status is not AcquireStatus.RECOVERING:
            break
        REDIS_CLOCK.advance(int(GRACE_S * 1000) + 1)  # after Redis lost data: wait the grace
    assert got.granted
    assert got.token is not None
    store.record_run_start(
        schedule=name,
        run_id=run_id,
        dispatch_id=None,
        owner_node="w1",
        owner_name="celery@w1",
        owner_tag=tag,
        token=got.token,
        started_at=datetime.now(timezone.utc),
    )
    return run_id, tag


def outcome(store: SqlScheduleStore, name: str, run_id: str) -> str:
    [run] = [r for r in store.runs(name) if r.run_id == run_id]
    return run.outcome


def advance(engine: BeatEngine, seconds: float) -> None:
    mono = engine.monotonic
    assert isinstance(mono, Mono)
    mono.t += seconds
    engine.tick()


def test_a_run_whose_lease_redis_lost_is_ended_as_lost(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    engine = engine_on(client, store)
    run_id, _ = start_run(store, engine.leases, "t.p1")
    client.flushall()  # Redis loses its data while the owner is dead
    advance(engine, INTERVAL_S)  # first look: no lease -> suspect
    assert outcome(store, "t.p1", run_id) == "running"
    advance(engine, GRACE_S)  # exactly the grace: still waiting
    assert outcome(store, "t.p1", run_id) == "running"
    advance(engine, INTERVAL_S)
    assert outcome(store, "t.p1", run_id) == "lost"
    [run] = store.runs("t.p1")
    assert not run.fenced
    assert run.error is not None
    assert "no lease held by owner tag" in run.error
    assert store.get("t.p1").stats.failure_count == 1  # lost counts as a failure
    assert engine.reaper.reaped_total == 1


def test_a_live_run_is_never_reaped(client: redis.Redis, store: SqlScheduleStore) -> None:
    engine = engine_on(client, store)
    run_id, tag = start_run(store, engine.leases, "t.p1")
    for _ in range(6):
        assert engine.leases.ping("t.p1", tag).owner
        advance(engine, GRACE_S)
    assert outcome(store, "t.p1", run_id) == "running"
    assert engine.reaper.reaped_total == 0


def test_a_lease_back_before_the_grace_ends_clears_the_suspicion(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    engine = engine_on(client, store)
    run_id, _ = start_run(store, engine.leases, "t.p1")
    lease_key = KEYS.lease("t.p1")
    saved = client.hgetall(lease_key)
    client.delete(lease_key)
    advance(engine, INTERVAL_S)  # suspect
    client.hset(lease_key, mapping=saved)  # e.g. a replica caught up
    advance(engine, GRACE_S)  # seen with its lease: no longer suspect
    client.delete(lease_key)
    advance(engine, INTERVAL_S)  # suspect again, from now
    assert outcome(store, "t.p1", run_id) == "running"
    advance(engine, GRACE_S + INTERVAL_S)
    assert outcome(store, "t.p1", run_id) == "lost"


def test_a_silent_owners_lease_no_taker_comes_for_is_freed_and_its_run_ended_stolen(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    """The owner died holding its lease, and no worker takes it over (the
    schedule is paused: beat does not dispatch it). The reaper follows a
    taker's steal protocol: past ping_timeout it marks a steal, steal_delay
    later it frees the lease and ends the row ``stolen`` (an interruption)."""
    engine = engine_on(client, store)
    store.set_paused("t.p1", True)
    run_id, _ = start_run(store, engine.leases, "t.p1")
    REDIS_CLOCK.advance(int(PING_TIMEOUT_S * 1000) + 1)
    advance(engine, INTERVAL_S)  # silent past ping_timeout: the steal is marked
    assert outcome(store, "t.p1", run_id) == "running"
    lease = engine.leases.get("t.p1")
    assert lease is not None
    assert lease.steal_start_at is not None
    REDIS_CLOCK.advance(int(STEAL_DELAY_S * 1000) + 1)
    advance(engine, INTERVAL_S)
    assert outcome(store, "t.p1", run_id) == "stolen"
    assert engine.leases.get("t.p1") is None
    [run] = store.runs("t.p1")
    assert "was silent for 3s and no worker took the lease over" in (run.error or ""), run
    assert store.get("t.p1").stats.failure_count == 0
    assert engine.reaper.reclaimed_total == 1


def test_a_freed_lease_whose_end_could_not_be_written_is_ended_stolen_at_the_next_look(
    client: redis.Redis, store: SqlScheduleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease is freed, then the database refuses the row's end: the look
    stops (logged), and the next look ends the row ``stolen`` at once, not
    ``lost`` for its missing lease after the grace."""
    from sqlalchemy.exc import OperationalError

    engine = engine_on(client, store)
    store.set_paused("t.p1", True)
    run_id, _ = start_run(store, engine.leases, "t.p1")
    REDIS_CLOCK.advance(int(PING_TIMEOUT_S * 1000) + 1)
    advance(engine, INTERVAL_S)  # the steal is marked
    REDIS_CLOCK.advance(int(STEAL_DELAY_S * 1000) + 1)
    real = store.record_run_end

    def refused(**kwargs: object) -> object:
        raise OperationalError("UPDATE dgs_runs", {}, Exception("database is locked"))

    monkeypatch.setattr(store, "record_run_end", refused)
    advance(engine, INTERVAL_S)  # the lease is freed; its row's end is refused
    assert engine.leases.get("t.p1") is None
    assert outcome(store, "t.p1", run_id) == "running"
    monkeypatch.setattr(store, "record_run_end", real)
    advance(engine, INTERVAL_S)
    assert outcome(store, "t.p1", run_id) == "stolen"


def test_an_owner_that_pings_within_the_steal_delay_keeps_its_lease(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    engine = engine_on(client, store)
    run_id, tag = start_run(store, engine.leases, "t.p1")
    REDIS_CLOCK.advance(int(PING_TIMEOUT_S * 1000) + 1)
    advance(engine, INTERVAL_S)  # the steal is marked
    assert engine.leases.ping("t.p1", tag).owner  # the owner was only paused
    REDIS_CLOCK.advance(int(STEAL_DELAY_S * 1000) + 1)
    advance(engine, INTERVAL_S)
    assert outcome(store, "t.p1", run_id) == "running"
    assert engine.leases.ping("t.p1", tag).owner
    assert engine.reaper.reclaimed_total == 0


def test_a_run_taken_over_unrecorded_is_lost_and_fenced(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    """The taker's ``stolen`` write failed: the old row is ended by the reaper,
    and the newer run's statistics and row are left alone."""
    engine = engine_on(client, store)
    old_run, _ = start_run(store, engine.leases, "t.p1")
    client.flushall()  # data lost; a new run starts on a fresh lease (token above floor)
    new_run, new_tag = start_run(store, engine.leases, "t.p1")
    before = store.get("t.p1")
    for _ in range(3):
        assert engine.leases.ping("t.p1", new_tag).owner
        advance(engine, GRACE_S)
    assert outcome(store, "t.p1", old_run) == "lost"
    assert outcome(store, "t.p1", new_run) == "running"
    [old] = [r for r in store.runs("t.p1") if r.run_id == old_run]
    assert old.fenced
    after = store.get("t.p1")
    assert after.stats == before.stats
    assert after.current_token == before.current_token


def test_each_look_reads_a_bounded_page_and_all_rows_are_reached(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    engine = engine_on(client, store, batch=1)
    runs = [start_run(store, engine.leases, f"t.p{h}")[0] for h in (1, 2, 3)]
    client.flushall()
    seen: list[int] = []
    real = store.running_runs_page

    def spy(*, after_id: int, limit: int) -> list:  # type: ignore[type-arg]
        page = real(after_id=after_id, limit=limit)
        seen.append(len(page))
        return page

    store.running_runs_page = spy  # type: ignore[method-assign]
    for _ in range(12):
        advance(engine, INTERVAL_S)
    assert max(seen) == 1
    ended = [outcome(store, f"t.p{h}", r) for h, r in zip((1, 2, 3), runs, strict=True)]
    assert ended == ["lost"] * 3


def test_settings_are_validated() -> None:
    from celery_dgs.errors import SettingsError

    with pytest.raises(SettingsError, match="dgs_reap_batch_size"):
        DgsSettings(reap_batch_size=0)
    with pytest.raises(SettingsError, match="dgs_reap_interval"):
        DgsSettings(reap_interval=-1)


def test_a_standby_beat_does_not_reap(client: redis.Redis, store: SqlScheduleStore) -> None:
    from celery_dgs.beat.leader import BeatLeadership
    from celery_dgs.leases.leader import RedisLeader

    def leadership(node: str, mono: Mono) -> BeatLeadership:
        return BeatLeadership(
            RedisLeader(client, KEYS, timeout=60, clock_ms=REDIS_CLOCK),
            node=node,
            pid=1,
            store_poll_interval=1000,
            monotonic=mono,
        )

    assert leadership("other", Mono()).check().value in ("elected", "leader")
    engine = engine_on(client, store)
    engine.leadership = leadership("me", engine.monotonic)  # type: ignore[arg-type]
    run_id, _ = start_run(store, engine.leases, "t.p1")
    engine.leases.client.delete(KEYS.lease("t.p1"))
    for _ in range(6):
        advance(engine, GRACE_S)
    assert not engine.leadership.leading
    assert outcome(store, "t.p1", run_id) == "running"


def test_a_database_that_went_away_is_one_line_per_look_not_a_traceback(
    redis_client: redis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The database unreachable while beat runs: the reaper's look (and the
    hourly prune) log one line naming the cause at each interval, with no
    traceback, and beat goes on."""
    folder = tmp_path / "db"
    folder.mkdir()
    store = open_store(f"sqlite:///{folder / 'dgs.sqlite3'}", 1)
    mono = Mono()
    reaper = RunReaper(
        store,
        leases_on(redis_client),
        SystemClock(),
        grace_s=GRACE_S,
        ping_timeout_s=PING_TIMEOUT_S,
        interval_s=INTERVAL_S,
        batch_size=10,
        monotonic=mono,
    )
    store.close()
    shutil.rmtree(folder)  # the file and its folder are gone: SQLite cannot open it again
    caplog.set_level(logging.ERROR, logger="celery_dgs")
    mono.t += INTERVAL_S  # the next look is due
    assert reaper.maybe_reap() == 0
    [record] = [r for r in caplog.records if "reaping runs" in r.getMessage()]
    assert record.exc_info is None
    assert "database" in record.getMessage()


def test_a_kept_outcome_list_that_cannot_be_read_does_not_stop_the_reaper(
    client: redis.Redis, store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Kept outcomes hold the reaper's judgement back while they wait; a key
    of another type (malformed data) is an error said, not a wait for ever."""
    engine = engine_on(client, store, kept=True)
    client.set(KEYS.outcome_spool(), "not a list")
    run_id, _ = start_run(store, engine.leases, "t.p1")
    client.delete(KEYS.lease("t.p1"))  # its owner dead, its lease gone
    for _ in range(3):
        advance(engine, INTERVAL_S + GRACE_S)
    assert outcome(store, "t.p1", run_id) == "lost"
    assert "the kept run outcomes cannot be read: Redis key" in caplog.text
