"""End to end, worker side: self-fencing, the durable token floor and
broker redelivery, with real ``celery worker`` / ``celery beat`` processes, a real
Redis server and a SQLite store.

Timings are the e2e defaults: ping every 0.5 s, ping_timeout 1.5 s, steal_delay
1 s; the self-fencing margin is then 0.375 s, so an owner stops its run 1.125 s
after its last successful ping.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

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
    return next(
        (
            e
            for e in cluster.ends(start["name"])
            if e["pid"] == start["pid"] and e["t"] >= start["t"]
        ),
        None,
    )


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
    first = wait_for(
        lambda: next(iter(starts_of(cluster, "long_run")), None), 30, "the first run on w1"
    )
    assert first["host"] == "node1"
    cluster.start_worker("w2", "node2")
    time.sleep(1.0)  # a few good pings
    proxy.blackhole()
    cut_at = time.time()
    end = wait_for(lambda: end_of(cluster, first), 10, "the cut-off run to stop")
    stopped_after = end["t"] - cut_at
    print(
        f"self-fenced {stopped_after * 1000:.0f} ms after the blackhole "
        f"(limit fence_after {FENCE_AFTER}s; a steal is possible only after "
        f"{PING_TIMEOUT + STEAL_DELAY}s)"
    )
    assert stopped_after <= FENCE_AFTER + SLACK
    assert stopped_after < PING_TIMEOUT + STEAL_DELAY
    run = cluster.wait_ended_run("e2e.long_run", "the fenced run's record", token=first["token"])
    assert run.outcome == "self_fenced", run
    assert "no successful ping" in (run.error or "")
    second = wait_for(
        lambda: next((e for e in starts_of(cluster, "long_run") if e["host"] == "node2"), None),
        40,
        "w2 to take the schedule over",
    )
    assert second["token"] > first["token"]
    assert second["t"] > end["t"], "the new run started while the fenced one still ran"
    proxy.restore()
    stored = cluster.schedule("e2e.long_run")
    assert not stored.stats.failure_count, "self-fencing is an interruption, not a failure"


@pytest.mark.parametrize("task", ["retries", "autoretries"])
def test_a_retry_of_a_scheduled_task_sends_no_broker_message(
    cluster_factory: Any, task: str
) -> None:
    """``self.retry(countdown=1)`` / ``autoretry_for``: no countdown message is
    published (it would run outside the scheduler); the run is a failure, left
    to the scheduler's retry ladder."""
    cluster = cluster_factory([task])
    cluster.start_worker("w1", "node1")
    cluster.sync_declarations()
    cluster.send(f"e2e.{task}", queue="w1@node1.dq2")
    run = cluster.wait_ended_run(f"e2e.{task}", "the run to end", 30)
    assert run.outcome == "failure", run
    assert run.error == (
        "ValueError: flaky upstream (retry() refused: the scheduler retries it after "
        "dgs_retry_backoff)"
    ), run
    # The refused retry's countdown was 1 s from the run's end. A plain task sent
    # to the same queue now with the same countdown comes due after it: once that
    # one has run, a retry message would have run too.
    cluster.send("e2e.p10", queue="w1@node1.dq2", countdown=1)
    wait_for(lambda: cluster.ends("p10"), 20, "a later message on the queue to run")
    assert len(starts_of(cluster, task)) == 1
    assert len(cluster.runs(f"e2e.{task}")) == 1
    assert cluster.schedule(f"e2e.{task}").stats.failure_count == 1


def test_a_message_redelivered_by_the_broker_never_starts_a_second_run(
    cluster_factory: Any,
) -> None:
    """task_acks_late with a visibility timeout (2 s) far shorter than the run
    (30 s): the Redis broker hands the message out again while the run is live.
    The redelivery carries the same dispatch id, whose record the first run
    consumed: it is skipped and recorded, never started. The worker also warns
    at start-up that these settings are unsafe."""
    cluster = cluster_factory(["long_run"], E2E_ACKS_LATE="1", E2E_VISIBILITY_TIMEOUT="2")
    cluster.start_worker("w1", "node1", pool="prefork", concurrency=2)
    cluster.start_beat()
    first = wait_for(lambda: next(iter(starts_of(cluster, "long_run")), None), 30, "the first run")
    [running] = wait_for(
        lambda: [r for r in cluster.runs("e2e.long_run") if r.outcome == "running"],
        10,
        "the run record",
    )
    skip = wait_for(
        lambda: next(
            (
                r
                for r in cluster.runs("e2e.long_run")
                if r.outcome == "skipped" and r.dispatch_id == running.dispatch_id
            ),
            None,
        ),
        25,
        "the redelivered message to be recorded as a skip",
    )
    print(
        f"redelivery recorded {(skip.started_at - running.started_at).total_seconds():.1f} s "
        f"after the start: {skip.error}"
    )
    assert "stale_dispatch" in (skip.error or "")
    assert [s["pid"] for s in starts_of(cluster, "long_run")] == [first["pid"]]
    assert [r.run_id for r in cluster.runs("e2e.long_run") if r.outcome == "running"] == [
        running.run_id
    ]
    log = (cluster.tmp / "w1.log").read_text(errors="replace")
    assert "broker_transport_options['visibility_timeout'] = 2.0 is unsafe" in log


def test_after_redis_loses_its_data_tokens_keep_rising_and_grants_wait_out_the_grace(
    tmp_path: Path, fresh_redis_server: RedisServerProcess
) -> None:
    """Redis is killed (-9) and restarted empty mid-run. The live run finds its
    lease gone at its next ping and stops; the next grant waits ping_timeout +
    steal_delay (the worker holds the dispatch through the grace: no skip row)
    and then gets token 2 from the store's floor, although Redis's counter
    started again from nothing."""
    cluster = Cluster(tmp_path, fresh_redis_server.url, ["long_run"])
    try:
        cluster.start_worker("w1", "node1")
        cluster.start_beat()
        first = wait_for(
            lambda: next(iter(starts_of(cluster, "long_run")), None), 30, "the first run"
        )
        assert first["token"] == 1
        fresh_redis_server.restart(kill=True)
        restarted_at = time.time()
        cluster.redis = redis.Redis.from_url(fresh_redis_server.url)
        old = cluster.wait_ended_run(
            "e2e.long_run", "the run whose lease was lost to stop", token=1
        )
        assert old.outcome == "stolen", old
        assert "lost with Redis's data" in (old.error or "")
        second = wait_for(
            lambda: next(
                (r for r in cluster.runs("e2e.long_run") if r.token and r.token > 1), None
            ),
            40,
            "a new grant",
        )
        skips = [r for r in cluster.runs("e2e.long_run") if r.outcome == "skipped"]
        print(
            f"new grant {second.started_at.timestamp() - restarted_at:.1f} s after the "
            f"restart with token {second.token}; {len(skips)} skip(s): "
            f"{skips[0].error if skips else '-'}"
        )
        assert second.token == 2
        assert not skips, "the dispatch during the grace waits it out, no skip row"
        waited = second.started_at.timestamp() - restarted_at
        assert waited >= PING_TIMEOUT + STEAL_DELAY - 0.1
        assert waited <= PING_TIMEOUT + STEAL_DELAY + 3.0, "no dispatch_timeout in the way"
        assert "waiting" in (cluster.tmp / "w1.log").read_text(errors="replace")
        assert cluster.schedule("e2e.long_run").current_token == 2
    finally:
        cluster.stop_all()
