"""End to end: a full window whose most urgent schedules cannot start yet
serves the eligible schedules past it at once, holds none of those that
cannot start yet past it, and dispatches each later one when it can start.

A real beat (the deadline order) with a window of 20 and a horizon of 2
minutes, two real workers of 4 thread slots; runtime schedules of a short
task in the store before beat starts:

* 30 *soon*: they can start 25 s after registration and should start a
  minute after that: the 30 most urgent by deadline, so the window (20 of
  them) is full and holds none that can start;
* 60 *eligible*: they can start now and should within the hour: past the
  window's end, they are the eligible part a round with free slots reads;
* 200 *far*: they can start 50 s after registration, within the horizon,
  and should a day later.

Every eligible schedule is dispatched at once, in deadline order, before
any soon one can start; while they are served, and until the far ones can
start, beat's pace says it holds the window and no far schedule (reading
the should-order slice on, as beat did before it read only the eligible,
held every soon and far one: about 290); each soon schedule is dispatched
once it can start, not a poll late.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from celery_dgs.beat_pace import PaceBoard
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.keys import KeySpace
from tests.e2e.harness import Cluster, deadline_window_env, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

WINDOW, HORIZON_S, POLL_S = 20, 120, 0.3
SOON, ELIGIBLE, FAR = 30, 60, 200
SOON_AFTER_S, FAR_AFTER_S = 25, 50
#: What the soon ones' starts may take past their next start: beat's rounds
#: and the publishes of 30 short runs on 8 slots, on a loaded two-core machine.
ROUND_SLACK_S = 3.0


def spec(name: str, period: timedelta) -> PeriodicSpec:
    return PeriodicSpec(
        task="e2e.scrape",
        configuration=name,
        scheduling_period=period,
        cooldown_duration=period / 2,
        args=(name,),
        kwargs={"seconds": 0},
    )


@pytest.fixture
def cluster(cluster_factory: type[Cluster]) -> Cluster:
    # no declared schedule: the runtime ones only
    return cluster_factory(["scrape"], **deadline_window_env(WINDOW, HORIZON_S, POLL_S))


def published(cluster: Cluster) -> list[dict[str, Any]]:
    """Beat's publishes, in beat's order."""
    events = [json.loads(e) for e in cluster.redis.lrange("e2e:events", 0, -1)]
    return [e for e in events if e["kind"] == "published"]


def test_a_full_window_serves_the_eligible_past_it_and_holds_none_of_the_later(
    cluster: Cluster,
) -> None:
    store = cluster.store()
    try:
        now = datetime.now(timezone.utc)
        store.upsert_runtime(
            [spec(f"s{i:03d}", timedelta(seconds=60 + i)) for i in range(SOON)],
            now + timedelta(seconds=SOON_AFTER_S),
        )
        store.upsert_runtime(
            [spec(f"e{i:03d}", timedelta(minutes=30 + i)) for i in range(ELIGIBLE)], now
        )
        store.upsert_runtime(
            [spec(f"f{i:03d}", timedelta(days=1)) for i in range(FAR)],
            now + timedelta(seconds=FAR_AFTER_S),
        )
        soon_at = (now + timedelta(seconds=SOON_AFTER_S)).timestamp()
        far_at = (now + timedelta(seconds=FAR_AFTER_S)).timestamp()
        for w in (1, 2):
            cluster.start_worker(f"w{w}", f"node{w}", pool="threads", concurrency=4)
        cluster.start_beat()

        def eligible_sent() -> list[dict[str, Any]]:
            return [e for e in published(cluster) if e["name"].startswith("e2e.scrape@e")]

        wait_for(lambda: len(eligible_sent()) >= ELIGIBLE, 20, "every eligible one dispatched")
        sent = eligible_sent()
        assert [e["name"] for e in sent] == [f"e2e.scrape@e{i:03d}" for i in range(ELIGIBLE)]
        assert max(e["t"] for e in sent) < soon_at, "all before any soon one could start"
        assert len({e["name"] for e in sent}) == ELIGIBLE

        board = PaceBoard(cluster.redis, KeySpace("e2e"))
        most_held = 0
        while time.time() < far_at - 2:
            pace = board.read()
            if pace is not None and pace.window is not None:
                most_held = max(most_held, pace.window.held)
            time.sleep(0.5)
        print(f"the most beat held before the far ones could start: {most_held}")
        assert 0 < most_held <= SOON + ELIGIBLE, "no far schedule held"

        def soon_sent() -> list[float]:
            return [e["t"] for e in published(cluster) if e["name"].startswith("e2e.scrape@s")]

        wait_for(lambda: len(soon_sent()) >= SOON, 30, "every soon one dispatched")
        times = soon_sent()
        first, last = min(times) - soon_at, max(times) - soon_at
        print(f"the soon ones dispatched {first:.3f} to {last:.3f} s after they could start")
        assert soon_at <= min(times), "none before it could start"
        assert max(times) < soon_at + ROUND_SLACK_S, "the 30 as they could start, 8 slots at a time"
    finally:
        store.close()
