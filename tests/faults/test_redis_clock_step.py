"""Forward steps of the Redis server's clock while a run is live
(docs/guarantees.md: assumption 5, and G3 "Clock steps on the Redis host").

The Redis server (valkey or redis-server) runs under libfaketime
(``tests/faults/faketime.py``): the test steps its ``TIME`` at run time by
rewriting the offset file, and waits until the server answers with the new
time. Workers and beat are real processes with real clocks.

Timings: ping_interval 3 s, ping_timeout 4 s, steal_delay 3.5 s (steal_delay
longer than ping_interval: a single step is absorbed); each step is
``ping_timeout + steal_delay - ping_interval`` (4.5 s). Worker registrations and
beat's leadership last 30 s, so of everything in Redis only the leases feel
the steps. Both steps come right after one of the owner's pings, so they fall
between two of its pings.

- One step of twice that: a steal is marked, the owner's next ping clears it,
  the run ends as if nothing happened (and beat's warning about the worker
  says the lease looks unpinged by the Redis server's clock).
- Two steps, a steal marked between them: another worker takes the lease over
  from the owner, which pings normally; the owner learns it at its next ping
  (NOT_OWNER) and stops. The overlap is not excluded; it is bounded by one ping
  interval plus the stolen run's grace (the checker's rule 2 allowance).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from celery_dgs.embedded import RedisServerProcess
from celery_dgs.keys import KeySpace
from tests.e2e.harness import wait_for
from tests.faults.checker import Bounds
from tests.faults.cluster import FaultCluster
from tests.faults.faketime import faketime_env, faketime_server_binary

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(120)]

PING_INTERVAL, PING_TIMEOUT, STEAL_DELAY = 3.0, 4.0, 3.5
STEP = PING_TIMEOUT + STEAL_DELAY - PING_INTERVAL
TERMINATION_GRACE = 2.0  # tests/faults/proj.py
STOLEN_GRACE = min(PING_INTERVAL / 2, TERMINATION_GRACE)
TIMINGS = {
    "E2E_PING_INTERVAL": str(PING_INTERVAL),
    "E2E_PING_TIMEOUT": str(PING_TIMEOUT),
    "E2E_STEAL_DELAY": str(STEAL_DELAY),
    "E2E_WORKER_TTL": "30",
    "E2E_BEAT_LEADER_TIMEOUT": "30",
}
BOUNDS = Bounds(
    ping_interval=PING_INTERVAL,
    ping_timeout=PING_TIMEOUT,
    steal_delay=STEAL_DELAY,
    tick=1.0,
    slack=1.0,
)
LEASE = KeySpace("e2e").lease("faults.victim")


class SteppedClock:
    """The offset of a server's faked wall clock; :meth:`step` moves it forward."""

    def __init__(self, offset_file: Path, client: redis.Redis) -> None:
        self.offset_file, self.client, self.offset = offset_file, client, 0.0

    def step(self, seconds: float) -> None:
        self.offset += seconds
        tmp = self.offset_file.with_suffix(".tmp")
        tmp.write_text(f"+{self.offset:g}\n")
        os.replace(tmp, self.offset_file)  # libfaketime never reads a half-written file
        wait_for(
            lambda: self.server_ahead() > self.offset - 0.2,
            5,
            f"the Redis server's clock to be {self.offset:g}s ahead",
        )

    def server_ahead(self) -> float:
        secs, micros = self.client.time()
        return secs + micros / 1e6 - time.time()


@pytest.fixture
def stepped_redis(tmp_path: Path) -> Iterator[tuple[RedisServerProcess, SteppedClock]]:
    offset = tmp_path / "redis-faketime.rc"
    offset.write_text("+0\n")
    server = RedisServerProcess(binary=faketime_server_binary())
    with pytest.MonkeyPatch.context() as mp:  # the server inherits this environment
        for name, value in faketime_env(offset).items():
            mp.setenv(name, value)
        server.start()
    client = redis.Redis.from_url(server.url)
    try:
        yield server, SteppedClock(offset, client)
    finally:
        client.close()
        server.cleanup()


