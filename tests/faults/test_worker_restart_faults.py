"""A worker killed with its pool and restarted under the same name (what a
process manager does): the new instance gets work at once; the old
instance's lease is taken over as a dead owner's, and beat's log does not
flap between setting the worker aside and hearing from it again.

Timings chosen so the difference shows: ``ping_timeout`` 6 s and
``steal_delay`` 3 s (the old lease is takeable 9 s after its last ping), and
``worker_ttl`` 30 s (a registration refresh every 10 s). A beat that counted
the old lease against the new instance's one slot, or set the new instance
aside for it until a refresh, would send it nothing for 9 s or more.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.e2e.harness import wait_for
from tests.faults.checker import Bounds

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(120)]

PING_TIMEOUT, STEAL_DELAY, WORKER_TTL = 6.0, 3.0, 30.0
#: From the new registration to the new instance's first start: a beat tick,
#: the message, the task's start.
FIRST_DISPATCH_WITHIN = 3.0


def registered_pid(cluster: Any, hostname: str) -> int | None:
    from celery_dgs.registry import WorkerRegistry

    registry = WorkerRegistry(cluster.redis, cluster.keyspace(), ttl=WORKER_TTL)
    return next((w.pid for w in registry.live_workers() if w.name == hostname), None)


def test_a_worker_restarted_under_its_name_gets_work_at_once(fault_cluster) -> None:
    """w1 (solo, one slot) runs victim; a run of quick is requested, which
    waits for the slot; w1 and its pool are killed and a new w1@node1 starts:
    quick must start on it at once, and victim once its lease is takeable."""
    cluster = fault_cluster(
        ["victim", "quick"],
        E2E_PING_TIMEOUT=str(PING_TIMEOUT),
        E2E_STEAL_DELAY=str(STEAL_DELAY),
        E2E_WORKER_TTL=str(WORKER_TTL),
    )
    cluster.bounds = Bounds(
        ping_interval=0.5, ping_timeout=PING_TIMEOUT, steal_delay=STEAL_DELAY, slack=2.0
    )
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    first = cluster.wait_start("victim")
    store = cluster.store()
    try:
        store.request_run("faults.quick", datetime.now(timezone.utc))
    finally:
        store.close()
    time.sleep(1.0)  # mid-run: it has pinged; quick waits for the slot
    offset = cluster.log_size("beat")
    cluster.sigkill_worker("w1")
    proc = cluster.start_worker("w1", "node1")  # the old registration is still live
    wait_for(
        lambda: registered_pid(cluster, "w1@node1") == proc.pid,
        30,
        "the new instance of w1@node1 to register",
    )
    registered = time.monotonic()
    new_start = wait_for(
        lambda: next(
            (e for e in cluster.starts() if e["pid"] == proc.pid and e["t"] > first["t"]), None
        ),
        30,
        "a run on the new instance",
    )
    waited = new_start["t"] - registered
    print(f"new instance's first run ({new_start['schedule']}) {waited:.2f}s after it registered")
    assert new_start["schedule"] == "quick"
    assert waited < FIRST_DISPATCH_WITHIN, waited
    taken_over = cluster.wait_start("victim", after=first, timeout=30)
    assert taken_over["pid"] == proc.pid
    beat_log = wait_for(  # the take-over's dispatch: the rounds of the stale window are logged
        lambda: (
            (log := cluster.log_since("beat", offset))
            and "dispatched faults.victim to w1@node1" in log
            and log
        ),
        10,
        "beat's log of the take-over's dispatch",
    )
    assert "w1@node1 owns a lease not pinged" not in beat_log, beat_log
    assert "w1@node1 is heard from again" not in beat_log, beat_log
    assert "taken back" not in beat_log, beat_log
    cluster.assert_history_ok()
