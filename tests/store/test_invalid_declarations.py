"""``sync`` with invalid declarations: a stored schedule keeps its last valid
version, active and unchanged, with the error on its row until the declaration
is valid again (or gone). On both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.errors import ScheduleConfigError
from celery_dgs.store.base import ScheduleStore

from .conftest import T0, periodic

BROKEN = "schedule 'a', field 'scheduling_period': must be more than zero, got 0 s"


def test_an_invalid_declaration_keeps_the_stored_version_serving(store: ScheduleStore) -> None:
    store.sync([periodic("a"), periodic("b")], T0)
    before = store.get("a")
    _, cursor = store.load_active()

    report = store.sync([periodic("b")], T0 + timedelta(hours=1), invalid={"a": BROKEN})

    assert report.invalid == ["a"]
    assert report.deactivated == []
    assert report.updated == []
    assert report.unchanged == ["b"]
    a = store.get("a")
    assert a.active
    assert a.spec == before.spec == periodic("a")
    assert a.declaration_error == BROKEN
    assert [s.name for s in store.load_active()[0]] == ["a", "b"]
    [changed], cursor = store.changes_since(cursor)  # beat sees the mark
    assert changed.name == "a"
    assert changed.declaration_error == BROKEN
    assert [s.declaration_error for s in store.list_schedules()] == [BROKEN, None]

    again = store.sync([periodic("b")], T0 + timedelta(hours=2), invalid={"a": BROKEN})
    assert again.invalid == ["a"]
    assert not again.changed
    assert store.changes_since(cursor) == ([], cursor)  # same error: nothing written

    fixed = store.sync([periodic("a"), periodic("b")], T0 + timedelta(hours=3))
    assert fixed.updated == ["a"]
    assert fixed.invalid == []
    assert store.get("a").declaration_error is None
    assert store.get("a").spec == periodic("a")


def test_a_fix_that_changes_the_spec_updates_it_and_clears_the_error(
    store: ScheduleStore,
) -> None:
    store.sync([periodic("a")], T0)
    store.sync([], T0, invalid={"a": BROKEN})
    report = store.sync([periodic("a", hours=2)], T0)
    assert report.updated == ["a"]
    got = store.get("a")
    assert got.spec == periodic("a", hours=2)
    assert got.declaration_error is None


def test_a_schedule_no_longer_declared_at_all_is_deactivated_and_unmarked(
    store: ScheduleStore,
) -> None:
    store.sync([periodic("a")], T0)
    store.sync([], T0, invalid={"a": BROKEN})
    report = store.sync([], T0)
    assert report.deactivated == ["a"]
    got = store.get("a")
    assert not got.active
    assert got.declaration_error is None


def test_an_invalid_new_or_inactive_schedule_is_not_stored_or_revived(
    store: ScheduleStore,
) -> None:
    store.sync([periodic("old")], T0)
    store.sync([], T0)  # "old" deactivated
    report = store.sync([], T0, invalid={"old": BROKEN, "new": BROKEN})
    assert report.invalid == []
    assert not report.changed
    assert not store.get("old").active
    assert store.get("old").declaration_error is None
    assert [s.name for s in store.list_schedules(include_inactive=True)] == ["old"]


def test_a_name_declared_twice_names_the_field_that_differs(store: ScheduleStore) -> None:
    with pytest.raises(ScheduleConfigError) as caught:
        store.sync([periodic("a", "x"), periodic("a", "x", hours=12)], T0)
    assert caught.value.field == "scheduling_period"
    store.sync([periodic("a"), periodic("a")], T0)  # the same spec twice is one schedule
    assert [s.name for s in store.list_schedules()] == ["a"]


def test_a_name_both_valid_and_invalid_is_refused(store: ScheduleStore) -> None:
    with pytest.raises(ValueError, match="declared both valid and invalid: a"):
        store.sync([periodic("a")], T0, invalid={"a": BROKEN})
