"""A broker redelivery that arrives after its message expired (docs/guarantees.md G6).

Beat publishes every dispatch with ``expires`` = ``dgs_dispatch_timeout``. With
``acks_late`` and a visibility timeout shorter than the run, the Redis broker
hands the message out again while the run is live; when that happens after the
expiry, Celery discards it unstarted (``task_revoked``, ``expired``). Then
nothing runs and a ``skipped`` row says so, as for a redelivery before the
expiry (tests/e2e/test_fencing_e2e.py).
"""

from __future__ import annotations

import pytest

from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(90)]

#: Long enough that the broker redelivers while the run is live, with a busy
#: machine delaying kombu's restore of the unacknowledged message by seconds.
RUN_SECONDS = 10.0
DISPATCH_TIMEOUT = 1.5
VISIBILITY_TIMEOUT = 2.0  # kombu looks for overdue messages every 0.5 s here


def test_a_redelivery_after_the_message_expired_runs_nothing_and_is_recorded_skipped(
    fault_cluster,
) -> None:
    cluster = fault_cluster(
        ["victim"],
        FAULTS_RUN_SECONDS=str(RUN_SECONDS),
        FAULTS_ACKS_LATE="1",
        FAULTS_VISIBILITY_TIMEOUT=str(VISIBILITY_TIMEOUT),
        E2E_DISPATCH_TIMEOUT=str(DISPATCH_TIMEOUT),
    )
    cluster.start_worker("w1", "node1", pool="prefork", concurrency=2)
    cluster.start_beat()
    first = cluster.wait_start("victim")
    dispatch = first["dispatch_id"]
    assert dispatch
    discarded = f"Discarding revoked task: faults.victim[{dispatch}]"
    wait_for(
        lambda: discarded in cluster.logs(),
        RUN_SECONDS,
        "the broker to redeliver the message after it expired",
    )
    end = cluster.wait_end(first["run_id"], timeout=RUN_SECONDS + 5)
    assert end["outcome"] == "success"
    cluster.wait_recorded("faults.victim", first["run_id"])
    # No cooldown: beat dispatches the next run at once; by its start the
    # expired redeliveries' skip rows are written (the worker's main process
    # writes one as it discards each).
    cluster.wait_start("victim", after=first)
    log = (cluster.tmp / "w1.log").read_text(errors="replace")
    received = log.count(f"faults.victim[{dispatch}] received")
    print(f"message delivered {received} times, {log.count(discarded)} discarded as expired")
    assert received >= 2
    assert log.count(discarded) == received - 1, "every redelivery came after the expiry"
    rows = [r for r in cluster.runs("faults.victim") if r.dispatch_id == dispatch]
    ran = [(r.run_id, r.outcome) for r in rows if r.outcome != "skipped"]
    assert ran == [(first["run_id"], "success")], [(r.outcome, r.error) for r in rows]
    skips = [r.error or "" for r in rows if r.outcome == "skipped"]
    assert len(skips) == received - 1, skips
    assert all("discarded the message unstarted: expired" in e for e in skips), skips
    assert [s["run_id"] for s in cluster.starts("victim") if s["dispatch_id"] == dispatch] == [
        first["run_id"]
    ]
    cluster.assert_history_ok()
