"""End to end: ``task.delay()`` of a scheduled task before beat (or ``celery dgs
sync``) ever stored the schedule. The worker stores it from its own
declarations (the same app), runs it under the lease and records the run;
the sync that follows finds it stored and unchanged and keeps its stats."""

from __future__ import annotations

import pytest

from celery_dgs.errors import UnknownScheduleError
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

WARNING = "celery-dgs: schedule e2e.p20 was not in the store"


def test_delay_before_any_sync_stores_the_schedule_and_records_the_run(cluster_factory) -> None:
    cluster = cluster_factory(["p20", "p30"])
    cluster.start_worker("w1", "node1")
    assert cluster.runs("e2e.p20") == [], "nothing stored yet"

    cluster.send("e2e.p20")  # as p20.delay() does: no dispatch record, default queue
    run = wait_for(lambda: next(iter(cluster.runs("e2e.p20")), None), 30, "the run's record")
    run = wait_for(
        lambda: (r := cluster.runs("e2e.p20")[0]).outcome != "running" and r, 30, "the run to end"
    )
    assert (run.outcome, run.dispatch_id, run.token, run.fenced) == ("success", None, 1, False)
    assert [e["name"] for e in cluster.starts()] == ["p20"]
    stored = cluster.schedule("e2e.p20")
    assert stored.active
    assert stored.current_token == 1
    assert stored.stats.last_good_start_at == run.started_at
    assert stored.stats.average_good_duration is not None
    assert cluster.logs().count(WARNING) == 1
    with pytest.raises(UnknownScheduleError, match=r"no schedule named 'e2e\.p30'"):
        cluster.schedule("e2e.p30")  # only what ran was stored: the sync does the rest

    seq = stored.change_seq
    cluster.sync_declarations()  # what beat does at start: p20 unchanged, p30 inserted
    synced = cluster.schedule("e2e.p20")
    assert synced.change_seq == seq, "the sync found the worker's row equal to its declaration"
    assert synced.stats == stored.stats
    assert cluster.schedule("e2e.p30").active

    cluster.send("e2e.p20")
    wait_for(
        lambda: [r.outcome for r in cluster.runs("e2e.p20")] == ["success", "success"],
        30,
        "a second run",
    )
    assert cluster.schedule("e2e.p20").current_token == 2
    assert cluster.logs().count(WARNING) == 1, "stored once"


def test_a_skip_of_a_schedule_not_stored_yet_is_recorded(cluster_factory) -> None:
    cluster = cluster_factory(["not_on_node1"])
    cluster.start_worker("w1", "node1")
    cluster.send("e2e.not_on_node1")  # excluded on node1: a skip, which is recorded too
    skip = wait_for(
        lambda: next(iter(cluster.runs("e2e.not_on_node1")), None), 30, "the skip's record"
    )
    assert (skip.outcome, skip.error) == ("skipped", "node node1 is excluded")
    assert cluster.schedule("e2e.not_on_node1").current_token is None
    assert cluster.starts() == []
