"""End to end: seed 001's revisit groups with a real beat, a real worker (one
slot) and Redis. Eight adaptive sources visited every second, each visit
taking half a second, keep more schedules eligible than the slot serves (a
backlog, each of them past its freshness target); a source the lister adds
through the runtime API, with an 8-second unit (its target 8 s away), is
visited in the first round after beat reads it. Today's order
(``dgs_adaptive_group_shares = None``) serves the sources past their target
first, so it waits for them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SOURCES = [f"s{i}" for i in range(8)]
#: A one-second ladder at its floor; the runs report nothing, so it stays there.
VISIT = {"kind": "adaptive", "interval_unit": 1, "initial_interval_index": 0}
RUN_S = 0.5
NEW_UNIT_S = 8


def upsert(api: RuntimeSchedules, source: str, unit_s: float = 1) -> None:
    fields = {**VISIT, "interval_unit": unit_s, "args": [source], "kwargs": {"seconds": RUN_S}}
    assert api.upsert(f"e2e.visit@{source}", **fields) == "inserted"


def others_started_first(cluster: Cluster, added_at: float) -> int:
    """Visits of other sources that started after ``added_at`` and before the
    new source's first visit."""
    wait_for(
        lambda: any(e["name"] == "visit@new" for e in cluster.starts()),
        30,
        "the new source's visit",
    )
    after = [e for e in cluster.starts() if e["t"] >= added_at]
    names = [e["name"] for e in after]
    return names.index("visit@new")


def backlog_then_new_source(cluster: Cluster) -> int:
    store = cluster.store()
    try:
        api = RuntimeSchedules(store)
        for source in SOURCES:
            upsert(api, source)
        cluster.start_worker("w1", "node1")
        cluster.start_beat()
        # Every source visited twice: all of them visited, the slot never idle.
        wait_for(
            lambda: all(len(cluster.ends(f"visit@{s}")) >= 2 for s in SOURCES),
            60,
            "two visits of every source",
        )
        added_at = time.time()
        upsert(api, "new", NEW_UNIT_S)
        return others_started_first(cluster, added_at)
    finally:
        store.close()


def test_a_never_visited_source_runs_first_under_a_backlog(cluster_factory: Any) -> None:
    cluster = cluster_factory(["visit"])
    ahead = backlog_then_new_source(cluster)
    # At most the visit beat dispatched before it read the new schedule (its
    # store poll is 0.2 s, a visit 0.5 s): the first round after that takes it.
    assert ahead <= 1, f"{ahead} visits of other sources started before the new source's"


def test_todays_order_makes_the_new_source_wait(cluster_factory: Any) -> None:
    cluster = cluster_factory(["visit"], E2E_ADAPTIVE_GROUPS="none")
    ahead = backlog_then_new_source(cluster)
    assert ahead >= len(SOURCES), (
        f"only {ahead} visits of other sources started before the new source's"
    )
