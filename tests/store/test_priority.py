"""Priorities in the store: the spec field, and the class of a run request."""

from __future__ import annotations

from datetime import timedelta

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store import ScheduleStore

from .conftest import T0, periodic


def test_the_priority_is_kept_with_the_spec_and_a_change_of_it_is_an_update(
    store: ScheduleStore,
) -> None:
    spec = PeriodicSpec(task="p", scheduling_period=timedelta(hours=1), priority=20)
    store.sync([spec, periodic("plain")], T0)
    assert store.get("p").spec.priority == 20  # type: ignore[union-attr]
    assert store.get("plain").spec.priority == 50  # type: ignore[union-attr]
    rows, _ = store.load_active()
    assert {r.name: r.spec.priority for r in rows if r.spec} == {"p": 20, "plain": 50}
    assert store.sync([spec, periodic("plain")], T0).unchanged == ["p", "plain"]
    moved = PeriodicSpec(task="p", scheduling_period=timedelta(hours=1), priority=70)
    report = store.sync([moved, periodic("plain")], T0)
    assert report.updated == ["p"]
    assert store.get("p").spec.priority == 70  # type: ignore[union-attr]


def test_a_run_request_keeps_its_class_until_it_is_cleared(store: ScheduleStore) -> None:
    store.sync([periodic("a")], T0)
    _, cursor = store.load_active()
    store.request_run("a", T0 + timedelta(minutes=1), priority=70)
    row = store.get("a")
    assert (row.run_requested_at, row.run_requested_priority) == (T0 + timedelta(minutes=1), 70)
    changed, cursor = store.changes_since(cursor)
    assert [(r.name, r.run_requested_priority) for r in changed] == [("a", 70)]
    # asked again in another class: the same request, its time kept, the new class
    store.request_run("a", T0 + timedelta(minutes=2), priority=None)
    row = store.get("a")
    assert (row.run_requested_at, row.run_requested_priority) == (T0 + timedelta(minutes=1), None)
    store.request_run("a", T0 + timedelta(minutes=3), priority=5)
    rows, _ = store.load_active()
    assert rows[0].run_requested_priority == 5
    store.clear_run_request("a", requested_at=T0 + timedelta(minutes=1))
    row = store.get("a")
    assert (row.run_requested_at, row.run_requested_priority) == (None, None)
