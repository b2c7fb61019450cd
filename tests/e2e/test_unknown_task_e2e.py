"""End to end: schedules of a task the workers do not have (stored by code
synced ahead of a deploy). The worker registers the tasks it has; beat
places no run of another task on it, so its slots keep serving the others,
and ``status`` says why the new ones wait."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import Cluster, wait_for
from tests.e2e.test_cli_e2e import status

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

MISSING = "e2e.not_deployed"


def test_a_task_no_worker_has_waits_with_its_reason_and_blocks_no_slot(
    cluster_factory: Any,
) -> None:
    cluster: Cluster = cluster_factory(["p10"], E2E_DISPATCH_TIMEOUT="30")
    store = cluster.store()
    try:
        api = RuntimeSchedules(store)
        for key in ("a", "b"):  # as many as the worker's slots
            api.upsert(f"{MISSING}@{key}", period=60)
        for key in ("s1", "s2", "s3"):
            api.upsert(f"e2e.scrape@{key}", period=3600, args=[key])
        cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
        cluster.start_beat()
        # With the dispatch timeout at 30 s, two dispatches of the missing task
        # would hold both slots for 30 s: the others run at once instead.
        wait_for(
            lambda: {"scrape@s1", "scrape@s2", "scrape@s3"} <= {e["name"] for e in cluster.ends()},
            15,
            "the deployed task's schedules to run",
        )
        store.request_run("e2e.scrape@s1", datetime.now(timezone.utc))
        wait_for(lambda: len(cluster.ends("scrape@s1")) == 2, 15, "a requested run")

        _, rows = status(cluster, MISSING)
        for key in ("a", "b"):
            row = rows[f"{MISSING}@{key}"]
            assert not row["running"], row
            why = " ".join(h["message"] for h in row["holds"])
            assert f"has its task {MISSING!r}" in why, row["holds"]
            assert "w1@node1" in why, why
            assert store.runs(f"{MISSING}@{key}") == [], "never dispatched, never skipped"
        assert "unregistered task" not in cluster.logs()
    finally:
        store.close()
