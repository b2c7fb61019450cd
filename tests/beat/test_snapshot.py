"""Beat's snapshot for the metrics: built on beat's thread when asked, waited
for a short while by the asking thread, the latest one served otherwise."""

from __future__ import annotations

import dataclasses
import threading
import time
from datetime import datetime, timedelta, timezone

import redis

from celery_dgs.beat.sending import DispatchSender
from celery_dgs.beat.snapshot import BeatSnapshot, SnapshotSlot
from celery_dgs.beat.state import BeatState
from celery_dgs.beat.types import Pending, Tracked
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.settings import DgsSettings
from celery_dgs.store.memory import MemoryScheduleStore

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def state_with(names: list[str]) -> BeatState:
    state = BeatState()
    spec = PeriodicSpec(task="t.x", scheduling_period=timedelta(hours=1))
    for name in names:
        state.tracked[name] = Tracked(spec, ScheduleStats(registered_at=NOW))
    return state


def test_a_snapshot_copies_the_state_and_does_not_follow_it() -> None:
    state = state_with(["t.a", "t.b"])
    state.held.add("t.b")
    state.pending["t.a"] = Pending("d1", "celery@w", 1.0)
    snap = BeatSnapshot.of(state)
    state.tracked.pop("t.a")
    state.held.clear()
    state.pending.clear()
    assert set(snap.tracked) == {"t.a", "t.b"}
    assert snap.held == {"t.b"}
    assert snap.pending == 1


def test_before_any_publication_the_slot_serves_an_empty_snapshot() -> None:
    slot = SnapshotSlot()
    assert not slot.asked
    start = time.monotonic()
    assert slot.request(0.05) == BeatSnapshot()
    assert time.monotonic() - start >= 0.05
    assert slot.asked  # beat publishes at the end of its next round


def test_a_request_gets_what_beat_publishes_next() -> None:
    slot = SnapshotSlot()
    slot.publish(BeatSnapshot(pending=1))
    got: list[BeatSnapshot] = []
    reader = threading.Thread(target=lambda: got.append(slot.request(5.0)))
    reader.start()
    deadline = time.monotonic() + 5
    while not slot.asked and time.monotonic() < deadline:  # beat's round looks at the flag
        time.sleep(0.001)
    assert slot.asked
    slot.publish(BeatSnapshot(pending=2))
    reader.join(5)
    assert got == [BeatSnapshot(pending=2)]
    assert not slot.asked


def test_without_a_round_the_latest_is_served_after_the_wait() -> None:
    slot = SnapshotSlot()
    slot.publish(BeatSnapshot(pending=3))
    assert slot.request(0.01) == BeatSnapshot(pending=3)
    assert slot.latest() == BeatSnapshot(pending=3)


def test_serving_a_run_request_replaces_the_tracked_value_a_snapshot_holds() -> None:
    state = state_with(["t.a"])
    state.tracked["t.a"] = dataclasses.replace(state.tracked["t.a"], run_requested_at=NOW)
    snap = BeatSnapshot.of(state)
    sender = DispatchSender(
        state=state,
        requeue=lambda name: None,
        dispatches=DispatchRecords(redis.Redis(), KeySpace("snap")),  # not called here
        publish=lambda orders: [],
        store=MemoryScheduleStore(),
        settings=DgsSettings(),
        leadership=None,
        monotonic=time.monotonic,
    )
    sender._clear_run_request("t.a")  # the store has no such row: logged, the state moves on
    assert state.tracked["t.a"].run_requested_at is None
    assert snap.tracked["t.a"].run_requested_at == NOW