def just_pinged(client: redis.Redis) -> None:
    """Return right after the owner's next ping (its lease's last_ping_at changes)."""
    before = client.hget(LEASE, "last_ping_at")
    wait_for(
        lambda: client.hget(LEASE, "last_ping_at") != before,
        PING_INTERVAL + 2,
        "the owner's next ping",
        interval=0.01,
    )


def start_owner(
    fault_cluster: Callable[..., FaultCluster], server: RedisServerProcess, run_seconds: float
) -> tuple[FaultCluster, dict[str, Any]]:
    cluster = fault_cluster(
        ["victim"], redis_url=server.url, FAULTS_RUN_SECONDS=str(run_seconds), **TIMINGS
    )
    cluster.bounds = BOUNDS
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    first = cluster.wait_start("victim")
    cluster.start_worker("w2", "node2")  # free to take the schedule over
    assert first["host"] == "node1"
    return cluster, first


def test_a_single_forward_step_of_the_redis_clock_is_absorbed(stepped_redis, fault_cluster) -> None:
    server, clock = stepped_redis
    cluster, first = start_owner(fault_cluster, server, run_seconds=12)
    offset = cluster.log_size("beat")
    just_pinged(cluster.redis)
    pinged = time.monotonic()
    cluster.history.fault("redis_clock_step", hosts=["redis"], seconds=2 * STEP)
    clock.step(2 * STEP)
    wait_for(
        lambda: cluster.redis.hexists(LEASE, "steal_start_at"), 2.0, "beat's round to mark a steal"
    )
    wait_for(
        lambda: not cluster.redis.hexists(LEASE, "steal_start_at"),
        PING_INTERVAL + 1,
        "the owner's next ping to clear the mark",
    )
    assert time.monotonic() - pinged < STEAL_DELAY, "the mark was cleared before it was due"
    end = cluster.wait_end(first["run_id"], timeout=15)
    assert end["outcome"] == "success"
    assert [s["run_id"] for s in cluster.starts("victim") if s["t"] < end["t"]] == [
        first["run_id"]
    ], "nothing took the run over"
    beat_log = cluster.log_since("beat", offset)
    assert "worker w1@node1 owns a lease not pinged for over ping_timeout" in beat_log, beat_log
    assert "the Redis host's clock was stepped forward" in beat_log
    cluster.assert_history_ok()


def test_two_forward_steps_between_two_pings_take_over_within_the_bound(
    stepped_redis, fault_cluster
) -> None:
    server, clock = stepped_redis
    cluster, first = start_owner(fault_cluster, server, run_seconds=25)
    just_pinged(cluster.redis)
    pinged = time.monotonic()
    cluster.history.fault("redis_clock_step", hosts=["redis"], seconds=STEP)
    clock.step(STEP)
    wait_for(
        lambda: cluster.redis.hexists(LEASE, "steal_start_at"), 2.0, "beat's round to mark a steal"
    )
    cluster.history.fault("redis_clock_step", hosts=["redis"], seconds=STEP)
    clock.step(STEP)
    assert time.monotonic() - pinged < PING_INTERVAL - 0.5, "both steps before the next ping"
    second = cluster.wait_start("victim", after=first, timeout=PING_INTERVAL)
    assert second["host"] == "node2"
    assert second["token"] > first["token"]
    end = cluster.wait_end(first["run_id"], timeout=PING_INTERVAL + STOLEN_GRACE + 2)
    overlap = end["t"] - second["t"]
    print(
        f"take-over {second['t'] - pinged:.2f}s after the owner's ping; the old run "
        f"ended ({end['outcome']}) {overlap:.2f}s after the new one started"
    )
    assert end["outcome"] == "RunTerminated"
    # docs/guarantees.md G3: the old run stops at its next ping (NOT_OWNER) plus
    # at most the stolen grace; 0.5 s for the round trip and the history writes.
    assert overlap <= PING_INTERVAL + STOLEN_GRACE + 0.5, overlap
    [row] = [r for r in cluster.runs("faults.victim") if r.run_id == first["run_id"]]
    assert row.outcome == "stolen", row
    cluster.assert_history_ok()
