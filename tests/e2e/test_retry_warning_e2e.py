"""End to end: a worker whose retry settings differ from beat's says so, once.

The store holds the retry settings beat adopted, ``dgs_retry_backoff=(2,)``.
A real worker (prefork: the check at its start runs in the main process, the
runs end in its pool child) started with ``dgs_retry_backoff=(1,)`` logs one
warning naming both settings, and no other after two failing runs of
``e2e.cli_fail`` (which always fails) dispatched by a real beat; the worker
keeps writing its own step. A worker with beat's settings logs no such line.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from celery_dgs.core.timing import RetryLadder
from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

NAME = "e2e.cli_fail"
BEATS = RetryLadder((timedelta(seconds=2),))
WARNING = (
    "celery-dgs: this worker's retry settings dgs_retry_backoff=(1,), "
    "dgs_retry_duration_fraction=1 differ from beat's dgs_retry_backoff=(2,), "
    "dgs_retry_duration_fraction=1 (the store's kept settings): the failing runs it ends "
    "wait its steps, not beat's; give beat and the workers the same settings"
)


def store_holding_beats_settings(cluster: Cluster) -> None:
    """The store as beat's start leaves it: its settings :data:`BEATS` adopted."""
    store = cluster.store()
    try:
        store.adopt_retry_ladder(BEATS)
    finally:
        store.close()


def two_failing_runs(cluster: Cluster, worker: str) -> str:
    """The worker's log once it ended two failing runs of :data:`NAME`."""
    wait_for(
        lambda: cluster.log_since(worker, 0).count(f"of {NAME} ended: failure") >= 2,
        30,
        "two failing runs",
    )
    return cluster.log_since(worker, 0)


def settled(cluster: Cluster) -> None:
    """Once beat stopped: the last run of :data:`NAME` ended over 1.5 s ago."""

    def quiet() -> bool:
        runs = cluster.runs(NAME)
        ended = runs[0].ended_at if runs and runs[0].outcome != "running" else None
        return ended is not None and time.time() - ended.timestamp() > 1.5

    wait_for(quiet, 15, "the last dispatched run to end")


def test_a_worker_with_other_retry_settings_warns_once(cluster_factory: Any) -> None:
    began = time.monotonic()
    cluster: Cluster = cluster_factory(["cli_fail"], E2E_RETRY_BACKOFF="1")
    store_holding_beats_settings(cluster)
    cluster.start_worker("w1", "node1", pool="prefork", concurrency=1)
    assert cluster.log_since("w1", 0).count(WARNING) == 1  # at its start
    cluster.env["E2E_RETRY_BACKOFF"] = "2"
    cluster.start_beat()
    log = two_failing_runs(cluster, "w1")
    assert log.count("retry settings") == 1
    assert log.count(WARNING) == 1
    cluster.stop("beat")
    settled(cluster)
    cluster.stop("w1")
    store = cluster.store()
    try:
        last_end = store.get(NAME).stats.last_end_at
        kept = store.kept_times(NAME).next_can_start_at
    finally:
        store.close()
    assert cluster.outcomes(NAME)[0] == "failure"
    assert kept == last_end + timedelta(seconds=1)  # its own step, not beat's 2 s
    print(f"the test took {time.monotonic() - began:.1f} s")


def test_a_worker_with_beats_retry_settings_does_not_warn(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(["cli_fail"], E2E_RETRY_BACKOFF="2")
    store_holding_beats_settings(cluster)
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    log = two_failing_runs(cluster, "w1")
    assert "retry settings" not in log
