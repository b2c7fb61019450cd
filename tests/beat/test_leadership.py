"""Two BeatEngines on one real Redis server and one real SQLite store: only the
leader dispatches; a standby takes over the leader's pending dispatches instead
of re-dispatching them; a stopped leader that resumes is refused by the fence.

The publisher records the orders it is given (the broker is not what is under
test here; tests/e2e/test_beat_ha_e2e.py runs real beats, broker and worker).
The leader lease runs on a pinned Redis clock and each engine on its own
injected monotonic clock, so take-over and renewal happen at exact moments.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.beat.leader import BeatLeadership, Role, process_gone, process_scope
from celery_dgs.clock_offset import beat_offset_text
from celery_dgs.core.clock import SystemClock
from celery_dgs.dispatches import DispatchRecord, DispatchRecords
from celery_dgs.errors import NotLeaderError, SettingsError
from celery_dgs.keys import KeySpace
from celery_dgs.leases.leader import RedisLeader
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.metrics import EngineCollector
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DEFAULT_BEAT_LEADER_TIMEOUT_S, DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, Recorder, open_store
from tests.leases.helpers import MsClock, wait_for

TIMEOUT_S = 3.0
WORKER = "celery@w1"
KEYS = KeySpace("ha")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = open_store(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", 1, 2, 3)
    yield s
    s.close()


def register(client: redis.Redis, slots: int) -> None:
    WorkerRegistry(client, KEYS, ttl=300).register(
        WorkerInfo(
            name=WORKER,
            node="w1",
            queues=("celery", f"{WORKER}.dq2"),
            slots=slots,
            pool="prefork",
            pid=1,
        )
    )


class Beat:
    """One beat's engine and leadership, on shared Redis and store."""

    def __init__(
        self, name: str, client: redis.Redis, store: SqlScheduleStore, leader_clock: MsClock
    ) -> None:
        settings = DgsSettings(beat_leader_timeout=TIMEOUT_S, store_poll_interval=0.5)
        self.mono = Mono()
        self.publish = Recorder()
        self.leadership = BeatLeadership(
            RedisLeader(client, KEYS, timeout=TIMEOUT_S, clock_ms=leader_clock),
            node=name,
            pid=1,
            store_poll_interval=settings.store_poll_interval,
            monotonic=self.mono,
        )
        self.engine = BeatEngine(
            store=store,
            leases=RedisLeases(client, KEYS, ping_timeout=90, steal_delay=60),
            registry=WorkerRegistry(client, KEYS, ttl=300),
            dispatches=DispatchRecords(client, KEYS),
            publish=self.publish,
            settings=settings,
            clock=SystemClock(),
            monotonic=self.mono,
            leadership=self.leadership,
        )
        self.engine.load()

    def sent(self) -> list[str]:
        return [o.schedule for o in self.publish.sent]


