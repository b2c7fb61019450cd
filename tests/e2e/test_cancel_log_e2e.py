"""End to end: an operator's cancel is an expected outcome, so the worker logs
it without an ERROR and without a traceback; the run record says cancelled.

Real Redis, SQLite, ``celery worker`` and ``celery beat`` processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


class MarkerCluster(Cluster):
    app_module = "tests.e2e.robust_proj"


def ended(log: str) -> list[str]:
    """Celery's lines about how a run of the task ended."""
    return [
        line
        for line in log.splitlines()
        if "e2e.marker[" in line and (" raised " in line or " succeeded " in line)
    ]


def test_a_cancelled_run_is_logged_once_without_error_or_traceback(
    tmp_path: Path, redis_url: str
) -> None:
    cluster = MarkerCluster(
        tmp_path,
        redis_url,
        ["marker"],
        E2E_MARKER=str(tmp_path / "marker"),
        E2E_MARKER_SECONDS="60",
    )
    try:
        cluster.start_worker("w1", "node1")
        cluster.start_beat()
        start = wait_for(lambda: next(iter(cluster.starts()), None), 30, "the run to start")
        offset = cluster.log_size("w1")
        assert cluster.leases().request_cancel("e2e.marker", token=start["token"])
        wait_for(lambda: "cancelled" in cluster.outcomes("e2e.marker"), 30, "the cancel")
        wait_for(
            lambda: ended(cluster.log_since("w1", offset)), 10, "Celery's line about the task's end"
        )
        log = cluster.log_since("w1", offset)
    finally:
        cluster.stop_all()
    assert "Traceback" not in log, log
    assert "ERROR/" not in log, log
    assert "CRITICAL/" not in log, log
    celery_lines = ended(log)
    assert len(celery_lines) == 1, log
    assert "INFO/" in celery_lines[0], celery_lines
    assert "cancelled" in celery_lines[0], celery_lines
    run = next(r for r in cluster.runs("e2e.marker") if r.outcome == "cancelled")
    assert run.error == "an operator cancelled the run"
