"""End to end: new retry settings reach a failing schedule at beat's restart.

A real beat (holding a window of schedules whose next start is within 60 s)
and a real worker run ``e2e.cli_fail``, which always fails, under
``dgs_retry_backoff=(3600,)``: its kept next start is an hour after its
failure, so beat does not even read it. Both are stopped and started again
with ``dgs_retry_backoff=(2,)``: beat's start rewrites the kept start time
of the failing schedule (one log line says so), reads it into its window,
and the schedule runs again within seconds, not an hour later.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

NAME = "e2e.cli_fail"


def test_a_shorter_retry_backoff_runs_the_failing_schedule_at_restart(
    cluster_factory: Any,
) -> None:
    cluster: Cluster = cluster_factory(
        ["cli_fail"],
        E2E_RETRY_BACKOFF="3600",
        E2E_SCHEDULE_WINDOW_SIZE="10",
        E2E_SCHEDULE_WINDOW="60",
    )
    began = time.monotonic()
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    failed = cluster.wait_ended_run(NAME, "the first run to fail", timeout=20)
    assert failed.outcome == "failure"
    cluster.stop("beat")
    cluster.stop("w1")
    assert len(cluster.runs(NAME)) == 1
    store = cluster.store()
    try:
        stored = store.get(NAME)
        assert stored.stats.failure_count == 1
        kept = store.kept_times(NAME).next_can_start_at
        assert kept == stored.stats.last_end_at + timedelta(hours=1)
    finally:
        store.close()

    cluster.env["E2E_RETRY_BACKOFF"] = "2"
    log_from = cluster.log_size("beat")
    restarted = time.time()
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(lambda: len(cluster.runs(NAME)) >= 2, 15, "a run under the new settings")
    second = cluster.runs(NAME)[0]
    assert second.started_at.timestamp() - restarted < 12
    assert second.started_at >= failed.ended_at + timedelta(seconds=2)
    log = cluster.log_since("beat", log_from)
    assert (
        "kept start times of 1 failing schedules rewritten for "
        "dgs_retry_backoff=(2,), dgs_retry_duration_fraction=1"
    ) in log
    print(
        f"ran again {second.started_at.timestamp() - restarted:.1f} s after the restart; "
        f"the test took {time.monotonic() - began:.1f} s"
    )
