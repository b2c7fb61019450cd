"""``celery dgs status``'s priority columns: each schedule's priority and the class
beat serves it in now (moved up by the elevator, or 0 for a run request)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.cli.render import priority_cell, status_row_json
from celery_dgs.core.elevator import ElevatorState
from celery_dgs.core.lookahead import DemandBook
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.registry import WorkerInfo
from celery_dgs.settings import DgsSettings
from celery_dgs.status import apply_projection, build_page, build_rows
from celery_dgs.store.memory import MemoryScheduleStore
from celery_dgs.store.records import StoredSchedule

#: 10:12 UTC: elevator steps of 600 s at 10:00, 10:10, ...
NOW = datetime(2026, 3, 2, 10, 12, tzinfo=timezone.utc)


def test_status_shows_the_priority_and_the_class_the_elevator_moved_it_to() -> None:
    store = MemoryScheduleStore()
    specs = [
        PeriodicSpec(task=f"t.{n}", scheduling_period=timedelta(hours=1), priority=p)
        for n, p in (("top", 10), ("mid", 50), ("low", 80), ("new", 80), ("asked", 90))
    ]
    store.sync(specs, NOW - timedelta(hours=5))
    # never ran: due since registration (5 h ago, many steps): moved up
    for name, ago in (("t.top", 30), ("t.mid", 30), ("t.new", 1)):
        run_id = f"r-{name}"
        started = NOW - timedelta(hours=1, minutes=ago)
        store.record_run_start(
            schedule=name,
            run_id=run_id,
            dispatch_id=None,
            owner_node="w",
            owner_name="celery@w",
            owner_tag=run_id,
            token=1,
            started_at=started,
        )
        store.record_run_end(run_id=run_id, outcome="success", ended_at=started)
    store.request_run("t.asked", NOW - timedelta(seconds=5))
    rows, _ = store.load_active()
    settings = DgsSettings(elevator_interval=600)
    by_name = {r.name: r for r in build_rows(rows, {}, NOW, settings=settings)}
    assert {n: r.priority for n, r in by_name.items()} == {
        "t.top": 10,
        "t.mid": 50,
        "t.low": 80,
        "t.new": 80,
        "t.asked": 90,
    }
    # due classes: 0 (the run request), 10, 50, 80. t.low has waited 5 h: at the top;
    # t.new became due after the last step: still in its own class.
    effective = {n: r.effective_priority for n, r in by_name.items()}
    assert effective == {"t.top": 0, "t.mid": 0, "t.low": 0, "t.new": 80, "t.asked": 0}
    assert priority_cell(by_name["t.low"]) == "80→0"
    assert priority_cell(by_name["t.new"]) == "80"
    doc = status_row_json(by_name["t.low"], NOW)
    assert (doc["priority"], doc["effective_priority"]) == (80, 0)
    # without the elevator every due schedule stays in its class
    plain = {
        r.name: r.effective_priority
        for r in build_rows(rows, {}, NOW, settings=DgsSettings(elevator_interval=None))
    }
    assert plain == {"t.top": 10, "t.mid": 50, "t.low": 80, "t.new": 80, "t.asked": 0}


def test_below_capacity_every_schedule_shows_its_own_class() -> None:
    """No due schedule has waited half an elevator interval and no run request
    is due: beat's classes choose nothing, so no schedule shows a moved class,
    even one due across an elevator step."""
    store = MemoryScheduleStore()
    specs = [
        PeriodicSpec(task=f"t.{n}", scheduling_period=timedelta(hours=1), priority=p)
        for n, p in (("top", 10), ("low", 80))
    ]
    store.sync(specs, NOW - timedelta(hours=1, minutes=4))  # due since 10:08: one step (10:10)
    rows, _ = store.load_active()
    settings = DgsSettings(elevator_interval=600)  # short after 300 s of waiting
    effective = {r.name: r.effective_priority for r in build_rows(rows, {}, NOW, settings=settings)}
    assert effective == {"t.top": 10, "t.low": 80}
    # Two minutes later t.low has waited 6 min: capacity is short, the elevator counts.
    later = {
        r.name: r.effective_priority
        for r in build_rows(rows, {}, NOW + timedelta(minutes=2), settings=settings)
    }
    assert later == {"t.top": 10, "t.low": 10}


def bulk_fleet(pool: str | None = None) -> list[StoredSchedule]:
    """t.top (class 10) and t.low (class 80), due since 10:08, and six
    schedules that ran 6 h and run every 20 h (1.8 slots), all in ``pool``."""
    store = MemoryScheduleStore()
    specs = [
        PeriodicSpec(task=f"t.{n}", scheduling_period=timedelta(hours=1), priority=p, pool=pool)
        for n, p in (("top", 10), ("low", 80))
    ]
    specs += [
        PeriodicSpec(
            task=f"t.bulk{i}", scheduling_period=timedelta(hours=20), priority=50, pool=pool
        )
        for i in range(6)
    ]
    store.sync(specs, NOW - timedelta(hours=1, minutes=4))  # t.top, t.low due since 10:08
    for i in range(6):  # not due for hours
        run_id = f"r-bulk{i}"
        store.record_run_start(
            schedule=f"t.bulk{i}",
            run_id=run_id,
            dispatch_id=None,
            owner_node="w",
            owner_name="celery@w",
            owner_tag=run_id,
            token=1,
            started_at=NOW - timedelta(hours=6.5),
        )
        store.record_run_end(run_id=run_id, outcome="success", ended_at=NOW - timedelta(hours=0.5))
    rows, _ = store.load_active()
    return rows


def moved_classes(
    rows: list[StoredSchedule], slots: int, workers: list[WorkerInfo] | None = None
) -> dict[str, int | None]:
    """t.top's and t.low's classes as ``status`` shows them on ``slots``
    live slots (of ``workers``), with a 10-minute elevator."""
    settings = DgsSettings(elevator_interval=600)
    built = build_rows(rows, {}, NOW, settings=settings, slots=slots, workers=workers)
    return {r.name: r.effective_priority for r in built if not r.name.startswith("t.bulk")}


def test_demand_above_the_live_slots_shows_the_moved_class_at_once() -> None:
    """The 1.8 slots of demand on one live slot: capacity is short before any
    wait reaches half an elevator interval, as in beat, and the elevator's
    class shows (one step, 10:10); on two slots it is not."""
    rows = bulk_fleet()
    assert moved_classes(rows, 1) == {"t.top": 10, "t.low": 10}
    assert moved_classes(rows, 2) == {"t.top": 10, "t.low": 80}


def test_one_pool_short_of_slots_shows_the_moved_class_beside_idle_ones() -> None:
    """The same demand in pool ``prio``, served by one slot, while the default
    queue's worker has two: the pool is short, as beat sees it (its own
    demand against its own workers), though the fleet's three slots are not."""
    rows = bulk_fleet("prio")

    def worker(name: str, queue: str, slots: int) -> WorkerInfo:
        return WorkerInfo(name=name, node=name, queues=(queue,), slots=slots, pool="solo", pid=1)

    one = [worker("celery@a", "prio", 1), worker("celery@b", "celery", 2)]
    assert moved_classes(rows, 3, one) == {"t.top": 10, "t.low": 10}
    two = [worker("celery@a", "prio", 2), worker("celery@b", "celery", 2)]
    assert moved_classes(rows, 4, two) == {"t.top": 10, "t.low": 80}


