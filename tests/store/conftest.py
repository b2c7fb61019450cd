"""Fixtures of the store suite.

``store`` is the contract suite's fixture: every backend behind the
:class:`~celery_dgs.store.base.ScheduleStore` interface (the in-memory store,
a migrated SQLite file, PostgreSQL), so the tests that take it hold for all of
them and no backend can drift from the others. ``sql_store`` is for the
tests about the SQL store itself (hand-edited rows, transactions, processes,
the raw load path): SQLite and PostgreSQL only; ``pg_store`` for what only
PostgreSQL does (streamed reads, ANALYZE). The SQLite store alone is the
suite-wide ``sqlite_store``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.spec import CronSpec, PeriodicSpec, ScheduleSpec
from celery_dgs.store import MemoryScheduleStore, ScheduleStore, SqlScheduleStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def periodic(task: str, configuration: str = "", hours: float = 24) -> ScheduleSpec:
    return PeriodicSpec(
        task=task, configuration=configuration, scheduling_period=timedelta(hours=hours)
    )


def cron(task: str, expr: str = "0 0 * * *") -> ScheduleSpec:
    return CronSpec(task=task, cron_schedule=expr, cron_max_schedule_duration=timedelta(hours=6))


def _open_sql(url: str) -> Iterator[SqlScheduleStore]:
    store = SqlScheduleStore.open(url)
    yield store
    assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    store.close()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[ScheduleStore]:
    """Each backend in turn: the contract every :class:`ScheduleStore` keeps."""
    if request.param == "memory":
        yield MemoryScheduleStore()
        return
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    yield from _open_sql(str(url))


@pytest.fixture
def sql_store(database_url: str) -> Iterator[SqlScheduleStore]:
    """The SQL store on SQLite and on PostgreSQL (``database_url``)."""
    yield from _open_sql(database_url)


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[SqlScheduleStore]:
    """The SQL store on PostgreSQL alone, for what only PostgreSQL does."""
    yield from _open_sql(pg_url)


def start(store: ScheduleStore, schedule: str, run_id: str, token: int, at: datetime = T0) -> None:
    store.record_run_start(
        schedule=schedule,
        run_id=run_id,
        dispatch_id=f"d-{run_id}",
        owner_node="node-1",
        owner_name="w1@node-1",
        owner_tag=run_id,
        token=token,
        started_at=at,
    )
