"""Real ``celery worker`` and ``celery beat`` processes with celery-dgs's Redis
on a three-primary Redis Cluster (``dgs_redis_cluster``, hash tag on) and the
Celery broker on a single server, under the fault tests' history checker
(tests/faults/checker.py: tokens increase, no overlap, recovery within
ping_timeout + steal_delay + a tick, no run record lost).

- a worker SIGKILLed mid-run: the other worker takes the lease over;
- the beat leader SIGKILLed: the standby beat takes the leader lease over and
  dispatches every schedule again.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.e2e.harness import wait_for
from tests.faults.cluster import BOUNDS

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.redis_ha, pytest.mark.timeout(90)]

LEADER_TIMEOUT = 2.0
SCHEDULES = ["soak_0", "soak_1", "soak_2"]
#: as in tests/faults/test_beat_faults.py: leader timeout + a standby's check +
#: its first tick + a run already going on the worker + slack
RESUME_BOUND = LEADER_TIMEOUT + 0.2 + BOUNDS.tick + 1.0 + BOUNDS.slack


def test_sigkill_of_the_owner_worker_on_the_cluster(cluster_faults) -> None:
    cluster = cluster_faults(["victim"])
    cluster.start_worker("w1", "node1")
    cluster.start_worker("w2", "node2")
    cluster.start_beat()
    first = cluster.wait_start("victim")
    lease = cluster.leases().get("faults.victim")
    assert lease is not None, "the lease is on the cluster"
    assert lease.token == first["token"]
    assert not cluster.broker.keys("*e2e*"), "no celery-dgs key on the broker"
    owner = cluster.worker_of(first)
    time.sleep(BOUNDS.ping_interval)  # mid-run: it has pinged
    cluster.sigkill_main(owner)
    second = cluster.wait_start("victim", after=first, timeout=15)
    took = second["t"] - first["t"]
    print(f"cluster: taken over {took:.2f}s after the first start")
    assert second["host"] != first["host"]
    assert second["token"] > first["token"]
    cluster.assert_history_ok()


def test_beat_leader_sigkill_with_a_standby_on_the_cluster(cluster_faults) -> None:
    cluster = cluster_faults(
        SCHEDULES,
        FAULTS_SOAK_N="3",
        FAULTS_SOAK_RUN="1",
        E2E_BEAT_LEADER_TIMEOUT=str(LEADER_TIMEOUT),
    )
    cluster.start_worker("w1", "node1")
    cluster.start_worker("w2", "node2")
    beat1 = cluster.start_beat("beat1")
    wait_for(lambda: cluster.leader_pid() == beat1.pid, 40, "beat1 to lead")
    beat2 = cluster.start_beat("beat2")
    wait_for(
        lambda: {e["schedule"] for e in cluster.starts()} >= set(SCHEDULES),
        40,
        "every schedule to run under beat1",
    )
    fault = cluster.history.fault("beat_sigkill", pids=[beat1.pid])
    beat1.send_signal(signal.SIGKILL)
    wait_for(lambda: cluster.leader_pid() == beat2.pid, 20, "beat2 to take over", interval=0.05)
    took = time.monotonic() - fault["t"]
    wait_for(
        lambda: (
            {e["schedule"] for e in cluster.starts() if e["t"] > fault["t"] + took}
            >= set(SCHEDULES)
        ),
        30,
        "every schedule to run under beat2",
    )
    gaps = {
        s: min(e["t"] for e in cluster.starts(s) if e["t"] > fault["t"]) - fault["t"]
        for s in SCHEDULES
    }
    print(
        f"cluster: standby beat leads after {took:.2f}s; first run of each schedule after "
        + ", ".join(f"{s} {g:.2f}s" for s, g in gaps.items())
    )
    assert took <= LEADER_TIMEOUT + 0.2 + BOUNDS.slack
    assert max(gaps.values()) <= RESUME_BOUND, gaps
    cluster.assert_history_ok()
