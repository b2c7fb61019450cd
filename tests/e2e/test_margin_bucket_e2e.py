"""End to end: a real worker's run end moves a schedule to its new margin's
bucket in the store, which beat's window reads by.

Real Redis, SQLite store, one real worker and a real beat. Two periodic
schedules (tests/e2e/proj.py): ``p10`` (no duration override: no margin
before it ran, then its average run time, about 0.8 s) and ``lax_a`` (a
duration override of 10 s: its margin whatever its runs). Once each has
run, the store's kept ``margin_bucket`` of each row is the bucket of its
margin (``start_margin`` of its spec and the statistics the worker wrote),
``window_margin_buckets`` lists exactly those buckets, and each bucket's
slice (``window_schedules(bucket=...)``) holds its schedule.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.laxity import NO_MARGIN_BUCKET, margin_bucket
from celery_dgs.core.timing import start_margin
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

NAMES = ("e2e.p10", "e2e.lax_a")


def test_a_run_end_moves_the_schedule_to_its_margins_bucket(cluster_factory) -> None:
    cluster = cluster_factory(["p10", "lax_a"])
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    for name in NAMES:
        wait_for(lambda n=name: "success" in cluster.outcomes(n), 60, f"{name} to succeed")
    store = cluster.store()
    try:
        buckets = {}
        for name in NAMES:
            row = store.get(name)
            assert row.spec is not None
            assert row.kept_should_start_by is not None
            margin = start_margin(row.spec, row.stats)
            assert row.kept_error_at == row.kept_should_start_by + margin, name
            assert row.kept_margin_bucket == margin_bucket(margin.total_seconds()), name
            buckets[name] = row.kept_margin_bucket
        assert buckets["e2e.lax_a"] == margin_bucket(10.0)
        assert buckets["e2e.p10"] != NO_MARGIN_BUCKET, "its run gave it a margin"
        assert store.window_margin_buckets() == sorted(set(buckets.values()))
        later = datetime.now(timezone.utc) + timedelta(days=1)
        for name, bucket in buckets.items():
            rows = store.window_schedules(
                can_after=None, can_until=later, key_after=None, limit=5, bucket=bucket
            )
            assert name in [r.name for r in rows], cluster.logs()
    finally:
        store.close()
