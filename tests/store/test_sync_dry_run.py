"""``sync(..., dry_run=True)``: the report of what a sync would do, on every
store, with nothing written (no row, no change for beat's poll)."""

from __future__ import annotations

from datetime import timedelta

from celery_dgs.store import ScheduleStore

from .conftest import T0, periodic

LATER = T0 + timedelta(hours=1)


def test_a_dry_run_reports_the_sync_and_writes_nothing(store: ScheduleStore) -> None:
    planned = store.sync([periodic("t.a"), periodic("t.b")], T0, dry_run=True)
    assert (planned.inserted, planned.unchanged) == (["t.a", "t.b"], [])
    assert store.list_schedules(include_inactive=True) == []

    store.sync([periodic("t.a"), periodic("t.b")], T0)
    _, cursor = store.load_active()
    changed_spec = periodic("t.a", hours=2)
    planned = store.sync([changed_spec, periodic("t.c")], LATER, dry_run=True)
    assert (planned.inserted, planned.updated, planned.deactivated) == (["t.c"], ["t.a"], ["t.b"])
    assert store.changes_since(cursor)[0] == [], "nothing for beat's poll"
    assert store.get("t.a").spec == periodic("t.a")
    assert store.get("t.b").active
    assert store.sync([changed_spec, periodic("t.c")], LATER) == planned, "as the sync does"


def test_the_declarations_owner_is_read_without_a_claim(store: ScheduleStore) -> None:
    assert store.declarations_owner() is None
    assert store.claim_declarations("alpha") is None
    assert store.declarations_owner() == "alpha"
