"""A worker process whose wall clock jumps mid-run: an hour forward,
then two hours back. Leases, pings and run times come from the Redis server's
``TIME`` and timeouts from the monotonic clock, so the run must go on and end
as if nothing happened: no steal, no termination, a duration the store
measures right.

The jump is real for the whole worker process: libfaketime (LD_PRELOAD, from
the ``libfaketime`` wheel) fakes ``time()``/``gettimeofday``/
``clock_gettime(CLOCK_REALTIME)``, reading the offset from a file on every
call; the monotonic clock is left alone (``DONT_FAKE_MONOTONIC=1``).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from celery_dgs.embedded import RedisServerProcess
from tests.e2e.harness import wait_for
from tests.faults.cluster import BOUNDS
from tests.faults.faketime import faketime_env, faketime_server_binary

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(90)]

RUN_SECONDS = 4.0


#: How far the stored duration of a run may be from its real length: the run
#: is timed between the grant and the recording of its end (store writes).
DURATION_TOLERANCE_S = 0.5


#: How far a history event's wall clock may be from the expected shift: the
#: event's two clock readings are taken one after the other.
CLOCK_TOLERANCE_S = 0.5


def wall_clock_shift(event: dict[str, Any]) -> float:
    """How far the wall clock of the process that wrote ``event`` was from this
    one's: the event records both ``time.time()`` (``wall``) and the machine's
    one monotonic clock (``t``)."""
    return float(event["wall"] - event["t"]) - (time.time() - time.monotonic())


def test_worker_wall_clock_jumps_mid_run(fault_cluster, tmp_path: Path) -> None:
    offset = tmp_path / "faketime.rc"
    offset.write_text("+0\n")
    cluster = fault_cluster(["victim"], FAULTS_RUN_SECONDS=str(RUN_SECONDS))
    cluster.start_worker("w1", "node1", env=faketime_env(offset))
    cluster.start_beat()
    first = cluster.wait_start("victim")
    cluster.start_worker("w2", "node2")  # would take the schedule over if w1 lost it
    assert first["host"] == "node1"
    cluster.history.fault("clock_jump", pids=[cluster.procs["w1"].pid], seconds=3600)
    offset.write_text("+3600\n")
    time.sleep(1.0)
    cluster.history.fault("clock_jump", pids=[cluster.procs["w1"].pid], seconds=-7200)
    offset.write_text("-3600\n")
    end = cluster.wait_end(first["run_id"], timeout=RUN_SECONDS + 5)
    assert end["outcome"] == "success"
    assert abs(end["t"] - first["t"] - RUN_SECONDS) < BOUNDS.slack
    # The worker wrote its history events with its own wall clock: libfaketime
    # did shift it, by nothing at the start and by -3600 s at the end.
    assert abs(wall_clock_shift(first)) < CLOCK_TOLERANCE_S, first
    assert abs(wall_clock_shift(end) + 3600) < CLOCK_TOLERANCE_S, end
    row = cluster.wait_recorded("faults.victim", first["run_id"])
    assert row.outcome == "success"
    assert row.duration_s is not None
    assert abs(row.duration_s - RUN_SECONDS) < BOUNDS.slack, row
    assert abs((row.started_at - datetime.now(timezone.utc)).total_seconds()) < 60, (
        "started_at is the server's time, not the worker's faked clock"
    )
    # No cooldown: beat starts the next run at once; the checker sees that no
    # run overlapped the one whose owner's clock jumped (nothing was stolen).
    cluster.assert_history_ok()


@pytest.mark.parametrize("step", [1.2, -30.0], ids=["forward", "backward"])
def test_the_redis_servers_clock_steps_mid_run(
    fault_cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: float
) -> None:
    """Redis's ``TIME`` dates every run; its clock steps while a run goes on.
    The stored duration (and the EWMA it feeds) is the worker's monotonic
    measure, and the run does not end before it started. The forward step
    stays under ping_timeout, so the lease is never up for taking."""
    assert 0 < step < BOUNDS.ping_timeout or step < 0
    offset = tmp_path / "redis-faketime.rc"
    offset.write_text("+0\n")
    with monkeypatch.context() as env:  # only the Redis server runs under faketime
        for key, value in faketime_env(offset).items():
            env.setenv(key, value)
        server = RedisServerProcess(binary=faketime_server_binary()).start()
    try:
        cluster = fault_cluster(
            ["victim"], redis_url=server.url, FAULTS_RUN_SECONDS=str(RUN_SECONDS)
        )
        cluster.start_worker("w1", "node1")
        cluster.start_beat()
        first = cluster.wait_start("victim")
        offset.write_text(f"{step:+}\n")
        end = cluster.wait_end(first["run_id"], timeout=RUN_SECONDS + 5)
        assert end["outcome"] == "success"
        row = cluster.wait_recorded("faults.victim", first["run_id"])
        cluster.stop_all()
    finally:
        server.cleanup()
    assert row.outcome == "success"
    assert row.duration_s is not None
    assert abs(row.duration_s - RUN_SECONDS) < DURATION_TOLERANCE_S, row
    assert row.ended_at is not None
    assert row.ended_at >= row.started_at, row


def test_a_worker_clock_ahead_past_the_dispatch_timeout_is_named(
    fault_cluster, tmp_path: Path
) -> None:
    """Celery judges a message's ``expires`` (beat's send time plus
    ``dgs_dispatch_timeout``, by beat's clock) by the worker's clock: one
    running 60 s ahead discards every dispatch as expired. Its log says so
    at registration, an ERROR, and each skip row names the clock."""
    offset = tmp_path / "faketime.rc"
    offset.write_text("+60\n")
    cluster = fault_cluster(["victim"], E2E_DISPATCH_TIMEOUT="4")
    cluster.start_worker("w1", "node1", env=faketime_env(offset))
    ahead = re.compile(r"ERROR/MainProcess\] celery-dgs: this worker's clock is 1m(0\.\ds)? ahead")
    wait_for(lambda: ahead.search(cluster.log_since("w1", 0)), 30, "the worker to log its clock")
    log = cluster.log_since("w1", 0)
    assert "so it discards every dispatch as expired on arrival; run NTP on this host" in log
    cluster.start_beat()
    skips = wait_for(
        lambda: [r for r in cluster.runs("faults.victim") if r.outcome == "skipped"],
        30,
        "a dispatch discarded as expired",
        interval=0.1,
    )
    assert "discarded the message unstarted: expired" in (skips[0].error or ""), skips[0]
    assert re.search(r"which is 1m(0\.\ds)? ahead of Redis's: run NTP on that host", skips[0].error)
    assert cluster.starts("victim") == []  # nothing ran
    offset.write_text("+0\n")  # the clock is fixed: the next dispatch runs
    cluster.wait_start("victim")
