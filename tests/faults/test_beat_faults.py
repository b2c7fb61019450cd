"""Beat fail-over under the history checker: two beats, the leader
SIGKILLed or SIGSTOPped (then resumed) while three schedules run back to back
on two workers. The standby takes over within the leader timeout; the runs go
on; no dispatch starts two runs and no schedule has two live runs.

Leader timeout 2 s (the leader renews every third of it; a standby checks
every 0.2 s); beat's tick 1 s.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.e2e.harness import wait_for
from tests.faults.cluster import BOUNDS

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(120)]

LEADER_TIMEOUT = 2.0
SCHEDULES = ["soak_0", "soak_1", "soak_2"]
#: leader timeout + a standby's check + its first tick + a run already going
#: on the worker (up to FAULTS_SOAK_RUN) + slack
RESUME_BOUND = LEADER_TIMEOUT + 0.2 + BOUNDS.tick + 1.0 + BOUNDS.slack


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["sigkill", "sigstop"])
def test_leader_beat_fault_with_a_standby(fault_cluster, sig: signal.Signals) -> None:
    cluster = fault_cluster(
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
    name = "sigkill" if sig == signal.SIGKILL else "sigstop"
    fault = cluster.history.fault(f"beat_{name}", pids=[beat1.pid])
    offset = cluster.log_size("beat1")
    beat1.send_signal(sig)
    try:
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
    finally:
        if sig == signal.SIGSTOP:
            beat1.send_signal(signal.SIGCONT)
            cluster.history.resumed(pids=[beat1.pid])
    gaps = {
        s: min(e["t"] for e in cluster.starts(s) if e["t"] > fault["t"]) - fault["t"]
        for s in SCHEDULES
    }
    print(
        f"beat {name}: standby leads after {took:.2f}s; first run of each schedule after "
        + ", ".join(f"{s} {g:.2f}s" for s, g in gaps.items())
    )
    assert took <= LEADER_TIMEOUT + 0.2 + BOUNDS.slack
    assert max(gaps.values()) <= RESUME_BOUND, gaps
    if sig == signal.SIGSTOP:  # the resumed old leader stands by and dispatches nothing
        wait_for(
            lambda: "lost leadership" in cluster.log_since("beat1", offset),
            20,
            "beat1 to notice it lost the leadership",
        )
        time.sleep(2 * LEADER_TIMEOUT)
        assert "celery-dgs: dispatched" not in cluster.log_since("beat1", offset)
        assert cluster.leader_pid() == beat2.pid
    cluster.assert_history_ok()
