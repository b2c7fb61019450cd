"""End to end: adaptive runtime schedules with a real beat and a real worker
(interval unit: one second). Eventful and uneventful runs move the interval
index; three failures disable the schedule, beat dispatches it no more, and
the lister's next upsert enables it again."""

from __future__ import annotations

from typing import Any

import pytest

from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

NAME = "e2e.visit@a"
ADAPTIVE = {"kind": "adaptive", "interval_unit": 1, "max_failures": 3, "args": ["a"]}
#: A second schedule that runs every half second: beat's dispatches, as a clock.
TICKER = {"kind": "adaptive", "interval_unit": 0.5, "initial_interval_index": 0, "args": ["tick"]}


def ends(cluster: Cluster, source: str) -> list[dict[str, Any]]:
    return cluster.ends(f"visit@{source}")


def test_the_interval_follows_runs_and_failures_disable_until_an_upsert(
    cluster_factory: Any,
) -> None:
    cluster = cluster_factory(["p10"])
    store = cluster.store()
    try:
        api = RuntimeSchedules(store)
        cluster.redis.set("e2e:visit:a", "quiet")
        assert api.upsert(NAME, **ADAPTIVE) == "inserted"
        assert api.upsert("e2e.visit@tick", **TICKER) == "inserted"
        cluster.start_worker("w1", "node1", pool="threads", concurrency=4)
        cluster.start_beat()

        def index_after(runs: int) -> int:
            wait_for(
                lambda: (
                    len(cluster.runs(NAME)) >= runs and cluster.runs(NAME)[0].outcome != "running"
                ),
                20,
                f"run {runs} of {NAME} to end",
            )
            return int(store.get(NAME).stats.interval_index)

        # Never ran: due at once. Uneventful: 4 -> 5 (4 s), then eventful: -2 each.
        assert index_after(1) == 5
        cluster.redis.set("e2e:visit:a", "eventful")
        assert index_after(2) == 3

        # Run 3 reads "eventful" as it starts; every run after it fails. (Run 4
        # may start a second after run 3: the key changes before, not after, it.)
        def eventful_starts() -> int:
            return sum(
                e["name"] == "visit@a" and e.get("mode") == "eventful" for e in cluster.starts()
            )

        wait_for(lambda: eventful_starts() >= 2, 20, "run 3 to start")
        cluster.redis.set("e2e:visit:a", "fail")
        assert index_after(3) == 1  # failures leave the interval
        row = store.get(NAME)
        assert row.stats.next_target_at is not None
        assert row.stats.next_target_at > row.stats.last_good_start_at

        # Three failures, each retried one unit later: disabled, with its reason.
        wait_for(lambda: store.get(NAME).disabled_reason, 20, "the schedule to be disabled")
        row = store.get(NAME)
        assert row.stats.failure_count == 3
        assert row.stats.interval_index == 1, "failures leave the interval"
        assert "3 consecutive failures" in (row.disabled_reason or "")
        starts = len(cluster.runs(NAME))
        ticks = len(ends(cluster, "tick"))
        wait_for(lambda: len(ends(cluster, "tick")) >= ticks + 6, 20, "six more ticks")
        assert len(cluster.runs(NAME)) == starts, "a disabled schedule is not dispatched"

        # The lister's next pass enables it; it runs again and succeeds.
        cluster.redis.set("e2e:visit:a", "eventful")
        assert api.upsert(NAME, **ADAPTIVE) == "updated"
        wait_for(lambda: store.get(NAME).stats.failure_count == 0, 20, "a good run after enabling")
        row = store.get(NAME)
        assert row.disabled_reason is None
        assert row.stats.interval_index == 0
        oldest_first = [r.outcome for r in reversed(cluster.runs(NAME))]
        assert oldest_first[:7] == ["success"] * 3 + ["failure"] * 3 + ["success"], oldest_first
    finally:
        store.close()
