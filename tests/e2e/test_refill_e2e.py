"""End to end: a freed slot is refilled at once. A fleet of short runs (50 ms)
keeps a 4-slot worker busy: each run's end wakes beat, which dispatches the
next one within milliseconds instead of at its next store poll (2 s here),
which would allow about 2 runs a second."""

from __future__ import annotations

import statistics

import pytest

from celery_dgs.beat_pace import PaceBoard
from celery_dgs.keys import KeySpace
from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SLOTS = 4
RUN_S = 0.05
FLEET = 400
#: Far below the slots' ceiling (SLOTS / RUN_S = 80 runs/s), far above what the
#: store poll alone allows (SLOTS per 2 s poll = 2 runs/s), so that a loaded
#: machine still passes and a beat that waits for its poll does not.
MIN_RUNS_PER_S = 12.0


def test_short_runs_keep_the_slots_busy(cluster_factory) -> None:
    cluster = cluster_factory(["scrape"], E2E_STORE_POLL="2", E2E_MAX_LOOP="5")
    store = cluster.store()
    try:
        report = RuntimeSchedules(store).upsert_many(
            [
                {
                    "name": f"e2e.scrape@r{i:03d}",
                    "period": 3600,
                    "args": [f"r{i:03d}"],
                    "kwargs": {"seconds": RUN_S},
                }
                for i in range(FLEET)
            ]
        )
        assert report.ok, report.errors
    finally:
        store.close()
    cluster.start_worker("w1", "node1", pool="threads", concurrency=SLOTS)
    cluster.start_beat()
    # Warm-up: beat loaded, the first runs went through the worker.
    wait_for(lambda: len(cluster.ends()) >= 20, 60, "the first 20 runs to end")
    first = len(cluster.ends())
    wait_for(lambda: len(cluster.ends()) >= first + 120, 60, "120 more runs to end")
    ends = sorted(e["t"] for e in cluster.ends())[first : first + 120]
    rate = (len(ends) - 1) / (ends[-1] - ends[0])
    starts = sorted(e["t"] for e in cluster.starts())
    # A slot's wait: from a run's end to the next start after it.
    gaps = [min((s for s in starts if s >= t), default=t) - t for t in ends[:-SLOTS]]
    print(
        f"{rate:.1f} runs/s on {SLOTS} slots of {RUN_S * 1000:.0f} ms runs "
        f"(ceiling {SLOTS / RUN_S:.0f}/s); a freed slot's wait: median "
        f"{statistics.median(gaps) * 1000:.1f} ms, max {max(gaps) * 1000:.0f} ms"
    )
    assert rate >= MIN_RUNS_PER_S
    assert statistics.median(gaps) < 0.2
    # The leader's pace, as `celery dgs status` reads it.
    board = PaceBoard(cluster.redis, KeySpace("e2e"))
    pace = wait_for(lambda: board.read(), 15, "the leader's pace")
    print(f"beat pace: {pace.to_dict()}")
    assert pace.dispatches > 0
