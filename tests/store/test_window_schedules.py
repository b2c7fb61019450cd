"""``window_schedules``: beat's slices of the fleet by kept start times, the
same on every store; with the kept times on every row a store returns."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.core.window import KeptStart, SliceRead, slice_of
from celery_dgs.store.base import ScheduleStore
from celery_dgs.store.check_types import NewCheck
from celery_dgs.store.records import StoredSchedule
from tests.store.conftest import T0

M = timedelta(minutes=1)


def periodic(i: int) -> PeriodicSpec:
    return PeriodicSpec(
        task="w.job", configuration=f"s{i:02d}", scheduling_period=timedelta(hours=1)
    )


def fill(store: ScheduleStore) -> None:
    """s00..s09: never ran, registered a minute apart (can start then; the
    deadline an hour later); s10 and s11 share s05's times; a deferred check."""
    for i in range(10):
        store.upsert_runtime([periodic(i)], T0 + i * M)
    store.upsert_runtime([periodic(10), periodic(11)], T0 + 5 * M)
    store.add_checks([NewCheck(CheckSpec(task="w.check", key="k", within=M), T0)], T0)


def names(rows: list[StoredSchedule]) -> list[str]:
    return [r.name for r in rows]


def test_rows_carry_their_kept_start_times(store: ScheduleStore) -> None:
    fill(store)
    row = store.get("w.job@s03")
    assert row.kept_can_start_at == T0 + 3 * M
    assert row.kept_should_start_by is not None
    assert row.kept_should_start_by > row.kept_can_start_at


def test_slices_go_by_deadline_then_start_then_name(store: ScheduleStore) -> None:
    fill(store)
    first = store.window_schedules(can_after=None, can_until=T0 + 5 * M, key_after=None, limit=4)
    assert names(first) == ["w.job@s00", "w.job@s01", "w.job@s02", "w.job@s03"]
    last = first[-1]
    assert last.kept_should_start_by is not None
    assert last.kept_can_start_at is not None
    key = (last.kept_should_start_by, last.kept_can_start_at, last.name)
    on = store.window_schedules(can_after=None, can_until=T0 + 5 * M, key_after=key, limit=10)
    assert names(on) == ["w.job@s04", "w.job@s05", "w.job@s10", "w.job@s11"], "no check"
    later = store.window_schedules(
        can_after=T0 + 5 * M, can_until=T0 + 7 * M, key_after=None, limit=10
    )
    assert names(later) == ["w.job@s06", "w.job@s07"]


def test_a_removed_schedule_is_in_no_slice(store: ScheduleStore) -> None:
    fill(store)
    store.remove_runtime(["w.job@s01"], T0)
    rows = store.window_schedules(can_after=None, can_until=T0 + 9 * M, key_after=None, limit=100)
    assert "w.job@s01" not in names(rows)
    assert len(rows) == 11


def test_the_stores_and_the_simulators_slice_agree(store: ScheduleStore) -> None:
    fill(store)
    rows = store.list_schedules()
    kept = [(r.name, KeptStart(r.kept_can_start_at, r.kept_should_start_by)) for r in rows]
    for read in (
        SliceRead(None, T0 + 9 * M, None, 5, restart=True),
        SliceRead(T0 + 2 * M, T0 + 6 * M, None, 3, restart=False),
    ):
        got = store.window_schedules(
            can_after=read.can_after, can_until=read.can_until, key_after=None, limit=read.limit
        )
        assert names(got) == slice_of(read, kept)


def test_the_should_start_by_a_number_of_rows_past_a_key(store: ScheduleStore) -> None:
    fill(store)
    until = T0 + 7 * M
    first = store.window_schedules(can_after=None, can_until=until, key_after=None, limit=2)
    last = first[-1]
    assert last.kept_should_start_by is not None
    assert last.kept_can_start_at is not None
    key = (last.kept_should_start_by, last.kept_can_start_at, last.name)
    after = store.window_schedules(can_after=None, can_until=until, key_after=key, limit=20)
    assert len(after) == 8, "s02..s07, s10, s11: the check and the later ones left out"
    for offset, row in enumerate(after):
        found = store.window_should_at(can_until=until, key_after=key, offset=offset)
        assert found == row.kept_should_start_by
        assert found is not None
        assert found.utcoffset() == timedelta(0)
    assert store.window_should_at(can_until=until, key_after=key, offset=8) is None
    with pytest.raises(ValueError, match="the offset must be >= 0, got -1"):
        store.window_should_at(can_until=until, key_after=key, offset=-1)
