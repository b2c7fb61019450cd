"""End to end: real Redis server, SQLite store, real Celery worker and beat processes."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from celery_dgs.keys import KeySpace
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_runs_start_in_should_start_by_order_with_one_slot(cluster_factory) -> None:
    """Four never-run periodic schedules, one worker slot: the shortest period
    (earliest deadline) runs first, and no two runs overlap."""
    cluster = cluster_factory(["p40", "p10", "p30", "p20"])
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(lambda: len(cluster.starts()) >= 4, 60, "four runs to start")
    order = [e["name"] for e in cluster.starts()[:4]]
    assert order == ["p10", "p20", "p30", "p40"], cluster.logs()
    events = cluster.events()
    live = 0
    for event in events:  # admission: never more runs than the one slot
        live += 1 if event["kind"] == "start" else -1
        assert live <= 1


def test_excluded_node_never_runs_the_schedule(cluster_factory) -> None:
    cluster = cluster_factory(["not_on_node1"])
    cluster.start_worker("w1", "node1")
    cluster.start_worker("w2", "node2")
    cluster.start_beat()
    wait_for(lambda: cluster.starts(), 60, "the schedule to run")
    hosts = Counter(e["host"] for e in cluster.starts())
    assert hosts == Counter({"node2": len(cluster.starts())})


def test_dispatch_to_a_dead_worker_is_redispatched(cluster_factory, redis_client) -> None:
    """A worker registers, is chosen for a dispatch, and dies before starting it:
    beat takes the dispatch back after dispatch_timeout and a live worker runs it."""
    cluster = cluster_factory(["p10"], E2E_DISPATCH_TIMEOUT="3")
    registry = WorkerRegistry(redis_client, KeySpace("e2e"), ttl=30)
    # A worker that says it has 5 free slots but will never consume its queue.
    registry.register(
        WorkerInfo(
            name="ghost@node9",
            node="node9",
            queues=("celery", "ghost@node9.dq2"),
            slots=5,
            pool="prefork",
            pid=999999,
            started_at=None,
        )
    )
    cluster.start_beat()
    store = cluster.store()

    def dispatched_to_ghost() -> bool:
        from celery_dgs.dispatches import DispatchRecords

        rec = DispatchRecords(redis_client, KeySpace("e2e")).current("e2e.p10")
        return rec is not None and rec.worker == "ghost@node9"

    wait_for(dispatched_to_ghost, 30, "beat to dispatch to the ghost worker")
    registry.deregister("ghost@node9")  # the ghost dies
    cluster.start_worker("w1", "node1")
    t0 = __import__("time").time()
    wait_for(lambda: cluster.starts(), 30, "the schedule to be re-dispatched and run")
    assert cluster.starts()[0]["t"] - t0 < 3 + 5, "re-dispatched within dispatch_timeout + ticks"
    wait_for(lambda: any(r.outcome == "success" for r in store.runs("e2e.p10")), 30, "success")


def test_two_workers_racing_for_one_schedule_run_it_once(cluster_factory) -> None:
    cluster = cluster_factory(["long_run"], E2E_LONG_RUN_PERIOD="3600")
    cluster.start_worker("w1", "node1")
    cluster.start_worker("w2", "node2")
    cluster.sync_declarations()
    for _ in range(2):  # ad-hoc calls: both workers get one
        cluster.send("e2e.long_run", 2.0)
    store = cluster.store()
    wait_for(
        lambda: (
            Counter(r.outcome for r in store.runs("e2e.long_run"))
            == Counter({"success": 1, "skipped": 1})
        ),
        40,
        "one success and one skip",
    )
    assert len(cluster.starts()) == 1


def test_sigkilled_owner_is_taken_over_without_a_human(cluster_factory) -> None:
    cluster = cluster_factory(["long_run"])
    cluster.start_worker("w1", "node1")
    cluster.sync_declarations()
    cluster.send("e2e.long_run", 60.0, queue="w1@node1.dq2")
    wait_for(lambda: cluster.starts(), 30, "the first run to start")
    cluster.stop("w1", signal.SIGKILL)
    killed_at = __import__("time").time()
    cluster.start_worker("w2", "node2")
    cluster.start_beat()
    wait_for(lambda: len(cluster.starts()) >= 2, 40, "another worker to run it again")
    second = cluster.starts()[1]
    assert second["host"] == "node2"
    # ping_timeout 1.5 s + steal_delay 1 s + beat tick and start-up slack
    assert second["t"] - killed_at < 1.5 + 1.0 + 15
    assert second["token"] > cluster.starts()[0]["token"]
    store = cluster.store()
    wait_for(
        lambda: any(r.outcome == "stolen" for r in store.runs("e2e.long_run")),
        20,
        "the killed run recorded as stolen",
    )


def test_run_past_max_allowed_duration_is_terminated(cluster_factory) -> None:
    cluster = cluster_factory(["too_long"])
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(
        lambda: "terminated" in cluster.outcomes("e2e.too_long"), 40, "the run to be terminated"
    )
    store = cluster.store()
    run = next(r for r in store.runs("e2e.too_long") if r.outcome == "terminated")
    assert run.duration is not None
    assert run.duration.total_seconds() < 1.5 + 0.5 + 2.0
    assert "max_allowed_duration" in (run.error or "")
    assert store.get("e2e.too_long").stats.failure_count == 1


def test_a_leading_beat_stopped_while_it_waits_for_a_slot_exits_cleanly(cluster_factory) -> None:
    """SIGTERM reaches the leading beat while it waits for a worker's freed-slot
    signal (its sleep between rounds): Celery closes the scheduler and exits;
    the exit code is 0 and nothing is logged as a crash."""
    cluster = cluster_factory(["p10"])
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(lambda: cluster.ends("p10"), 60, "p10 to run and end")
    offset = cluster.log_size("beat")
    # p10 next runs in 10 s: beat now spends its sleep in the wait.
    wait_for(lambda: cluster.leader_pid() is not None, 10, "beat to lead")
    beat = cluster.procs["beat"]
    cluster.stop("beat", signal.SIGTERM)
    log = cluster.log_since("beat", offset)
    assert beat.returncode == 0, log
    assert "CRITICAL" not in log, log
    assert "Traceback" not in log, log
