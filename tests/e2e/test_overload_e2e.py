"""End to end: ``dgs_overload`` decides which schedule waits when capacity is
short. One worker slot, two schedules, both in ERROR when beat starts, and
together needing more than the slot (1.15 slots):

- ``dear``: period 3 s, runs of 2.7 s: a run buys 0.3 s of fresh time for
  2.7 slot-seconds;
- ``cheap``: period 12 s, runs of 3 s: 9 s for 3.

``fair`` (the default) serves the schedules in ERROR shortest run first, so
``dear`` goes first. ``fewest_errors`` gives ``dear`` up (its runs buy the
least) and serves ``cheap`` first, then ``dear`` once nothing else is in
ERROR or once it is ``dgs_overload_floor`` periods stale.
"""

from __future__ import annotations

import time

import pytest

from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

FLEET = [
    {"name": "e2e.scrape@dear", "period": 3, "duration_override": 2.7, "seconds": 2.7},
    {"name": "e2e.scrape@cheap", "period": 12, "duration_override": 3, "seconds": 3},
]


def first_runs(cluster_factory, overload: str) -> list[str]:
    cluster = cluster_factory(
        ["scrape"], E2E_OVERLOAD=overload, E2E_OVERLOAD_FLOOR="10", E2E_STORE_POLL="0.5"
    )
    cluster.start_worker("w1", "node1")
    store = cluster.store()
    try:
        rows = [
            {
                "name": row["name"],
                "period": row["period"],
                "duration_override": row["duration_override"],
                "args": [row["name"].split("@")[1]],
                "kwargs": {"seconds": row["seconds"]},
            }
            for row in FLEET
        ]
        report = RuntimeSchedules(store).upsert_many(rows)
        assert report.ok, report.errors
    finally:
        store.close()
    # Both past their deadline (cheap's: 12 s after it was stored), dear
    # not yet at its floor (10 periods: 30 s after its deadline).
    time.sleep(12.5)
    cluster.start_beat()
    wait_for(lambda: len(cluster.starts()) >= 2, 30, "two runs to start")
    return [e["name"] for e in cluster.starts()]


def test_fair_serves_the_shortest_run_in_error_first(cluster_factory) -> None:
    assert first_runs(cluster_factory, "fair")[:2] == ["scrape@dear", "scrape@cheap"]


def test_fewest_errors_gives_up_the_run_that_buys_least(cluster_factory) -> None:
    assert first_runs(cluster_factory, "fewest_errors")[:2] == ["scrape@cheap", "scrape@dear"]
