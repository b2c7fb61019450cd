"""Fixtures of the store suite: a migrated store on each backend (SQLite file, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.spec import CronSpec, PeriodicSpec, ScheduleSpec
from celery_dgs.store import SqlScheduleStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def periodic(task: str, configuration: str = "", hours: float = 24) -> ScheduleSpec:
    return PeriodicSpec(
        task=task, configuration=configuration, scheduling_period=timedelta(hours=hours)
    )


def cron(task: str, expr: str = "0 0 * * *") -> ScheduleSpec:
    return CronSpec(task=task, cron_schedule=expr, cron_max_schedule_duration=timedelta(hours=6))


@pytest.fixture
def store(database_url: str) -> Iterator[SqlScheduleStore]:
    store = SqlScheduleStore.open(database_url)
    yield store
    assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    store.close()


def start(
    store: SqlScheduleStore, schedule: str, run_id: str, token: int, at: datetime = T0
) -> None:
    store.record_run_start(
        schedule=schedule, run_id=run_id, dispatch_id=f"d-{run_id}", owner_node="node-1",
        owner_name="w1@node-1", owner_tag=run_id, token=token, started_at=at,
    )  # fmt: skip
