"""Fault injection, worker side: real Redis server, real ``celery
worker``/``celery beat`` processes, second-scale timings (ping every 0.5 s,
ping_timeout 1.5 s, steal_delay 1 s, beat tick 1 s).

Each scenario injects its fault into the run of ``victim`` and then hands the
whole history to the checker (``checker.py``): tokens increase, no two live
runs except the bounded window after a steal from a paused owner, no stale
write accepted, recovery within ping_timeout + steal_delay + one tick (+ 1 s
slack), no run record lost.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from tests.faults.cluster import BOUNDS

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(90)]


def test_sigkill_of_the_worker_child_mid_run(fault_cluster) -> None:
    """The prefork child running the task dies; its lease is taken over (by a
    sibling child or the other worker) within the recovery bound."""
    cluster = fault_cluster(["victim"])
    cluster.start_worker("w1", "node1", pool="prefork", concurrency=2)
    cluster.start_beat()
    first = cluster.wait_start("victim")
    assert first["pid"] != cluster.procs["w1"].pid, "the run is in a pool child"
    time.sleep(BOUNDS.ping_interval)  # mid-run: it has pinged
    cluster.sigkill([first["pid"]])
    second = cluster.wait_start("victim", after=first, timeout=15)
    print(f"taken over {second['t'] - first['t']:.2f}s after the start")
    cluster.assert_history_ok()


def test_a_pool_process_killed_mid_run_is_a_failure_at_once(fault_cluster) -> None:
    """The prefork child running the task is killed (for its memory, say) while
    its worker lives: once Celery reports the process lost (worker_lost_wait,
    0.5 s here), the worker's main process records the run as a failure
    naming the signal and frees its lease, so the retry backoff applies. The
    lease's takeover (ping_timeout + steal_delay, a minute here) would have
    recorded it as stolen: a task killed at every run would then be retried
    at once, forever."""
    cluster = fault_cluster(
        ["victim"], E2E_PING_TIMEOUT="30", E2E_STEAL_DELAY="30", FAULTS_WORKER_LOST_WAIT="0.5"
    )
    cluster.start_worker("w1", "node1", pool="prefork", concurrency=2)
    cluster.start_beat()
    first = cluster.wait_start("victim")
    time.sleep(BOUNDS.ping_interval)  # mid-run: it has pinged
    cluster.sigkill([first["pid"]])
    cluster.wait_start("victim", after=first, timeout=15)  # the retry step: 0.5 s
    lost = {r.run_id: r for r in cluster.runs("faults.victim")}[first["run_id"]]
    log = cluster.log_since("w1", 0)
    assert lost.outcome == "failure", (lost, log)
    assert (lost.error or "").startswith("its process died: Worker exited prematurely"), lost
    assert "SIGKILL" in (lost.error or ""), lost
    assert lost.ended_at is not None
    assert (lost.ended_at - lost.started_at).total_seconds() < 10, lost
    assert "died: Worker exited prematurely" in log


def test_a_run_past_celerys_hard_time_limit_is_a_failure(fault_cluster) -> None:
    """Celery ends the pool process of a run past the task's hard
    ``time_limit`` (SIGTERM, as at a cold shutdown). The worker's main process
    records the run as a failure before that, so the retry backoff applies:
    recorded ``yielded`` (the process reading the signal as its worker's
    shutdown), it was re-dispatched at once and killed again, forever."""
    cluster = fault_cluster(
        ["victim"],
        FAULTS_TIME_LIMIT="1.5",
        E2E_PING_TIMEOUT="30",
        E2E_STEAL_DELAY="30",
    )
    cluster.start_worker("w1", "node1", pool="prefork", concurrency=2)
    cluster.start_beat()
    first = cluster.wait_start("victim")
    cluster.wait_start("victim", after=first, timeout=15)  # the retry step: 0.5 s
    ended = {r.run_id: r for r in cluster.runs("faults.victim")}[first["run_id"]]
    log = cluster.log_since("w1", 0)
    assert ended.outcome == "failure", (ended, log)
    assert ended.error == "Celery ended its process past the task's hard time_limit (1.5s)", ended
    assert ended.ended_at is not None
    assert (ended.ended_at - ended.started_at).total_seconds() < 5, ended
    assert "Hard time limit (1.5s) exceeded" in log


def test_a_dead_workers_run_of_a_paused_schedule_is_ended_by_beat(fault_cluster) -> None:
    """The worker dies mid-run (its node crashed) and the schedule is paused:
    beat sends it to no one, so no worker takes its lease over. Beat's reaper
    does, by the steal protocol (a steal marked past ping_timeout, the lease
    freed steal_delay later), and ends the row ``stolen``; nothing stays
    ``running``."""
    cluster = fault_cluster(["victim"], FAULTS_REAP_INTERVAL="0.5")
    cluster.start_worker("w1", "node1", pool="solo")
    cluster.start_beat()
    first = cluster.wait_start("victim")
    store = cluster.store()
    try:
        store.set_paused("faults.victim", True)
    finally:
        store.close()
    killed_at = time.monotonic()
    cluster.sigkill_worker("w1")
    ended = cluster.wait_ended_run(
        "faults.victim", "the dead worker's run to be ended", BOUNDS.recovery + 5
    )
    print(f"ended {time.monotonic() - killed_at:.1f}s after the kill")
    assert ended.run_id == first["run_id"]
    assert ended.outcome == "stolen", ended
    assert "no worker took the lease over" in (ended.error or ""), ended
    assert cluster.leases().get("faults.victim") is None
    assert cluster.schedule("faults.victim").stats.failure_count == 0


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_sigkill_of_the_worker_main_process(fault_cluster, pool: str) -> None:
    """Solo: the main process is the run's. Prefork: only the main process is
    killed; the orphaned child running the task ends too (billiard), unlogged,
    and the test logs it exited when it is gone."""
    cluster = fault_cluster(["victim"])
    first, owner = cluster.first_run_on_two_workers(pool=pool)
    time.sleep(BOUNDS.ping_interval)
    cluster.sigkill_main(owner)
    second = cluster.wait_start("victim", after=first, timeout=15)
    assert second["host"] != first["host"]
    cluster.assert_history_ok()


def test_sigstop_of_the_owner_past_the_steal_bound_then_sigcont(fault_cluster) -> None:
    """Paused longer than ping_timeout + steal_delay: the other worker takes the
    schedule over; after SIGCONT the old run finds it lost the lease at its next
    ping and stops (the checker allows exactly that window)."""
    cluster = fault_cluster(["victim"])
    first, owner = cluster.first_run_on_two_workers()
    time.sleep(BOUNDS.ping_interval)
    cluster.sigstop(owner)
    try:
        second = cluster.wait_start("victim", after=first, timeout=15)
        time.sleep(BOUNDS.ping_interval)  # both "live": the paused one does not know yet
    finally:
        cluster.sigcont(owner)
    with contextlib.suppress(AssertionError):  # if it runs on, the checker says so
        cluster.wait_end(first["run_id"], timeout=BOUNDS.after_resume + 2)
    cluster.assert_history_ok()
    assert second["host"] != first["host"]
    stored = {r.run_id: r for r in cluster.runs("faults.victim")}
    assert stored[first["run_id"]].outcome == "stolen"


@pytest.mark.parametrize(
    ("pool", "cold"), [("solo", False), ("prefork", False), ("solo", True), ("prefork", True)]
)
def test_worker_shutdown_mid_run(fault_cluster, pool: str, cold: bool) -> None:
    """Warm (SIGTERM) or cold (SIGQUIT, Celery cancels the task before it sends
    worker_shutting_down): the run yields (no failure), the worker leaves the
    registry before the lease is freed, and the next run follows on the other
    worker within the standard recovery bound."""
    cluster = fault_cluster(["victim"])
    first, owner = cluster.first_run_on_two_workers(pool=pool)
    time.sleep(BOUNDS.ping_interval)
    code = cluster.shutdown(owner, cold=cold)
    second = cluster.wait_start("victim", after=first, timeout=15)
    took = second["t"] - first["t"]
    stored = {r.run_id: r for r in cluster.runs("faults.victim")}
    print(
        f"{'cold' if cold else 'warm'}: exit code {code}; old run "
        f"{stored[first['run_id']].outcome}; next run {took:.2f}s after the first start"
    )
    assert stored[first["run_id"]].outcome == "yielded", stored[first["run_id"]].error
    assert second["host"] != first["host"]
    assert not cluster.schedule("faults.victim").stats.failure_count
    cluster.assert_history_ok()


def test_cold_shutdown_with_a_soft_shutdown_timeout(fault_cluster) -> None:
    """worker_soft_shutdown_timeout = 1 s: Celery lets the run go on for 1 s,
    then cancels it. The worker leaves the registry when the soft shutdown
    starts (beat sends nothing more there), the run yields when it is
    cancelled, and the next run follows on the other worker within the bound."""
    cluster = fault_cluster(["victim"], FAULTS_SOFT_SHUTDOWN="1")
    first, owner = cluster.first_run_on_two_workers(pool="prefork")
    time.sleep(BOUNDS.ping_interval)
    cluster.shutdown(owner, cold=True)
    second = cluster.wait_start("victim", after=first, timeout=15)
    stored = {r.run_id: r for r in cluster.runs("faults.victim")}
    print(
        f"soft then cold: old run {stored[first['run_id']].outcome}; next run "
        f"{second['t'] - first['t']:.2f}s after the first start"
    )
    assert stored[first["run_id"]].outcome == "yielded", stored[first["run_id"]].error
    assert second["host"] != first["host"]
    log = (cluster.tmp / f"{owner}.log").read_text(errors="replace")
    left, soft = log.find("left the worker registry"), log.find("Initiating Soft Shutdown")
    assert 0 <= left < soft, "the worker left the registry before the soft shutdown's wait"
    cluster.assert_history_ok()
