"""End to end: partial failures and the retry delay by run duration, with a
real beat and a real worker (real Redis server, SQLite store).

``e2e.items`` is declared with ``partial_failure_threshold=0.2`` and a retry
backoff of one second. Its first run takes 3 s and reports 3 of 10 items
failed: a ``partial_failure``, whose condition names the counts. Its retry
waits as long as the failed run took (3 s, ``dgs_retry_duration_fraction``
1), not the ladder's 1 s. The retry reports 1 of 10 failed: a good run, its
counts kept on the run record, the schedule and in ``celery dgs runs``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from celery_dgs.core.condition import Level, Reason
from celery_dgs.core.items import PARTIAL_FAILURE, ItemCounts
from celery_dgs.status.row import build_row
from tests.e2e.harness import Cluster
from tests.e2e.test_cli_e2e import dgs

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

NAME = "e2e.items"


def test_a_partial_failure_fails_the_run_and_its_retry_waits_by_its_duration(
    cluster_factory: Any,
) -> None:
    cluster: Cluster = cluster_factory(["items"], E2E_RETRY_BACKOFF="1")
    cluster.redis.set("e2e:items", json.dumps({"ok": 7, "failed": 3, "seconds": 3}))
    cluster.start_worker("w1", "node1")
    cluster.start_beat()

    failed = cluster.wait_ended_run(NAME, "the first run to end", timeout=30)
    cluster.redis.set("e2e:items", json.dumps({"ok": 9, "failed": 1, "seconds": 0.1}))
    assert failed.outcome == PARTIAL_FAILURE, cluster.outcomes(NAME)
    assert failed.items == ItemCounts(7, 3)
    assert failed.error is not None
    assert "3 of 10 items failed" in failed.error
    assert failed.duration_s >= 3.0

    # The condition says so, naming the counts (status's own row builder).
    stored = cluster.schedule(NAME)
    assert stored.stats.failure_count == 1
    assert stored.stats.last_items == ItemCounts(7, 3)
    row = build_row(stored, None, failed.ended_at)
    assert (row.level, row.reason) == (Level.WARNING, Reason.ITEMS_FAILED.value)
    assert "3 of 10 items failed" in row.message

    good = cluster.wait_ended_run(NAME, "the retry to end", timeout=30, outcome="success")
    assert good.items == ItemCounts(9, 1)
    # The retry waited the failed run's duration (3 s), not the ladder's 1 s.
    waited = (good.started_at - failed.ended_at).total_seconds()
    assert waited >= failed.duration_s - 0.1, waited
    assert waited < failed.duration_s + 4, waited
    stats = cluster.schedule(NAME).stats
    assert stats.failure_count == 0
    assert stats.last_items == ItemCounts(9, 1)
    assert stats.last_good_start_at == good.started_at

    # `celery dgs runs` and `status` show the counts.
    runs = dgs(cluster, "runs", NAME, "--json")
    assert runs.returncode == 0, runs.stderr
    newest, oldest = json.loads(runs.stdout)["runs"][:2]
    assert (newest["outcome"], newest["items_ok"], newest["items_failed"]) == ("success", 9, 1)
    assert (oldest["outcome"], oldest["items_ok"], oldest["items_failed"]) == (
        PARTIAL_FAILURE,
        7,
        3,
    )
    table = dgs(cluster, "runs", NAME)
    assert "1/10 failed" in table.stdout
    assert "3/10 failed" in table.stdout
    status = dgs(cluster, "status", "--json")
    [doc] = [r for r in json.loads(status.stdout)["schedules"] if r["name"] == NAME]
    assert (doc["last_items_ok"], doc["last_items_failed"]) == (9, 1)
    assert doc["condition"] == "OK"
