"""End to end, worker side: how a live run is stopped.

Real Redis server, SQLite store, real ``celery worker`` / ``celery beat``
processes. Timings are the project's second-scale defaults (ping every 0.5 s,
ping_timeout 1.5 s, steal_delay 1 s, termination grace 2 s) unless a test says
otherwise. Each task appends its start and end to ``e2e:events`` (wall clock
of the worker process), so overlaps are measured from outside the system.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PING_INTERVAL = 0.5
MAX_ALLOWED = 1.5
GRACE = 2.0
SLACK = 0.5  # process scheduling, SQLite write, Redis round trips


def run_of(cluster: Cluster, schedule: str, outcome: str) -> Any:
    return next((r for r in cluster.runs(schedule) if r.outcome == outcome), None)


def first_start(cluster: Cluster, name: str) -> dict[str, Any]:
    return wait_for(
        lambda: next((e for e in cluster.starts() if e["name"] == name), None),
        30,
        f"a run of {name} to start",
    )


def end_of(cluster: Cluster, start: dict[str, Any]) -> dict[str, Any] | None:
    """The end event of the run that logged ``start`` (same process, same name)."""
    ends = cluster.ends(start["name"])
    return next((e for e in ends if e["pid"] == start["pid"] and e["t"] >= start["t"]), None)


# -- 1. a paused owner is stolen from ------------------------------------------------------
@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_paused_owner_is_stolen_from_and_stops_at_its_next_ping(cluster_factory, pool: str) -> None:
    """SIGSTOP the owner for longer than ping_timeout + steal_delay: the whole
    process group of a solo worker (another worker takes over), or only the
    prefork child that runs the task (a sibling child takes over). After SIGCONT
    the paused run pings, finds another owner and stops: the two runs overlap
    for at most about one ping interval after the resume."""
    cluster = cluster_factory(["long_run"])
    if pool == "solo":
        cluster.start_worker("w1", "node1")
        cluster.start_worker("w2", "node2")
    else:
        cluster.start_worker("w1", "node1", pool="prefork", concurrency=2)
    cluster.start_beat()
    first = first_start(cluster, "long_run")
    if pool == "solo":
        owner = "w1" if first["host"] == "node1" else "w2"
        pause = lambda sig: cluster.signal_group(owner, sig)  # noqa: E731
    else:
        assert first["pid"] != cluster.procs["w1"].pid, "the run is in a pool child"
        pause = lambda sig: os.kill(first["pid"], sig)  # noqa: E731
    pause(signal.SIGSTOP)
    paused_at = time.time()
    last_ping = cluster.last_ping_after_pause("e2e.long_run")
    try:
        second = wait_for(
            lambda: next((e for e in cluster.starts() if e["pid"] != first["pid"]), None),
            30,
            "another process to take the schedule over",
        )
        assert second["token"] > first["token"]
        assert second["t"] - last_ping > 1.5 + 1.0, "taken over before ping_timeout + steal_delay"
        time.sleep(0.5)  # both runs "live": the paused one just does not know yet
    finally:
        pause(signal.SIGCONT)
    resumed_at = time.time()
    end = wait_for(lambda: end_of(cluster, first), 10, "the paused run to stop")
    overlap_after_resume = end["t"] - resumed_at
    print(
        f"[{pool}] overlap after SIGCONT: {overlap_after_resume * 1000:.0f} ms; "
        f"take-over {second['t'] - paused_at:.2f} s after SIGSTOP"
    )
    assert overlap_after_resume <= PING_INTERVAL + SLACK
    assert end_of(cluster, second) is None, "the new run goes on"

    # The new run keeps the lease: the stopped run did not release it.
    lease = cluster.leases().get("e2e.long_run")
    assert lease is not None
    assert lease.token == second["token"]
    # The taker records the paused run as stolen when it takes the lease (it cannot
    # tell a paused owner from a dead one); the resumed owner's own "stolen" end is
    # then a no-op. A steal never counts as a failure.
    old = cluster.wait_ended_run("e2e.long_run", "the paused run's record", token=first["token"])
    time.sleep(PING_INTERVAL)  # let the resumed owner write whatever it writes
    stored = cluster.schedule("e2e.long_run")
    print(
        f"[{pool}] paused run recorded {old.outcome!r} ({old.error}); "
        f"failure_count {stored.stats.failure_count}"
    )
    assert old.outcome == "stolen", old
    assert stored.current_token == second["token"]
    assert not stored.stats.failure_count, "a stolen run is not a failure"


# -- 2. a blackout window begins during a run -------------------------------------------------
def test_blackout_window_starting_mid_run_terminates_it(cluster_factory) -> None:
    cluster = cluster_factory(["blackout_run"])
    # The window is read when the worker imports the project: place it a few
    # seconds after the run will have started. A worker that took so long to
    # start that the window is near is started again with a later window.
    lead = 9.0
    while True:
        now = datetime.now(timezone.utc)
        window_start = (now + timedelta(seconds=lead)).replace(microsecond=0)
        window_end = window_start + timedelta(minutes=2)
        cluster.env["E2E_BLACKOUT_START"] = window_start.strftime("%H:%M:%S")
        cluster.env["E2E_BLACKOUT_END"] = window_end.strftime("%H:%M:%S")
        cluster.start_worker("w1", "node1")
        cluster.sync_declarations()
        if time.time() < window_start.timestamp() - 3 or lead > 60:
            break
        cluster.stop("w1")
        lead *= 2
    cluster.send("e2e.blackout_run", 60.0, queue="w1@node1.dq2")
    start = first_start(cluster, "blackout_run")
    assert start["t"] < window_start.timestamp(), "the run must start before the window"
    run = wait_for(
        lambda: run_of(cluster, "e2e.blackout_run", "terminated"),
        30,
        "the run to be terminated by the blackout",
    )
    assert "blackout" in (run.error or ""), run.error
    latency = (run.ended_at - window_start).total_seconds()
    print(f"blackout termination latency: {latency * 1000:.0f} ms after the window began")
    assert -0.05 <= latency <= SLACK, latency
    end = wait_for(lambda: end_of(cluster, start), 5, "the task body to stop")
    assert end["t"] - window_start.timestamp() <= SLACK
    assert cluster.schedule("e2e.blackout_run").stats.failure_count == 1
    # The lease is released after the outcome is stored.
    wait_for(lambda: cluster.leases().get("e2e.blackout_run") is None, 5, "the lease released")


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_run_sent_inside_its_blackout_window_is_terminated_and_the_worker_lives(
    cluster_factory, pool: str
) -> None:
    """The heartbeat's first check finds the window open and interrupts the run
    while the worker is still starting the heartbeat, before the task body: the
    run is recorded terminated, the lease released, and the worker goes on
    (an interruption escaping the task ends a solo worker inside Celery)."""
    cluster = cluster_factory(["blackout_run", "long_run"])
    now = datetime.now(timezone.utc).replace(microsecond=0)
    cluster.env["E2E_BLACKOUT_START"] = (now - timedelta(minutes=1)).strftime("%H:%M:%S")
    cluster.env["E2E_BLACKOUT_END"] = (now + timedelta(minutes=3)).strftime("%H:%M:%S")
    cluster.start_worker("w1", "node1", pool=pool)
    cluster.sync_declarations()
    for _ in range(3):
        cluster.send("e2e.blackout_run", 5.0, queue="w1@node1.dq2")

    def three_ended() -> list[Any] | None:
        ended = [r for r in cluster.runs("e2e.blackout_run") if r.ended_at is not None]
        return ended if len(ended) >= 3 else None

    runs = wait_for(three_ended, 30, "three runs of blackout_run recorded")
    assert {r.outcome for r in runs} == {"terminated"}, [(r.outcome, r.error) for r in runs]
    assert all("blackout" in (r.error or "") for r in runs), [r.error for r in runs]
    wait_for(lambda: cluster.leases().get("e2e.blackout_run") is None, 5, "the lease released")
    assert cluster.procs["w1"].poll() is None, cluster.logs()
    assert "cannot unpack" not in cluster.logs()
    cluster.send("e2e.long_run", 0.2, queue="w1@node1.dq2")
    wait_for(lambda: cluster.ends("long_run"), 30, "the worker to run another task")


# -- 3. warm shutdown yields ----------------------------------------------------------------
@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_warm_shutdown_yields_and_frees_the_lease_at_once(cluster_factory, pool: str) -> None:
    """SIGTERM to the worker's main process mid-run: the run is recorded yielded
    and its lease is freed at once, so beat has another worker run the schedule
    long before a steal would be allowed (here ping_timeout 10 s + steal_delay 5 s)."""
    cluster = cluster_factory(["long_run"], E2E_PING_TIMEOUT="10", E2E_STEAL_DELAY="5")
    concurrency = 2 if pool == "prefork" else 1
    cluster.start_worker("w1", "node1", pool=pool, concurrency=concurrency)
    cluster.start_beat()
    first = first_start(cluster, "long_run")
    assert first["host"] == "node1"
    if pool == "prefork":
        assert first["pid"] != cluster.procs["w1"].pid, "the run is in a pool child"
    cluster.start_worker("w2", "node2")
    time.sleep(PING_INTERVAL)  # the run has pinged at least once
    cluster.signal("w1", signal.SIGTERM)
    term_at = time.time()
    leases = cluster.leases()
    wait_for(
        lambda: (lease := leases.get("e2e.long_run")) is None or lease.token != first["token"],
        5,
        "the lease to be freed",
    )
    freed_after = time.time() - term_at
    second = wait_for(
        lambda: next((e for e in cluster.starts() if e["host"] == "node2"), None),
        10 + 5,
        "another worker to run the schedule",
    )
    handover = second["t"] - term_at
    print(
        f"[{pool}] lease freed {freed_after * 1000:.0f} ms after SIGTERM; "
        f"next run started {handover:.2f} s after SIGTERM"
    )
    assert freed_after < 1.0
    assert handover < 5.0, "much sooner than a steal (15 s)"
    end = end_of(cluster, first)
    assert end is not None
    assert end["t"] - term_at < SLACK
    run = wait_for(lambda: run_of(cluster, "e2e.long_run", "yielded"), 5, "a yielded run")
    assert run.token == first["token"]
    assert "shutting down" in (run.error or "")
    assert cluster.procs["w1"].wait(20) == 0, "the warm shutdown completes"
    assert cluster.schedule("e2e.long_run").stats.failure_count == 0


def test_warm_shutdown_of_a_threads_worker_waits_for_a_run_stuck_in_a_blocking_call(
    cluster_factory,
) -> None:
    """SIGTERM to a threads-pool worker while a scheduled run is blocked in one
    C-level call (the async exception waits for it) and a task of Celery's own
    runs beside it: the worker waits for both, as Celery's warm shutdown does,
    the run's lease pinged meanwhile; the run is recorded yielded and the
    worker exits 0. Ending the process (the one for a run that ignores its
    interruption) would lose the other task."""
    cluster = cluster_factory(["stuck"], E2E_MAX_ALLOWED="60")
    cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
    cluster.sync_declarations()
    cluster.send("e2e.stuck", GRACE + 3, queue="w1@node1.dq2")
    cluster.send("e2e.plain_sleep", GRACE + 2, queue="w1@node1.dq2")
    stuck = first_start(cluster, "stuck")
    plain = first_start(cluster, "plain_sleep")
    cluster.signal("w1", signal.SIGTERM)
    assert cluster.procs["w1"].wait(GRACE + 20) == 0, cluster.log_since("w1", 0)
    assert end_of(cluster, plain) is not None, "the task beside the run finished"
    assert end_of(cluster, stuck) is not None, "the run's body was waited for"
    run = run_of(cluster, "e2e.stuck", "yielded")
    assert run is not None, cluster.runs("e2e.stuck")
    assert cluster.leases().get("e2e.stuck") is None
    assert "the worker's shutdown waits for it" in cluster.log_since("w1", 0)


def test_a_dispatch_revoked_before_it_starts_is_given_back_at_once(
    cluster_factory, redis_client
) -> None:
    """``celery control revoke`` of a dispatch waiting in the worker (here in
    Celery's rate limiter): the worker discards it unstarted, gives its
    dispatch record back and records a skip naming the revoke, so its slot is
    free at once, not after ``dgs_dispatch_timeout`` (60 s here)."""
    from celery import Celery

    from celery_dgs.dispatches import DispatchRecords

    cluster = cluster_factory(["rate_limited"], E2E_DISPATCH_TIMEOUT="60")
    cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
    cluster.start_beat()
    first = first_start(cluster, "rate_limited")
    wait_for(lambda: end_of(cluster, first), 10, "the first run's end")
    records = DispatchRecords(redis_client, cluster.keyspace())
    waiting = wait_for(
        lambda: records.current("e2e.rate_limited"), 10, "a dispatch held by the rate limiter"
    )
    client = Celery("e2e-client", broker=cluster.redis_url)
    try:
        client.control.revoke(waiting.dispatch_id)
    finally:
        client.close()
    revoked_at = time.time()

    def skipped() -> Any:
        return next(
            (
                r
                for r in cluster.runs("e2e.rate_limited")
                if r.outcome == "skipped" and r.dispatch_id == waiting.dispatch_id
            ),
            None,
        )

    skip = wait_for(skipped, 20, "the revoked dispatch's skip row")
    assert "revoked (celery control revoke)" in (skip.error or ""), skip
    current = records.current("e2e.rate_limited")
    assert current is None or current.dispatch_id != waiting.dispatch_id
    print(f"given back {time.time() - revoked_at:.1f} s after the revoke")
    of_it = [
        r.outcome for r in cluster.runs("e2e.rate_limited") if r.dispatch_id == skip.dispatch_id
    ]
    assert of_it == ["skipped"], "the revoked dispatch never ran"


def test_revoke_terminate_of_a_live_run_is_recorded_cancelled(cluster_factory) -> None:
    """``celery control revoke --terminate`` of a live run (its task id is the
    dispatch id): Celery sends its prefork pool process SIGTERM, as a cold
    shutdown does; the worker is still registered, so the run is recorded
    ``cancelled``, as ``celery dgs cancel`` records, not ``yielded``."""
    from celery import Celery

    cluster = cluster_factory(["long_run"])
    cluster.start_worker("w1", "node1", pool="prefork", concurrency=2)
    cluster.start_beat()
    first = first_start(cluster, "long_run")
    assert first["pid"] != cluster.procs["w1"].pid, "the run is in a pool child"
    lease = cluster.leases().get("e2e.long_run")
    assert lease is not None
    assert lease.dispatch_id
    client = Celery("e2e-client", broker=cluster.redis_url)
    try:
        client.control.revoke(lease.dispatch_id, terminate=True)
    finally:
        client.close()
    run = wait_for(lambda: run_of(cluster, "e2e.long_run", "cancelled"), 20, "a cancelled run")
    assert run.token == first["token"]
    assert "its pool process got SIGTERM while w1@node1 was still registered: " in (
        run.error or ""
    ), run.error
    assert run_of(cluster, "e2e.long_run", "yielded") is None
    assert cluster.schedule("e2e.long_run").stats.failure_count == 0
    assert cluster.procs["w1"].poll() is None, "the worker lives on"


def test_an_autoscaling_worker_registers_its_maximum_and_grows_to_it(cluster_factory) -> None:
    """``--autoscale=3,1``: the worker registers 3 slots (not ``-c``), so beat
    sends it three runs at once and Celery's autoscaler grows the pool to
    run them together."""
    from celery_dgs.registry import WorkerRegistry
    from celery_dgs.runtime_schedules import RuntimeSchedules

    cluster = cluster_factory(["p10"])
    store = cluster.store()
    try:
        api = RuntimeSchedules(store)
        for i in range(3):
            api.upsert(f"e2e.scrape@auto{i}", period=3600, args=[f"auto{i}", 4.0])
    finally:
        store.close()
    cluster.start_worker("w1", "node1", pool="prefork", concurrency=1, extra=("--autoscale=3,1",))
    registry = WorkerRegistry(cluster.redis, cluster.keyspace(), ttl=3)
    (worker,) = registry.live_workers()
    assert worker.slots == 3
    cluster.start_beat()

    def of_scrape(events: list[dict[str, Any]]) -> list[float]:
        return sorted(e["t"] for e in events if e["name"].startswith("scrape@auto"))

    wait_for(lambda: len(of_scrape(cluster.starts())) >= 3, 30, "three runs")
    starts, ends = of_scrape(cluster.starts()), of_scrape(cluster.ends())
    assert not ends or ends[0] > starts[2], "the three ran together"


# -- 4. operator cancel -----------------------------------------------------------------------
def test_operator_cancel_stops_the_run_at_its_next_ping(cluster_factory) -> None:
    cluster = cluster_factory(["long_run"])
    cluster.start_worker("w1", "node1")
    cluster.sync_declarations()
    cluster.send("e2e.long_run", 60.0, queue="w1@node1.dq2")
    start = first_start(cluster, "long_run")
    lease = cluster.leases().get("e2e.long_run")
    assert lease is not None
    assert cluster.leases().request_cancel("e2e.long_run", token=lease.token).requested
    cancelled_at = time.time()
    run = wait_for(lambda: run_of(cluster, "e2e.long_run", "cancelled"), 10, "a cancelled run")
    end = wait_for(lambda: end_of(cluster, start), 5, "the task body to stop")
    latency = end["t"] - cancelled_at
    print(f"cancel latency: {latency * 1000:.0f} ms")
    assert latency <= PING_INTERVAL + SLACK
    assert "cancel" in (run.error or "")
    assert cluster.schedule("e2e.long_run").stats.failure_count == 0
    # The lease is released after the outcome is stored.
    wait_for(lambda: cluster.leases().get("e2e.long_run") is None, 5, "the lease released")


# -- 5. max_allowed_duration in the prefork and threads pools ------------------------------------
@pytest.mark.parametrize(
    ("pool", "task"),
    [
        ("prefork", "stuck"),
        ("prefork", "swallows"),
        ("threads", "too_long"),
        ("threads", "swallows"),
    ],
)
def test_run_past_max_allowed_is_terminated_in_the_pool(
    cluster_factory, pool: str, task: str
) -> None:
    """Prefork (main thread of the child: a signal, which interrupts sleep too)
    and threads (an async exception, raised at the task's next bytecode); a task
    that catches ``Exception`` must not swallow it."""
    cluster = cluster_factory([task])
    cluster.start_worker("w1", "node1", pool=pool, concurrency=2)
    cluster.sync_declarations()
    cluster.send(f"e2e.{task}", queue="w1@node1.dq2")
    start = first_start(cluster, task)
    run = wait_for(lambda: run_of(cluster, f"e2e.{task}", "terminated"), 20, "termination")
    assert "max_allowed_duration" in (run.error or "")
    print(f"[{pool}/{task}] terminated after {run.duration_s:.2f} s (max_allowed {MAX_ALLOWED} s)")
    assert MAX_ALLOWED <= run.duration_s <= MAX_ALLOWED + SLACK
    end = wait_for(lambda: end_of(cluster, start), 5, "the task body to stop")
    assert end["t"] - start["t"] <= MAX_ALLOWED + SLACK
    assert cluster.procs["w1"].poll() is None, "the worker goes on"
    assert cluster.schedule(f"e2e.{task}").stats.failure_count == 1
    # The lease is released after the outcome is stored.
    wait_for(lambda: cluster.leases().get(f"e2e.{task}") is None, 5, "the lease released")


def test_threads_pool_run_stuck_in_a_blocking_call_ends_its_process(cluster_factory) -> None:
    """An async exception cannot interrupt ``time.sleep(30)``: after
    dgs_termination_grace the run is recorded terminated, its lease released,
    and the worker process ends (exit code 70), as docs/architecture.md says."""
    cluster = cluster_factory(["stuck"])
    cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
    cluster.sync_declarations()
    cluster.send("e2e.stuck", queue="w1@node1.dq2")
    start = first_start(cluster, "stuck")
    code = cluster.procs["w1"].wait(MAX_ALLOWED + GRACE + 10)
    ended_after = time.time() - start["t"]
    print(f"[threads/stuck] process ended {ended_after:.2f} s after the start, exit code {code}")
    assert code == 70
    run = run_of(cluster, "e2e.stuck", "terminated")
    assert run is not None, cluster.runs("e2e.stuck")
    assert "max_allowed_duration" in (run.error or "")
    assert MAX_ALLOWED + GRACE <= run.duration_s <= MAX_ALLOWED + GRACE + SLACK
    assert end_of(cluster, start) is None, "the body never got past its sleep"
    assert cluster.leases().get("e2e.stuck") is None, "released before the process ended"
    assert cluster.schedule("e2e.stuck").stats.failure_count == 1
