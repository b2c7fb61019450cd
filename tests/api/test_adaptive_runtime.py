"""``dgs.schedules`` with adaptive schedules: the ``adaptive`` kind, the
lister's ``last_modified`` hint and its errors, re-enabling by upsert. On a
real SQLite store."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.spec import AdaptiveSpec
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.runtime_schedules import RuntimeSchedules, parse_last_modified
from celery_dgs.store import SqlScheduleStore

T = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)


@pytest.fixture
def api(sqlite_store: SqlScheduleStore) -> RuntimeSchedules:
    return RuntimeSchedules(sqlite_store, known_tasks=lambda: {"t.visit", "t.other"})


def test_upsert_an_adaptive_schedule_with_its_hint(api: RuntimeSchedules) -> None:
    assert (
        api.upsert(
            "t.visit@a", kind="adaptive", interval_unit=3600, last_modified="2026-03-01T10:00:00Z"
        )
        == "inserted"
    )
    row = api.get("t.visit@a")
    assert isinstance(row.spec, AdaptiveSpec)
    assert row.spec.interval_unit == timedelta(hours=1)
    assert row.stats.upstream_modified_at == datetime(2026, 3, 1, 10, tzinfo=timezone.utc)
    same = {"kind": "adaptive", "interval_unit": 3600}
    assert api.upsert("t.visit@a", **same, last_modified="2026-03-01T10:00:00+00:00") == (
        "unchanged"
    )
    assert api.upsert("t.visit@a", **same, last_modified=T.timestamp()) == "updated"
    assert api.get("t.visit@a").stats.upstream_modified_at == T
    assert api.upsert("t.visit@a", **same, last_modified=None) == "unchanged"


@pytest.mark.parametrize("bad", ["yesterday", "2026-03-01T10:00:00", float("nan"), True, [1]])
def test_a_bad_last_modified_names_the_schedule_and_field(
    api: RuntimeSchedules, bad: object
) -> None:
    with pytest.raises(ScheduleConfigError) as info:
        api.upsert("t.visit@a", kind="adaptive", last_modified=bad)
    assert (info.value.schedule, info.value.field) == ("t.visit@a", "last_modified")
    with pytest.raises(ScheduleConfigError):
        parse_last_modified("x", bad)


def test_only_adaptive_schedules_take_last_modified(api: RuntimeSchedules) -> None:
    report = api.upsert_many(
        [
            {"name": "t.other@p", "period": 60, "last_modified": "2026-03-01T10:00:00Z"},
            {"name": "t.visit@ok", "kind": "adaptive", "initial_interval_index": 11},
            {"name": "t.visit@good", "kind": "adaptive"},
        ]
    )
    assert [(e.line, e.schedule, e.field) for e in report.errors] == [
        (1, "t.other@p", "last_modified"),
        (2, "t.visit@ok", "initial_interval_index"),
    ]
    assert report.applied.inserted == ["t.visit@good"]
