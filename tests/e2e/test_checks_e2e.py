"""End to end: deferred checks with a real beat and real workers, on seed
002's order example. An order placed adds a check at +x that, while the order
is unshipped, raises the first alert and asks to be checked again at +y,
where it raises the final alert; an order shipped in between ends with no
further alert. A worker SIGKILLed during a check has that check run again
exactly once; with beat stopped, every overdue check runs once after its
restart, in order of lateness."""

from __future__ import annotations

import json
import signal
import time
from datetime import timedelta
from typing import Any

import pytest

from celery_dgs.core.clock import SystemClock
from celery_dgs.deferred import DeferredChecks, check_template
from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TASK = "e2e.check_order"
TEMPLATE = check_template(TASK, {"within": timedelta(seconds=2), "max_checks": 3})


def checks(store: Any) -> DeferredChecks:
    return DeferredChecks(store, {TASK: TEMPLATE}, clock=SystemClock())


def alerts(cluster: Cluster) -> list[tuple[str, str]]:
    return [
        (a["order"], a["alert"])
        for a in (json.loads(x) for x in cluster.redis.lrange("e2e:alerts", 0, -1))
    ]


def starts_of(cluster: Cluster, order: str) -> list[dict[str, Any]]:
    return [e for e in cluster.starts() if e["name"] == f"check_order:{order}"]


def ended(store: Any, order: str) -> Any:
    found = store.check_history(name=f"{TASK}@check:{order}")
    return found[0] if found else None


def later_check_ends(cluster: Cluster, store: Any, order: str) -> None:
    """A check of a shipped order, added now and due in 0.5 s, runs and ends:
    beat has run its rounds and a worker has taken its messages since every
    earlier check ended, so a wrong extra run of one of them would have started."""
    cluster.redis.set(f"e2e:order:{order}", "shipped")
    checks(store).at(TASK, order, after=0.5, kwargs={"order": order})
    wait_for(lambda: ended(store, order), 20, f"the later check of {order} to run and end")
    assert len(starts_of(cluster, order)) == 1


def test_order_checks_alert_escalate_and_survive_a_killed_worker(cluster_factory: Any) -> None:
    cluster = cluster_factory(["check_order"])  # no schedule: checks only
    store = cluster.store()
    try:
        api = checks(store)
        cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
        cluster.start_worker("w2", "node2", pool="threads", concurrency=2)
        cluster.start_beat()
        placed = time.time()
        # Orders placed: a check at +x = 2 s, escalation at first check + 3 s.
        cluster.redis.set("e2e:order:shipped-early", "shipped")
        for order in ("late", "between", "shipped-early"):
            assert api.at(TASK, order, after=2, kwargs={"order": order}) == "added"
        assert api.at(TASK, "late", after=2, kwargs={"order": "late"}) == "kept"

        wait_for(lambda: ("between", "first") in alerts(cluster), 20, "the first alerts")
        cluster.redis.set("e2e:order:between", "shipped")  # shipped between +x and +y
        for order in ("late", "between", "shipped-early"):
            wait_for(lambda o=order: ended(store, o), 20, f"the check of {order} to end")
        assert sorted(alerts(cluster)) == [
            ("between", "first"),
            ("late", "final"),
            ("late", "first"),
        ]
        late = ended(store, "late")
        assert (late.outcome, late.check_count) == ("done", 2)
        assert late.first_check_at.timestamp() >= placed + 2 - 0.01
        assert (ended(store, "between").check_count, ended(store, "shipped-early").check_count) == (
            2,
            1,
        )
        for order in ("late", "between", "shipped-early"):
            for start in starts_of(cluster, order):
                assert start["t"] >= start["due"] - 0.05, f"{order} checked before it was due"
        assert [s["count"] for s in starts_of(cluster, "late")] == [0, 1]
        assert store.pending_checks() == []

        # A worker SIGKILLed during a check: the check runs again, exactly once.
        cluster.redis.set("e2e:order:killed", "slow")
        api.at(TASK, "killed", after=0.5, kwargs={"order": "killed"})
        first = wait_for(lambda: starts_of(cluster, "killed"), 20, "the slow check to start")[0]
        victim = "w1" if first["host"] == "node1" else "w2"
        cluster.signal_group(victim, signal.SIGKILL)
        cluster.redis.set("e2e:order:killed", "shipped")
        wait_for(lambda: ended(store, "killed"), 30, "the killed check to run again and end")
        record = ended(store, "killed")
        assert (record.outcome, record.check_count) == ("done", 1)
        later_check_ends(cluster, store, "after-killed")  # a wrong third run had its chance
        assert len(starts_of(cluster, "killed")) == 2
        outcomes = sorted(r.outcome for r in store.runs(f"{TASK}@check:killed"))
        assert outcomes in (["stolen", "success"], ["lost", "success"]), outcomes
    finally:
        store.close()


