"""End to end: fixed-capacity mode. Workers that do not register
(``dgs_worker_register = False``) form an anonymous pool; beat, seeing no
registered worker, admits at most ``dgs_capacity`` runs at a time, in
should_start_by order, and publishes them to the pool queue."""

from __future__ import annotations

import re

import pytest

from celery_dgs.keys import KeySpace
from celery_dgs.registry import WorkerRegistry
from tests.e2e.harness import Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CAPACITY = 2
# Never run, periods 100..400 s (cooldown 60 s): should_start_by p10 < p20 < p30 < p40.
ORDER = ["p10", "p20", "p30", "p40"]


def max_concurrent(cluster: Cluster) -> int:
    """The most runs live at once, from the tasks' own start/end events."""
    edges = sorted([(e["t"], 1) for e in cluster.starts()] + [(e["t"], -1) for e in cluster.ends()])
    live = peak = 0
    for _, step in edges:  # at equal times an end (-1) sorts first
        live += step
        peak = max(peak, live)
    return peak


def test_unregistered_workers_get_at_most_capacity_runs_in_deadline_order(
    cluster_factory,
) -> None:
    cluster = cluster_factory(ORDER, E2E_WORKER_REGISTER="0", E2E_CAPACITY=str(CAPACITY))
    for i in (1, 2, 3):  # three free slots: the capacity, not the workers, is the limit
        cluster.start_worker(f"w{i}", f"node{i}")
    assert WorkerRegistry(cluster.redis, KeySpace("e2e"), ttl=3).live_workers() == []
    assert "does not register (dgs_worker_register = False)" in cluster.log_since("w1", 0)
    cluster.sync_declarations()
    cluster.start_beat()

    wait_for(lambda: len(cluster.ends()) >= len(ORDER), 60, "the four runs to end")
    peak = max_concurrent(cluster)
    starts = sorted(cluster.starts(), key=lambda e: e["t"])
    print(
        f"capacity {CAPACITY}: at most {peak} runs at once; start order "
        f"{[e['name'] for e in starts]}, on {sorted({e['host'] for e in starts})}"
    )
    assert peak == CAPACITY
    # Admitted in should_start_by order: beat's dispatches (to any worker, "*")...
    beat_log = cluster.log_since("beat", 0)
    dispatched = re.findall(r"dispatched e2e\.(\w+) to \* ", beat_log)
    assert dispatched == ORDER, beat_log[-3000:]
    # ...and the starts: the first two admitted before the last two.
    assert {e["name"] for e in starts[:CAPACITY]} == set(ORDER[:CAPACITY])
    assert {e["name"] for e in starts[CAPACITY:]} == set(ORDER[CAPACITY:])
    # A run's end event comes from its body; the worker stores the outcome after it.
    wait_for(
        lambda: all(cluster.outcomes(f"e2e.{n}") == ["success"] for n in ORDER),
        10,
        "the four outcomes stored",
    )
