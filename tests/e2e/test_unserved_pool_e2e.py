"""End to end: a pool none of the live workers consumes (its workers
stopped) holds more urgent schedules than a round looks past. Beat sets them
aside, so the default pool's schedules run on its idle slots, and ``status``
says why the others wait."""

from __future__ import annotations

from typing import Any

import pytest

from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import Cluster, wait_for
from tests.e2e.test_cli_e2e import status

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: More than a dispatch round looks past (``plan_dispatches``' 1,000 skips).
UNSERVED = 1_200


def test_a_pool_without_workers_keeps_no_other_pools_slot_idle(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(["p10"])
    store = cluster.store()
    try:
        api = RuntimeSchedules(store)
        # Never run: due at once; a 1-minute period makes them the most urgent.
        report = api.upsert_many(
            {"task": f"e2e.scrape@gpu{i:04d}", "period": 60, "pool": "gpu", "args": [i]}
            for i in range(UNSERVED)
        )
        assert not report.errors
        for key in ("s1", "s2", "s3"):
            api.upsert(f"e2e.scrape@{key}", period=3600, args=[key])
        cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
        cluster.start_beat()
        wait_for(
            lambda: {"scrape@s1", "scrape@s2", "scrape@s3"} <= {e["name"] for e in cluster.ends()},
            30,
            "the default pool's schedules to run",
        )
        _, rows = status(cluster, "e2e.scrape@gpu0000")
        why = " ".join(h["message"] for h in rows["e2e.scrape@gpu0000"]["holds"])
        assert "no live worker consumes its pool 'gpu'" in why, why
        assert store.runs("e2e.scrape@gpu0000") == []
    finally:
        store.close()


def test_a_pools_only_worker_restarting_is_served_again_at_once(cluster_factory: Any) -> None:
    """Every schedule is in one pool; its only worker stops, so beat sets them
    all aside (a worker of the default pool stays). The worker's return alone
    (no store change) starts their runs again within seconds."""
    cluster: Cluster = cluster_factory(["p10"])
    store = cluster.store()
    try:
        api = RuntimeSchedules(store)
        for key in ("g1", "g2", "g3"):
            api.upsert(f"e2e.scrape@{key}", period=2, pool="gpu", args=[key])
        cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
        cluster.start_worker("gpu", "node2", pool="threads", concurrency=2, queues="gpu")
        cluster.start_beat()
        wait_for(lambda: len(cluster.ends()) >= 3, 30, "the pool's schedules to run")
        cluster.stop("gpu")

        def set_aside() -> bool:
            _, rows = status(cluster, "e2e.scrape@g1")
            return any(
                "no live worker consumes its pool 'gpu'" in h["message"]
                for h in rows["e2e.scrape@g1"]["holds"]
            )

        wait_for(set_aside, 30, "beat to set the pool's schedules aside")
        ended = len(cluster.ends())
        cluster.start_worker("gpu", "node2", pool="threads", concurrency=2, queues="gpu")
        wait_for(lambda: len(cluster.ends()) > ended, 15, "a run after the worker's return")
    finally:
        store.close()
