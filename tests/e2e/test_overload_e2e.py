"""End to end: ``dgs_overload`` decides which schedule waits when capacity is
short. One worker slot, three schedules, all in ERROR when beat starts, and
together needing more than the slot (2.05 slots):

- ``dear1``, ``dear2``: period 3 s, runs of 2.7 s: a run buys 0.3 s of fresh
  time for 2.7 slot-seconds;
- ``cheap``: period 12 s, runs of 3 s: 9 s for 3.

``fair`` (the default) serves the schedules in ERROR shortest run first, so
a ``dear`` goes first. ``fewest_errors`` gives the ``dear`` ones up (their
runs buy the least) and serves ``cheap`` first; then one ``dear`` runs (the
only other schedule in ERROR) while the other waits, and beat says so: the
report ``status`` and the page read names the one waiting.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.clock import FakeClock
from celery_dgs.overload_board import OverloadBoard
from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import wait_for
from tests.e2e.test_cli_e2e import dgs

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

FLEET = [
    {"name": "e2e.scrape@dear1", "period": 3, "duration_override": 2.7, "seconds": 2.7},
    {"name": "e2e.scrape@dear2", "period": 3, "duration_override": 2.7, "seconds": 2.7},
    {"name": "e2e.scrape@cheap", "period": 12, "duration_override": 3, "seconds": 3},
]


def started(cluster_factory, overload: str):
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
        # Stored 12.5 s ago: when beat starts, all are past their deadline
        # (cheap's: 12 s after it was stored), the dear ones not yet at their
        # floor (10 periods: 27 s after their deadline).
        stored_at = FakeClock(datetime.now(timezone.utc) - timedelta(seconds=12.5))
        report = RuntimeSchedules(store, clock=stored_at).upsert_many(rows)
        assert report.ok, report.errors
    finally:
        store.close()
    cluster.start_beat()
    wait_for(lambda: len(cluster.starts()) >= 2, 30, "two runs to start")
    return cluster


def test_fair_serves_the_shortest_run_in_error_first(cluster_factory) -> None:
    cluster = started(cluster_factory, "fair")
    assert cluster.starts()[0]["name"] in ("scrape@dear1", "scrape@dear2")


def test_fewest_errors_gives_up_the_runs_that_buy_least(cluster_factory) -> None:
    cluster = started(cluster_factory, "fewest_errors")
    first, second = (e["name"] for e in cluster.starts()[:2])
    assert first == "scrape@cheap"
    assert second in ("scrape@dear1", "scrape@dear2")
    board = OverloadBoard(cluster.redis, cluster.keyspace())
    report = wait_for(
        lambda: (r := board.read()) is not None and r.waiting_count and r, 15, "a report"
    )
    assert report.overloaded
    assert report.waiting[0].name in ("e2e.scrape@dear1", "e2e.scrape@dear2")

    # What an operator reads: beat rewrites the report every 5 s, and some of
    # them find no schedule waiting (the one in ERROR is the next choice).
    def overload_line() -> str | None:
        out = dgs(cluster, "status").stdout
        return out if "fewest_errors makes" in out else None

    shown = wait_for(overload_line, 30, "status to name what the overload gives up")
    assert "in ERROR wait, whose runs buy the least fresh time per slot-second" in shown
    assert "e2e.scrape@dear" in shown
