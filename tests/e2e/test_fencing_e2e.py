"""End to end, issue 7 (worker side): self-fencing, the durable token floor and
broker redelivery, with real ``celery worker`` / ``celery beat`` processes, a real
Redis server and a SQLite store.

Timings are the e2e defaults: ping every 0.5 s, ping_timeout 1.5 s, steal_delay
1 s; the self-fencing margin is then 0.375 s, so an owner stops its run 1.125 s
after its last successful ping.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from celery_dgs.embedded import RedisServerProcess
from tests.e2e.blackhole import BlackholeProxy
from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PING_TIMEOUT, STEAL_DELAY = 1.5, 1.0
FENCE_AFTER = 1.125
SLACK = 0.5  # process scheduling, SQLite write


@pytest.fixture
def proxy(redis_server: RedisServerProcess) -> Iterator[BlackholeProxy]:
    p = BlackholeProxy(redis_server.port).start()
    yield p
    p.close()


def starts_of(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    return [e for e in cluster.starts() if e["name"] == name]


def end_of(cluster: Cluster, start: dict[str, Any]) -> dict[str, Any] | None:
    return next((e for e in cluster.ends(start["name"])
                 if e["pid"] == start["pid"] and e["t"] >= start["t"]), None)  # fmt: skip


def test_owner_cut_off_from_redis_fences_itself_before_anyone_can_steal(
    cluster_factory: Any, proxy: BlackholeProxy
) -> None:
    """w1 reaches Redis (leases, registry) only through a proxy; the broker and
    the SQL store stay reachable. Blackhole the proxy mid-run: w1 stops the run
    on its own within fence_after of its last good ping, records it
    ``self_fenced``, and the run w2 later takes over starts only after that."""
    cluster = cluster_factory(["long_run"])
    cluster.env["E2E_DGS_REDIS_URL"] = proxy.url
    cluster.start_worker("w1", "node1")
    del cluster.env["E2E_DGS_REDIS_URL"]
    cluster.start_beat()
    first = wait_for(lambda: next(iter(starts_of(cluster, "long_run")), None), 30,
                     "the first run on w1")  # fmt: skip
    assert first["host"] == "node1"
    cluster.start_worker("w2", "node2")
    time.sleep(1.0)  # a few good pings
    proxy.blackhole()
    cut_at = time.time()
    end = wait_for(lambda: end_of(cluster, first), 10, "the cut-off run to stop")
    stopped_after = end["t"] - cut_at
    print(f"self-fenced {stopped_after * 1000:.0f} ms after the blackhole "
          f"(limit fence_after {FENCE_AFTER}s; a steal is possible only after "
          f"{PING_TIMEOUT + STEAL_DELAY}s)")  # fmt: skip
    assert stopped_after <= FENCE_AFTER + SLACK
    assert stopped_after < PING_TIMEOUT + STEAL_DELAY
    run = wait_for(
        lambda: next((r for r in cluster.runs("e2e.long_run")
                      if r.token == first["token"] and r.outcome != "running"), None),
        10, "the fenced run's record",
    )  # fmt: skip
    assert run.outcome == "self_fenced", run
    assert "no successful ping" in (run.error or "")
    second = wait_for(
        lambda: next((e for e in starts_of(cluster, "long_run") if e["host"] == "node2"), None),
        40, "w2 to take the schedule over",
    )  # fmt: skip
    assert second["token"] > first["token"]
    assert second["t"] > end["t"], "the new run started while the fenced one still ran"
    proxy.restore()
    stored = cluster.schedule("e2e.long_run")
    assert not stored.stats.failure_count, "self-fencing is an interruption, not a failure"
