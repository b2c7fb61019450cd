"""End to end: schedules whose blackout began after their rows were written
are not held through it, and are served when it ends.

A real beat (the deadline order) with a window of 20 and a horizon of 2
minutes, two real workers of 4 thread slots; runtime schedules of a short
task in the store before beat starts:

* 30 *soon*: they can start a minute after registration and should start
  soon after: the most urgent by deadline, so the window (20 of them) is
  full and holds none that can start;
* 100 *blacked out*: they could start 10 s before beat starts, and should
  within about ten minutes, but their daily blackout begins 3 s after they
  are written and lasts 30 s;
* 20 *eligible*: they can start now, and should within the half hour.

Beat starts once the blackout has begun. Its eligible part reads the
blacked-out schedules on its way to the eligible ones: their kept next
start moves to the blackout's end in the store, and beat lets go of them.
So while the blackout lasts beat holds the window and the eligible ones,
not the hundred (the code before held all of them, about 140), dispatches
every eligible one at once and no blacked-out one; when the blackout
ends, it dispatches every blacked-out one.
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
SOON, BLACKED, ELIGIBLE = 30, 100, 20
BLACKOUT_IN_S, BLACKOUT_S = 3, 30


def spec(name: str, period: timedelta, blackout: tuple[str, str] | None = None) -> PeriodicSpec:
    return PeriodicSpec(
        task="e2e.scrape",
        configuration=name,
        scheduling_period=period,
        cooldown_duration=period / 2,
        blackout_periods=() if blackout is None else (blackout,),
        args=(name,),
        kwargs={"seconds": 0},
    )


def clock_time(moment: datetime) -> str:
    """``moment``'s UTC time of day as a blackout bound (``HH:MM:SS``)."""
    return moment.strftime("%H:%M:%S")


@pytest.fixture
def cluster(cluster_factory: type[Cluster]) -> Cluster:
    # no declared schedule: the runtime ones only
    return cluster_factory(["scrape"], **deadline_window_env(WINDOW, HORIZON_S, POLL_S))


def published(cluster: Cluster, prefix: str) -> list[dict[str, Any]]:
    """Beat's publishes of the schedules whose configuration starts with
    ``prefix``, in beat's order."""
    events = [json.loads(e) for e in cluster.redis.lrange("e2e:events", 0, -1)]
    return [
        e
        for e in events
        if e["kind"] == "published" and e["name"].startswith(f"e2e.scrape@{prefix}")
    ]


def test_schedules_in_a_blackout_begun_since_are_not_held_and_run_after_it(
    cluster: Cluster,
) -> None:
    store = cluster.store()
    try:
        now = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=1)
        begins = now + timedelta(seconds=BLACKOUT_IN_S)
        ends = begins + timedelta(seconds=BLACKOUT_S)
        blackout = (clock_time(begins), clock_time(ends))
        store.upsert_runtime(
            [spec(f"s{i:03d}", timedelta(seconds=90 + i)) for i in range(SOON)],
            now + timedelta(seconds=60),
        )
        store.upsert_runtime(
            [spec(f"b{i:03d}", timedelta(minutes=10, seconds=i), blackout) for i in range(BLACKED)],
            now - timedelta(seconds=10),
        )
        store.upsert_runtime(
            [spec(f"e{i:03d}", timedelta(minutes=30 + i)) for i in range(ELIGIBLE)], now
        )
        for w in (1, 2):
            cluster.start_worker(f"w{w}", f"node{w}", pool="threads", concurrency=4)
        wait_for(lambda: time.time() > begins.timestamp() + 0.5, 30, "the blackout began")
        cluster.start_beat()

        wait_for(lambda: len(published(cluster, "e")) >= ELIGIBLE, 20, "every eligible one sent")
        sent = published(cluster, "e")
        assert [e["name"] for e in sent] == [f"e2e.scrape@e{i:03d}" for i in range(ELIGIBLE)]

        board = PaceBoard(cluster.redis, KeySpace("e2e"))
        most_held = 0
        while time.time() < ends.timestamp() - 1:
            pace = board.read()
            if pace is not None and pace.window is not None:
                most_held = max(most_held, pace.window.held)
            time.sleep(0.5)
        print(f"the most beat held during the blackout: {most_held}")
        assert 0 < most_held <= WINDOW + ELIGIBLE + 10, "the blacked-out ones not held"
        assert published(cluster, "b") == [], "none sent during its blackout"

        wait_for(lambda: len(published(cluster, "b")) >= BLACKED, 40, "each sent after it")
        times = [e["t"] for e in published(cluster, "b")]
        print(f"the blacked-out ones sent {min(times) - ends.timestamp():.3f} s after it ended")
        assert min(times) >= ends.timestamp(), "none before the blackout ended"
        assert len({e["name"] for e in published(cluster, "b")}) == BLACKED
    finally:
        store.close()
