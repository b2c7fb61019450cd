"""Beat high availability end to end: two real beats, real workers, one real
Redis server (broker and leases) and a SQLite store.

The leader timeout is 2 s (``E2E_BEAT_LEADER_TIMEOUT``) and the store poll
0.2 s, so a standby checks every 0.2 s and takes over within 2.2 s of the
leader's last renewal (plus a tick).
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SCHEDULES = ["ha_a", "ha_b", "ha_c"]
LEADER_TIMEOUT_S = 2.0
STANDBY_INTERVAL_S = 0.2
#: Start-up, tick and machine-load slack on top of the documented bound.
SLACK_S = 3.0


def two_beats(cluster: Cluster, scheduler: str = "celery_dgs:DeadlineScheduler") -> None:
    """beat1 leads, beat2 stands by; both workers run the schedules."""
    cluster.start_worker("w1", "node1")
    cluster.start_worker("w2", "node2")
    beat1 = cluster.start_beat("beat1", scheduler)
    wait_for(lambda: cluster.leader_pid() == beat1.pid, 40, "beat1 to lead")
    cluster.start_beat("beat2", scheduler)
    wait_for(lambda: "standing by" in cluster.log_since("beat2", 0), 40, "beat2 to stand by")
    wait_for(lambda: len(cluster.starts()) >= 4, 40, "runs under beat1")
    assert cluster.leader_pid() == beat1.pid
    assert "leading as" not in cluster.log_since("beat2", 0)
    assert "celery-dgs: dispatched" not in cluster.log_since("beat2", 0)


def assert_no_dispatch_ran_twice(cluster: Cluster) -> None:
    """Each dispatch id started at most one run, and no schedule ever had two
    live runs (events are appended by the task code, outside the system)."""
    for name in SCHEDULES:
        runs = cluster.runs(f"e2e.{name}")
        started = Counter(r.dispatch_id for r in runs if r.outcome != "skipped")
        assert all(n == 1 for n in started.values()), (name, started)
    live: dict[str, int] = Counter()
    for event in cluster.events():
        if event["kind"] in ("start", "end"):
            live[event["name"]] += 1 if event["kind"] == "start" else -1
            assert live[event["name"]] <= 1, event


def starts_after(cluster: Cluster, t: float) -> list[dict[str, Any]]:
    return [e for e in cluster.starts() if e["t"] > t]


def test_sigkilled_leader_is_replaced_by_the_standby(cluster_factory) -> None:
    cluster = cluster_factory(SCHEDULES)
    two_beats(cluster)
    old = cluster.beat_leader()
    cluster.stop("beat1", signal.SIGKILL)
    killed_at = time.time()
    beat2 = cluster.procs["beat2"]
    wait_for(lambda: cluster.leader_pid() == beat2.pid, 20, "beat2 to take over", interval=0.05)
    took = time.time() - killed_at
    print(f"SIGKILL: beat2 led {took:.2f}s after beat1 died")  # shown with -s
    assert took < LEADER_TIMEOUT_S + STANDBY_INTERVAL_S + SLACK_S, took
    new = cluster.beat_leader()
    assert new.token > old.token
    assert "replaced" in cluster.log_since("beat2", 0)
    # the schedules keep running under the new leader
    wait_for(
        lambda: {e["name"] for e in starts_after(cluster, killed_at + took)} >= set(SCHEDULES),
        30,
        "every schedule to run again",
    )
    assert_no_dispatch_ran_twice(cluster)


def test_a_beat_started_again_after_sigkill_leads_before_the_leader_timeout(
    cluster_factory,
) -> None:
    """One beat, killed and started again on the same host (a supervisor's
    restart): its dead predecessor's lease is taken once it has not been
    renewed for a renew interval (timeout / 3), not after the timeout."""
    timeout = 30.0
    cluster = cluster_factory(SCHEDULES, E2E_BEAT_LEADER_TIMEOUT=str(timeout))
    cluster.start_worker("w1", "node1")
    first = cluster.start_beat("beat1")
    wait_for(lambda: cluster.leader_pid() == first.pid, 40, "beat1 to lead")
    cluster.stop("beat1", signal.SIGKILL)
    killed_at = time.time()
    again = cluster.start_beat("beat1b")
    wait_for(lambda: cluster.leader_pid() == again.pid, 25, "the new beat to lead", interval=0.05)
    took = time.time() - killed_at
    print(f"restart after SIGKILL: led {took:.2f}s after the kill")  # shown with -s
    assert took < timeout * 0.6, took  # about timeout / 3; never the timeout
    assert "its process gone from this host" in cluster.log_since("beat1b", 0)
    wait_for(
        lambda: {e["name"] for e in starts_after(cluster, killed_at + took)} >= set(SCHEDULES),
        30,
        "every schedule to run under the new beat",
    )
    assert_no_dispatch_ran_twice(cluster)


def test_cleanly_stopped_leader_resigns_and_the_standby_leads_at_once(cluster_factory) -> None:
    """SIGTERM (a deploy): the leader resigns on its way out, so the standby
    takes over at its next check, long before the (here 20 s) timeout."""
    cluster = cluster_factory(SCHEDULES, E2E_BEAT_LEADER_TIMEOUT="20")
    two_beats(cluster)
    beat2 = cluster.procs["beat2"]
    cluster.stop("beat1", signal.SIGTERM)
    stopped_at = time.time()
    wait_for(lambda: cluster.leader_pid() == beat2.pid, 10, "beat2 to take over", interval=0.05)
    took = time.time() - stopped_at
    print(f"SIGTERM: beat2 led {took:.2f}s after beat1 exited")  # shown with -s
    assert took < 5.0
    assert "resigned leadership (token 1)" in cluster.log_since("beat1", 0)
    wait_for(
        lambda: {e["name"] for e in starts_after(cluster, stopped_at)} >= set(SCHEDULES),
        30,
        "every schedule to run under beat2",
    )
    assert_no_dispatch_ran_twice(cluster)


def test_sigstopped_leader_resumes_as_standby_without_dispatching(cluster_factory) -> None:
    cluster = cluster_factory(SCHEDULES)
    two_beats(cluster)
    beat1, beat2 = cluster.procs["beat1"], cluster.procs["beat2"]
    cluster.signal("beat1", signal.SIGSTOP)
    stopped_at = time.time()
    wait_for(lambda: cluster.leader_pid() == beat2.pid, 20, "beat2 to take over", interval=0.05)
    took = time.time() - stopped_at
    print(f"SIGSTOP: beat2 led {took:.2f}s after beat1 stopped")  # shown with -s
    assert took < LEADER_TIMEOUT_S + STANDBY_INTERVAL_S + SLACK_S
    wait_for(
        lambda: {e["name"] for e in starts_after(cluster, stopped_at)} >= set(SCHEDULES),
        30,
        "every schedule to run under beat2",
    )
    offset = cluster.log_size("beat1")
    cluster.signal("beat1", signal.SIGCONT)
    resumed = cluster.log_since  # read beat1's log from the moment it resumed
    wait_for(
        lambda: "lost leadership" in resumed("beat1", offset),
        20,
        "beat1 to notice it lost the leadership",
    )
    # A resumed beat1 that still thought it led would dispatch the schedules as
    # they fall due: let each fall due and run three more times (under beat2).
    noticed_at = time.time()
    wait_for(
        lambda: all(
            sum(e["name"] == name for e in starts_after(cluster, noticed_at)) >= 3
            for name in SCHEDULES
        ),
        30,
        "every schedule to run three more times after beat1 resumed",
    )
    tail = resumed("beat1", offset)
    before, _, after = tail.partition("lost leadership")
    assert "celery-dgs: dispatched" not in after, tail
    # Stopped between a round's fenced record write (made while it led) and the
    # publish, beat1 publishes that one round's messages as it resumes, then
    # finds it lost the lease; it decides and records nothing more.
    late = [
        datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")
        for line in before.splitlines()
        if "celery-dgs: dispatched" in line
    ]
    assert not late or (max(late) - min(late)).total_seconds() < 0.1, tail
    assert beat1.poll() is None
    assert cluster.leader_pid() == beat2.pid
    assert_no_dispatch_ran_twice(cluster)


def test_leader_stopped_between_check_and_dispatch_is_fenced(
    cluster_factory, tmp_path: Path
) -> None:
    """beat1 stops itself after it decided what to dispatch, just before the
    write; beat2 takes over and dispatches; beat1 resumes straight into the
    write with its stale decision: the fenced write is refused, it publishes
    nothing, and no dispatch runs twice."""
    flag = tmp_path / "pause-beat"
    cluster = cluster_factory(SCHEDULES, E2E_PAUSE_FILE=str(flag))
    two_beats(cluster, "tests.e2e.proj:PausingScheduler")
    beat1, beat2 = cluster.procs["beat1"], cluster.procs["beat2"]
    flag.touch()
    wait_for(
        lambda: any(e["kind"] == "beat_stopped" for e in cluster.events()),
        20,
        "beat1 to stop itself before dispatching",
    )
    stopped_at = time.time()
    offset = cluster.log_size("beat1")
    wait_for(lambda: cluster.leader_pid() == beat2.pid, 20, "beat2 to take over", interval=0.05)
    wait_for(
        lambda: {e["name"] for e in starts_after(cluster, stopped_at)} >= set(SCHEDULES),
        30,
        "every schedule to run under beat2",
    )
    cluster.signal("beat1", signal.SIGCONT)
    wait_for(
        lambda: "lost leadership" in cluster.log_since("beat1", offset),
        20,
        "beat1's dispatch to be refused",
    )
    time.sleep(2 * LEADER_TIMEOUT_S)
    tail = cluster.log_since("beat1", offset)
    assert "dispatch refused" in tail, tail
    assert "celery-dgs: dispatched" not in tail, tail
    assert beat1.poll() is None
    assert cluster.leader_pid() == beat2.pid
    assert_no_dispatch_ran_twice(cluster)