def test_only_the_leader_dispatches_and_a_new_leader_adopts_pending_dispatches(
    client: redis.Redis, store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = MsClock()
    register(client, slots=1)
    a, b = Beat("a", client, store, clock), Beat("b", client, store, clock)
    caplog.set_level(logging.INFO, logger="celery_dgs.beat")
    a.engine.tick()
    assert a.leadership.leading
    assert a.sent() == ["t.p1"]  # one slot: the most urgent one
    assert a.engine.state.live_slots == 1  # the priority classes' overload signal compares with it
    sleep = b.engine.tick()
    assert not b.leadership.leading
    assert b.sent() == []  # a standby never dispatches
    assert sleep == b.leadership.standby_interval == 0.5
    assert b.leadership.holder is not None
    assert b.leadership.holder.owner_node == "a"

    # a stops (SIGSTOP) right after its check; b takes over after the timeout.
    register(client, slots=3)
    clock.advance(int(TIMEOUT_S * 1000))
    b.mono.t += 1
    b.engine.tick()
    assert not b.leadership.leading  # exactly the timeout: a still leads
    clock.advance(1)
    b.mono.t += 1
    b.engine.tick()
    assert b.leadership.leading
    assert b.leadership.token == a.leadership.token + 1
    # a's pending dispatch of t.p1 is adopted, not sent again
    assert sorted(b.sent()) == ["t.p2", "t.p3"]
    assert set(b.engine.state.pending) == {"t.p1", "t.p2", "t.p3"}
    record = b.engine.dispatches.current("t.p1")
    assert record is not None
    assert record.dispatch_id == a.publish.sent[0].dispatch_id
    assert "leading as b/1 (token 2); replaced a/1 (token 1)" in caplog.text

    # a resumes: its monotonic clock says no renewal is due, so it goes on to
    # dispatch what its stale view holds due -- the fence refuses it.
    register(client, slots=6)
    a.engine.tick()
    assert a.sent() == ["t.p1"]  # nothing more published
    assert not a.leadership.leading
    assert "lost leadership (token 1): dispatch refused" in caplog.text
    assert a.engine.tick() == a.leadership.standby_interval  # next check: standby
    assert a.engine.state.live_slots is None  # unknown until it places as leader again
    assert a.leadership.holder is not None
    assert a.leadership.holder.owner_node == "b"
    assert "t.p2" in a.engine.ranking.index  # re-indexed, not lost
    assert "t.p3" in a.engine.ranking.index
    assert sorted(b.engine.dispatches.pending_names()) == ["t.p1", "t.p2", "t.p3"]


def test_leader_renews_every_third_of_the_timeout(client: redis.Redis) -> None:
    clock = MsClock()
    mono = Mono()
    leader = RedisLeader(client, KEYS, timeout=TIMEOUT_S, clock_ms=clock)
    ship = BeatLeadership(leader, node="a", pid=1, store_poll_interval=5, monotonic=mono)
    assert ship.renew_interval == ship.standby_interval == 1.0
    assert ship.check() is Role.ELECTED
    first = leader.current()
    clock.advance(900)
    mono.t += 0.9
    assert ship.check() is Role.LEADER
    assert leader.current() == first  # not due: no round trip
    mono.t += 0.1
    assert ship.check() is Role.LEADER
    renewed = leader.current()
    assert renewed is not None
    assert first is not None
    assert (renewed.last_ping_at - first.last_ping_at).total_seconds() == 0.9
    ship.lost("test")
    assert not ship.leading
    assert ship.check() is Role.ELECTED  # asks Redis at once: still its lease, a new view
    assert ship.token == renewed.token


def test_resign_lets_a_standby_take_over_at_its_next_check(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    clock = MsClock()
    leader = RedisLeader(client, KEYS, timeout=TIMEOUT_S, clock_ms=clock)
    a = BeatLeadership(leader, node="a", pid=1, store_poll_interval=1, monotonic=Mono())
    b = BeatLeadership(leader, node="b", pid=2, store_poll_interval=1, monotonic=Mono())
    assert a.check() is Role.ELECTED
    assert b.check() is Role.STANDBY
    with pytest.raises(NotLeaderError):  # a standby's fence (token 0) is never accepted
        DispatchRecords(client, KEYS).add_many(
            [DispatchRecord(schedule="s", dispatch_id="d", worker=WORKER)], ttl=5, fence=b.fence
        )
    caplog.set_level(logging.INFO, logger="celery_dgs.beat")
    a.resign()
    assert "resigned leadership (token 1)" in caplog.text
    assert b.check() is Role.ELECTED
    assert b.fence.token == 2


def test_a_leader_whose_process_is_gone_from_this_host_is_replaced_after_a_renew_interval(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    clock = MsClock()
    leader = RedisLeader(client, KEYS, timeout=TIMEOUT_S, clock_ms=clock)
    dead: set[int] = set()

    def beat(node: str, pid: int) -> BeatLeadership:
        return BeatLeadership(
            leader,
            node=node,
            pid=pid,
            store_poll_interval=5,
            monotonic=Mono(),
            gone=dead.__contains__,
        )

    old = beat("h", 100)
    assert old.check() is Role.ELECTED
    dead.add(100)  # killed without resigning; a new beat starts on the same host
    new, elsewhere = beat("h", 200), beat("other", 300)
    caplog.set_level(logging.INFO, logger="celery_dgs.beat")
    clock.advance(int(new.renew_interval * 1000))
    assert new.check() is Role.STANDBY  # pinged a renew interval ago: it could be alive
    clock.advance(1)
    assert elsewhere.check() is Role.STANDBY  # another host cannot tell: the timeout
    assert new.check() is Role.ELECTED
    assert new.token == old.token + 1
    assert "replaced h/100 (token 1), silent for 1.0s, its process gone from this host" in (
        caplog.text
    )
    old_mono = old.monotonic
    assert isinstance(old_mono, Mono)
    old_mono.t += old.renew_interval
    assert old.check() is Role.STANDBY  # had it lived on, the new term would stand


def test_a_leader_of_another_pid_namespace_is_judged_by_this_beats_pid_only(
    client: redis.Redis,
) -> None:
    """A container's beat restarts as pid 1 in a new pid namespace under the
    same host name: the leader with this beat's pid is its predecessor,
    taken over after two renew intervals (longer than a live leader's
    renewal gap). One of another namespace with another pid (beats sharing
    the host's name, each in its own namespace) is left to the timeout:
    its pid means nothing here."""
    clock = MsClock()
    leader = RedisLeader(client, KEYS, timeout=TIMEOUT_S, clock_ms=clock)

    def beat(node: str, pid: int, scope: str) -> BeatLeadership:
        return BeatLeadership(
            leader,
            node=node,
            pid=pid,
            store_poll_interval=5,
            monotonic=Mono(),
            gone=lambda _: True,  # no pid of another namespace is visible here
            scope=scope,
        )

    assert beat("c1", 1, "boot/ns-old").check() is Role.ELECTED
    clock.advance(1001)
    assert beat("c1", 1, "boot/ns-new").check() is Role.STANDBY  # a renew interval: not yet
    assert beat("c1", 7, "boot/ns-other").check() is Role.STANDBY
    assert beat("c2", 1, "boot/ns-new").check() is Role.STANDBY  # another host name
    clock.advance(1000)
    assert beat("c1", 7, "boot/ns-other").check() is Role.STANDBY  # its pid means nothing
    restarted = beat("c1", 1, "boot/ns-new")
    assert restarted.check() is Role.ELECTED
    info = leader.current()
    assert info is not None
    assert info.scope == "boot/ns-new"


def test_the_process_scope_is_the_boot_and_the_pid_namespace() -> None:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert process_scope() == f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"


def test_process_gone_reads_this_hosts_processes() -> None:
    assert not process_gone(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stat = Path(f"/proc/{child.pid}/stat")
    wait_for(lambda: stat.read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z")
    assert process_gone(child.pid)  # ended, not yet reaped by its parent: a zombie
    child.wait()
    assert process_gone(child.pid)


def test_leadership_gauges(client: redis.Redis, store: SqlScheduleStore) -> None:
    clock = MsClock()
    register(client, slots=1)
    a, b = Beat("a", client, store, clock), Beat("b", client, store, clock)
    a.engine.tick()
    b.engine.tick()

    def gauges(beat: Beat) -> dict[str, float]:
        collector = EngineCollector(beat.engine, store, SystemClock())
        return {
            m.name: m.samples[0].value
            for m in collector.collect()
            if m.name.startswith("dgs_beat_leader")
        }

    assert gauges(a) == {"dgs_beat_leader": 1, "dgs_beat_leader_token": 1}
    assert gauges(b) == {"dgs_beat_leader": 0, "dgs_beat_leader_token": 1}


def test_drift_gauge_reads_what_beat_recorded_and_never_the_index(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    """Three never-run schedules, one slot: the leader dispatches one and records
    the most urgent of the two left; the scrape (the metrics HTTP thread) reads
    that, not the index, which a peek from another thread could corrupt."""
    clock = MsClock()
    register(client, slots=1)
    a, b = Beat("a", client, store, clock), Beat("b", client, store, clock)
    a.engine.tick()
    b.engine.tick()
    assert len(a.sent()) == 1
    assert b.sent() == []
    now = SystemClock().now().timestamp()
    top = a.engine.ranking.index.peek(now)
    times = a.engine.ranking.index.times(top) if top is not None else None
    assert times is not None
    assert a.engine.state.most_urgent_should_start_by == times.should_start_by
    assert b.engine.state.most_urgent_should_start_by is None  # standing by

    class Untouchable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the scrape touched the index ({name})")

    def drift(beat: Beat) -> float:
        beat.engine.ranking.index = Untouchable()
        collector = EngineCollector(beat.engine, store, SystemClock())
        return next(
            m.samples[0].value
            for m in collector.collect()
            if m.name == "dgs_most_urgent_drift_seconds"
        )

    before = SystemClock().now().timestamp()
    value = drift(a)
    after = SystemClock().now().timestamp()
    assert before - times.should_start_by <= value <= after - times.should_start_by
    assert drift(b) == 0.0


def test_beat_leader_timeout_setting_is_validated() -> None:
    assert DgsSettings().beat_leader_timeout == DEFAULT_BEAT_LEADER_TIMEOUT_S == 30.0
    assert (
        DgsSettings.from_conf({"dgs_beat_leader_timeout": timedelta(seconds=5)}).beat_leader_timeout
        == 5.0
    )
    assert DgsSettings.from_conf({"dgs_beat_leader_timeout": "1m"}).beat_leader_timeout == 60.0
    for bad in (0, -1, 0.1, "thirty", float("nan"), True):
        with pytest.raises(SettingsError, match="dgs_beat_leader_timeout"):
            DgsSettings(beat_leader_timeout=bad)  # type: ignore[arg-type]


def test_a_leader_serving_another_store_is_an_error_logged_once(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Two projects on one Redis database and prefix: the second project's beat
    stands by behind the first's, and says why once, naming the prefix."""
    clock = MsClock()
    leader = RedisLeader(client, KEYS, timeout=TIMEOUT_S, clock_ms=clock)
    ours = BeatLeadership(
        leader, node="a", pid=1, store_poll_interval=1, store="store-a", prefix="ha"
    )
    same = BeatLeadership(
        leader, node="b", pid=2, store_poll_interval=1, store="store-a", prefix="ha"
    )
    other = BeatLeadership(
        leader, node="c", pid=3, store_poll_interval=1, store="store-b", prefix="ha"
    )
    assert ours.check() is Role.ELECTED
    current = leader.current()
    assert current is not None
    assert current.store == "store-a"
    with caplog.at_level(logging.ERROR, logger="celery_dgs.beat"):
        assert same.check() is Role.STANDBY  # a standby of the same project: no error
        assert other.check() is Role.STANDBY
        assert other.check() is Role.STANDBY
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [
        "celery-dgs beat: the leading beat (a/1) serves another schedule store: two "
        "projects share this Redis database and key prefix 'ha', so their beats, workers "
        "and leases mix (this project's beat stands by, and its workers may be sent the "
        "other's runs), or it opens another database than this process (a relative "
        "SQLite path in dgs_database_url is read from each process's working directory); "
        "give each project its own dgs_key_prefix or Redis database, and every process "
        "of a project the same dgs_database_url"
    ]


def test_beat_logs_its_clocks_offset_from_redis_once(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    clock = MsClock()
    leader = RedisLeader(client, KEYS, timeout=TIMEOUT_S, clock_ms=clock)
    mono = Mono()
    wall = lambda: clock.ms / 1000 - 12.5  # noqa: E731
    ship = BeatLeadership(leader, node="a", pid=1, store_poll_interval=5, monotonic=mono, wall=wall)
    caplog.set_level(logging.INFO, logger="celery_dgs.beat")
    assert ship.check() is Role.ELECTED
    mono.t += ship.renew_interval
    assert ship.check() is Role.LEADER
    said = [r for r in caplog.records if "clock" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in said] == [
        ("WARNING", "celery-dgs: " + beat_offset_text(-12.5)),
    ]
    assert "beat's clock is 12.5s behind Redis's" in said[0].getMessage()
