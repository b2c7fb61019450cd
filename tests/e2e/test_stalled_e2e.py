"""End to end: beat places no new dispatch on a worker that stopped pinging.

A long run on worker w1, then SIGSTOP to w1's whole process group; w2 is a
solo worker. w1's registration stays live for up to worker_ttl (3 s here), so
before this rule beat could place the re-dispatch on the paused w1 (at random
between two solo workers; always when w1 is a prefork worker with 2 slots, as
it then has the most free slots) and only took it back after
dispatch_timeout (4 s): a handover of ~7 s instead of ping_timeout +
steal_delay (2.5 s) plus a tick and a start.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.e2e.harness import wait_for
from tests.e2e.test_worker_e2e import first_start

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PING_TIMEOUT, STEAL_DELAY, DISPATCH_TIMEOUT = 1.5, 1.0, 4.0
SLACK = 1.0  # beat tick, worker start-up of the task, SQLite writes


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_paused_worker_gets_no_new_dispatch_and_the_handover_is_prompt(
    cluster_factory, pool: str
) -> None:
    cluster = cluster_factory(["long_run"])
    cluster.start_worker("w1", "node1", pool=pool, concurrency=2 if pool == "prefork" else 1)
    cluster.start_worker("w2", "node2")
    cluster.start_beat()
    first = first_start(cluster, "long_run")
    owner, other = ("w1", "w2") if first["host"] == "node1" else ("w2", "w1")
    if pool == "prefork":
        assert owner == "w1", "the worker with the most free slots gets the first run"
    offset = cluster.log_size("beat")
    cluster.signal_group(owner, signal.SIGSTOP)
    paused_at = time.time()
    last_ping = cluster.last_ping_after_pause("e2e.long_run")
    try:
        second = wait_for(
            lambda: next((e for e in cluster.starts() if e["pid"] != first["pid"]), None),
            30,
            "another worker to take the schedule over",
        )
    finally:
        cluster.signal_group(owner, signal.SIGCONT)
    handover = second["t"] - paused_at
    beat_log = cluster.log_since("beat", offset)
    print(f"[{pool}] handover {handover:.2f} s after SIGSTOP (owner {owner})")
    assert second["host"] == f"node{other[-1]}"
    warning = f"worker {owner}@node{owner[-1]} owns a lease not pinged for over ping_timeout"
    assert warning in beat_log, beat_log
    assert f"to {owner}@" not in beat_log, "a dispatch was placed on the paused worker"
    assert "taken back" not in beat_log
    since_ping = second["t"] - last_ping
    assert since_ping > PING_TIMEOUT + STEAL_DELAY, since_ping
    assert handover < PING_TIMEOUT + STEAL_DELAY + SLACK, handover