def test_the_demand_leaves_out_what_beat_holds() -> None:
    """A paused schedule and a disabled adaptive one add no demand, as in beat."""
    store = MemoryScheduleStore()
    specs = [
        PeriodicSpec(task=f"t.{n}", scheduling_period=timedelta(hours=10))
        for n in ("run", "paused", "disabled")
    ]
    store.sync(specs, NOW - timedelta(hours=8))
    for name in ("t.run", "t.paused", "t.disabled"):  # each ran 6 h: 0.6 of a slot
        run_id = f"r-{name}"
        store.record_run_start(
            schedule=name,
            run_id=run_id,
            dispatch_id=None,
            owner_node="w",
            owner_name="celery@w",
            owner_tag=run_id,
            token=1,
            started_at=NOW - timedelta(hours=7),
        )
        store.record_run_end(run_id=run_id, outcome="success", ended_at=NOW - timedelta(hours=1))
    store.set_paused("t.paused", True)
    rows, _ = store.load_active()
    built = [
        replace(r, disabled_reason="3 failures in a row") if r.name == "t.disabled" else r
        for r in build_rows(rows, {}, NOW)
    ]
    book = DemandBook()
    apply_projection(built, rows, {}, NOW, slots=1, book=book)
    assert book.total() == pytest.approx(0.6)


def test_a_page_of_rows_shows_beats_classes_whatever_it_lists() -> None:
    """``status`` lists a page of rows: each row's class comes from where
    beat's classes stand (its pace), the same whichever rows the page holds;
    with no beat leader each row shows its own class (a run request its
    asked one)."""
    store = MemoryScheduleStore()
    specs = [
        PeriodicSpec(task=f"t.{n}", scheduling_period=timedelta(hours=1), priority=p)
        for n, p in (("top", 10), ("low", 80))
    ]
    store.sync(specs, NOW - timedelta(hours=5))  # both due for hours: many steps
    store.request_run("t.top", NOW - timedelta(seconds=5), priority=50)
    rows, _ = store.load_active()
    settings = DgsSettings(elevator_interval=600)
    beat = ElevatorState(levels=(10, 50, 80), short=True, interval_s=600)

    def classes(listed: list[str], elevator: ElevatorState | None) -> dict[str, int | None]:
        page = [r for r in rows if r.name in listed]
        built = build_page(page, {}, NOW, settings=settings, elevator=elevator)
        return {r.name: r.effective_priority for r in built}

    assert classes(["t.low"], beat) == {"t.low": 10}
    assert classes(["t.low", "t.top"], beat) == {"t.low": 10, "t.top": 50}  # asked 5 s ago
    calm = replace(beat, short=False)  # below capacity the classes choose nothing
    assert classes(["t.low"], calm) == {"t.low": 80}
    assert classes(["t.low", "t.top"], None) == {"t.low": 80, "t.top": 50}
