"""End to end: beat and a worker run different code (a deploy in progress).
Beat declares a schedule the worker's code does not; the worker has its task.
Beat's dispatch runs under its lease with the spec beat stored, rather than
holding the worker's slot until the dispatch record times out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_a_schedule_only_beat_declares_runs_as_beat_stored_it(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(["p10"], E2E_DISPATCH_TIMEOUT="60")
    cluster.start_worker("w1", "node1")  # its code declares e2e.p10 only
    cluster.env["E2E_SCHEDULES"] = "p10,p20"  # beat's code declares e2e.p20 too
    cluster.start_beat()
    # A dispatch the worker refused would hold its one slot for 60 s.
    wait_for(
        lambda: cluster.outcomes("e2e.p20") == ["success"] and cluster.outcomes("e2e.p10"),
        30,
        "both declared schedules to run",
    )
    [run] = cluster.runs("e2e.p20")
    assert (run.owner_name, run.token) == ("w1@node1", 1)
    assert {e["name"] for e in cluster.starts()} == {"p10", "p20"}
    log = cluster.log_since("w1", 0)
    said = [line for line in log.splitlines() if "which this worker does not declare" in line]
    assert len(said) == 1, said
    assert "'e2e.p20'" in said[0]
    assert "runs with the spec beat stored" in said[0]
    assert "not run" not in log
