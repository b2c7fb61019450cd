"""End to end: runtime schedules with a real beat and a real worker. A lister
task adds 50 schedules while beat runs and they run, with their arguments,
without a restart; a change and a removal reach beat at its next store poll;
a removed schedule's live run ends and it is never dispatched again; a code
sync leaves the runtime schedules alone."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from celery_dgs.runtime_schedules import RuntimeSchedules
from celery_dgs.store import OWNER_RUNTIME
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_runtime_schedules_run_change_and_go_without_a_restart(cluster_factory) -> None:
    cluster = cluster_factory(["p10"])
    cluster.start_worker("w1", "node1", pool="threads", concurrency=8)
    beat = cluster.start_beat()
    wait_for(lambda: "p10" in {e["name"] for e in cluster.starts()}, 30, "beat to dispatch")

    cluster.send("e2e.lister", 50)
    [listed] = wait_for(
        lambda: [e for e in cluster.events() if e["kind"] == "listed"], 20, "the lister"
    )
    assert (listed["inserted"], listed["errors"]) == (50, [])
    sources = {f"scrape@s{i:02d}" for i in range(50)}

    def scraped() -> set[str]:
        return {e["name"] for e in cluster.ends()} & sources

    wait_for(lambda: scraped() == sources, 40, "every runtime schedule to run once")
    assert beat.poll() is None, "the same beat, never restarted"
    # A run's end event comes from its body; the worker stores the outcome after it.
    wait_for(
        lambda: [r.outcome for r in cluster.runs("e2e.scrape@s07")] == ["success"],
        10,
        "s07's outcome stored",
    )
    store = cluster.store()
    try:
        [run] = store.runs("e2e.scrape@s07")
        assert (run.outcome, run.fenced) == ("success", False), "supervised, under its lease"
        assert run.token is not None

        api = RuntimeSchedules(store)
        # A slow one, removed while it runs: the run ends, and no run follows.
        hourly = {"period": 3600, "cooldown": 3000}
        api.upsert("e2e.scrape@slow", **hourly, args=["slow"], kwargs={"seconds": 2.0})
        wait_for(
            lambda: [e for e in cluster.starts() if e["name"] == "scrape@slow"],
            20,
            "the slow schedule to start",
        )
        assert api.remove("e2e.scrape@slow") is True
        store.request_run("e2e.scrape@slow", datetime.now(timezone.utc))  # would run at once
        # A change and a run request on another: beat re-reads it after the removal.
        assert api.upsert("e2e.scrape@s01", **hourly, args=["s01-new"]) == "updated"
        store.request_run("e2e.scrape@s01", datetime.now(timezone.utc))
        wait_for(lambda: cluster.ends("scrape@s01-new"), 20, "the changed schedule to run")
        wait_for(
            lambda: cluster.runs("e2e.scrape@slow")[0].outcome == "success",
            20,
            "the removed schedule's live run to end",
        )
        # Two more poll-and-dispatch rounds for the removed one to (wrongly) go out.
        assert api.upsert("e2e.scrape@s02", **hourly, args=["s02-again"]) == "updated"
        store.request_run("e2e.scrape@s02", datetime.now(timezone.utc))
        wait_for(lambda: cluster.ends("scrape@s02-again"), 20, "a later run request")
        assert len([e for e in cluster.starts() if e["name"] == "scrape@slow"]) == 1
        assert [r.outcome for r in store.runs("e2e.scrape@slow")] == ["success"], "history kept"

        # A code sync (a deploy) leaves the runtime schedules alone.
        before = {s.name: s.change_seq for s in store.list_schedules(owner=OWNER_RUNTIME)}
        assert len(before) == 50
        cluster.sync_declarations()
        after = {s.name: s.change_seq for s in store.list_schedules(owner=OWNER_RUNTIME)}
        assert after == before
        assert not store.get("e2e.scrape@slow").active
    finally:
        store.close()
