"""``status PATTERN`` on PostgreSQL: a name prefix reads a range of the
``text_pattern_ops`` index, whatever the database's collation, not every
name (``EXPLAIN`` of the store's own query, after ``ANALYZE``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store.models import ScheduleRow
from celery_dgs.store.selection import Selection
from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.store.sql_status import _where
from tests.store.conftest import T0

pytestmark = pytest.mark.postgres


def test_a_prefix_reads_the_name_pattern_index(pg_store: SqlScheduleStore) -> None:
    hour = timedelta(hours=1)
    specs = [
        PeriodicSpec(task="p.scrape", configuration=f"src{i:05d}", scheduling_period=hour)
        for i in range(20_000)
    ]
    pg_store.upsert_runtime(specs, T0)
    with pg_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        where = _where(Selection(patterns=("p.scrape@src0001?",)), "postgresql")
        query = select(ScheduleRow.name).where(where)
        compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
        plan = "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {compiled}"))
        found = conn.execute(query).all()
    assert "ix_dgs_schedules_name_pattern" in plan, plan
    assert len(found) == 10