def test_overdue_checks_run_once_in_order_of_lateness_after_beat_restarts(
    cluster_factory: Any,
) -> None:
    cluster = cluster_factory(["check_order"])  # no schedule: checks only
    store = cluster.store()
    try:
        api = checks(store)
        cluster.redis.set("e2e:order:any", "shipped")
        cluster.start_worker("w1", "node1", pool="threads", concurrency=1)
        cluster.start_beat()
        api.at(TASK, "warm-up", after=0, kwargs={"order": "warm-up"})
        wait_for(lambda: ended(store, "warm-up"), 20, "beat to serve checks")
        cluster.stop("beat")
        orders = [f"o{i:02d}" for i in range(12)]
        for order in reversed(orders):  # added in reverse, due in order: o00 first
            cluster.redis.set(f"e2e:order:{order}", "shipped")
            due = 0.5 + 0.05 * orders.index(order)
            api.at(TASK, order, after=due, kwargs={"order": order})
        time.sleep(2)  # beat is down: every check is now overdue
        assert store.check_summary(SystemClock().now()).total_overdue == len(orders)
        cluster.start_beat()
        for order in orders:
            wait_for(lambda o=order: ended(store, o), 30, f"the overdue check {order}")
        started = [
            e["name"].split(":", 1)[1]
            for e in cluster.starts()
            if e["name"].split(":", 1)[1] in orders
        ]
        assert started == orders, "each ran once, the latest first"
        assert store.check_summary(SystemClock().now()).total_pending == 0
    finally:
        store.close()


def test_a_check_survives_a_beat_fail_over_and_runs_once(cluster_factory: Any) -> None:
    """Two beats; the leader is SIGKILLed while a slow check runs and more checks
    fall due. The standby takes over: the running check is not dispatched again,
    and every check runs exactly once."""
    cluster = cluster_factory(["check_order"])  # no schedule: checks only
    store = cluster.store()
    try:
        api = checks(store)
        cluster.start_worker("w1", "node1", pool="threads", concurrency=2)
        beat1 = cluster.start_beat("beat1")
        wait_for(lambda: cluster.leader_pid() == beat1.pid, 40, "beat1 to lead")
        beat2 = cluster.start_beat("beat2")
        wait_for(lambda: "standing by" in cluster.log_since("beat2", 0), 40, "beat2 to stand by")
        cluster.redis.set("e2e:order:slow", "slow")
        api.at(TASK, "slow", after=0, kwargs={"order": "slow"})
        wait_for(lambda: starts_of(cluster, "slow"), 20, "the slow check to start")
        orders = [f"f{i}" for i in range(4)]
        for i, order in enumerate(orders):
            cluster.redis.set(f"e2e:order:{order}", "shipped")
            api.at(TASK, order, after=1 + 0.5 * i, kwargs={"order": order})
        cluster.stop("beat1", signal.SIGKILL)  # the slow check is still running
        cluster.redis.set("e2e:order:slow", "shipped")
        wait_for(lambda: cluster.leader_pid() == beat2.pid, 20, "beat2 to take over", interval=0.05)
        for order in ["slow", *orders]:
            wait_for(lambda o=order: ended(store, o), 30, f"the check of {order} to end")
        later_check_ends(cluster, store, "after-failover")  # a wrong second run had its chance
        for order in ["slow", *orders]:
            assert len(starts_of(cluster, order)) == 1, (order, starts_of(cluster, order))
        for order in orders:
            assert (ended(store, order).outcome, ended(store, order).check_count) == ("done", 1)
        # the slow check read "slow" as it started: it alerted and asked for its next
        # check 3 s after its start, which had passed when its 4 s run ended
        slow = ended(store, "slow")
        assert (slow.outcome, slow.check_count) == ("past", 1), slow
        assert alerts(cluster) == [("slow", "first")]
        # the slow check's one run ended under beat2 and was recorded as it ran
        assert [r.outcome for r in store.runs(f"{TASK}@check:slow")] == ["success"]
        assert "celery-dgs: dispatched" in cluster.log_since("beat2", 0)
    finally:
        store.close()
