"""End to end: a pool whose one slot is always busy holds more urgent
eligible schedules than a round looks past. Beat lets them wait for that
slot out of its index, so the default pool's schedules run on its idle
slots, and the busy pool's slot takes its most urgent next."""

from __future__ import annotations

from typing import Any

import pytest

from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: More than a dispatch round looks past (``plan_dispatches``' 1,000 skips).
BACKLOG = 1_200
#: Seconds each run of the busy pool lasts.
GPU_RUN_S = 4


def test_a_busy_pool_keeps_no_other_pools_slot_idle(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(["p10"])
    store = cluster.store()
    try:
        api = RuntimeSchedules(store)
        # Never run: due at once; a 1-minute period makes them the most urgent.
        report = api.upsert_many(
            {
                "task": f"e2e.scrape@gpu{i:04d}",
                "period": 60,
                "pool": "gpu",
                "args": [f"gpu{i:04d}", GPU_RUN_S],
            }
            for i in range(BACKLOG)
        )
        assert not report.errors
        for key in ("s1", "s2", "s3"):
            api.upsert(f"e2e.scrape@{key}", period=3600, args=[key])
        cluster.start_worker("g1", "gpunode", pool="threads", concurrency=1, queues="gpu")
        cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
        cluster.start_beat()
        wait_for(
            lambda: {"scrape@s1", "scrape@s2", "scrape@s3"} <= {e["name"] for e in cluster.ends()},
            30,
            "the default pool's schedules to run beside the busy pool",
        )
        wait_for(
            lambda: len([e for e in cluster.ends() if e["name"].startswith("scrape@gpu")]) >= 2,
            30,
            "two runs of the busy pool",
        )
        gpu_runs = [e["name"] for e in cluster.ends() if e["name"].startswith("scrape@gpu")]
        # The most urgent first: never-run schedules of one period, by name.
        assert gpu_runs[:2] == sorted(gpu_runs[:2]), gpu_runs
        assert gpu_runs[0] == "scrape@gpu0000", gpu_runs
        assert all(name.startswith("scrape@gpu000") for name in gpu_runs[:2]), gpu_runs
    finally:
        store.close()
