"""The plans of PostgreSQL for the reads that must not grow with the fleet
(``EXPLAIN`` of the store's own queries, after ``ANALYZE``): ``status
PATTERN``'s name prefix reads a range of the ``text_pattern_ops`` index,
whatever the database's collation; a slice of beat's window of schedules
reads the first rows of a range of ``ix_dgs_schedules_window``, no sort;
the next start past the window, of ``ix_dgs_schedules_can_start``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Select, select

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store.models import ScheduleRow
from celery_dgs.store.selection import Selection
from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.store.sql_status import _where
from celery_dgs.store.sql_window import next_can_statement, window_statement
from tests.store.conftest import T0

pytestmark = pytest.mark.postgres


def fill(store: SqlScheduleStore) -> None:
    """20,000 never-run schedules registered a second apart: all can start."""
    hour = timedelta(hours=1)
    for lo in range(0, 20_000, 5_000):
        specs = [
            PeriodicSpec(task="p.scrape", configuration=f"src{i:05d}", scheduling_period=hour)
            for i in range(lo, lo + 5_000)
        ]
        store.upsert_runtime(specs, T0 + timedelta(seconds=lo))


def explain(conn: Connection, query: Select[Any]) -> str:
    compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
    return "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {compiled}"))


def test_a_prefix_reads_the_name_pattern_index(pg_store: SqlScheduleStore) -> None:
    fill(pg_store)
    with pg_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        where = _where(Selection(patterns=("p.scrape@src0001?",)), "postgresql")
        query = select(ScheduleRow.name).where(where)
        plan = explain(conn, query)
        found = conn.execute(query).all()
    assert "ix_dgs_schedules_name_pattern" in plan, plan
    assert len(found) == 10


def test_a_window_slice_reads_the_first_rows_of_the_window_index(
    pg_store: SqlScheduleStore,
) -> None:
    fill(pg_store)
    later = T0 + timedelta(days=1)
    with pg_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        first = explain(conn, window_statement(None, later, None, 100))
        key = (T0 + timedelta(minutes=30), T0, "p.scrape@src00100")
        on = explain(conn, window_statement(None, later, key, 100))
    for plan in (first, on):
        assert "ix_dgs_schedules_window" in plan, plan
        assert "Sort" not in plan, plan
    rows = pg_store.window_schedules(can_after=None, can_until=later, key_after=None, limit=3)
    assert [r.name for r in rows] == ["p.scrape@src00000", "p.scrape@src00001", "p.scrape@src00002"]


def test_the_next_start_past_the_window_reads_the_can_start_index(
    pg_store: SqlScheduleStore,
) -> None:
    fill(pg_store)
    end = (T0 + timedelta(hours=1), T0, "p.scrape@src01800")  # in the first 5,000
    with pg_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        plan = explain(conn, next_can_statement(T0, end))
    assert "ix_dgs_schedules_can_start" in plan, plan
    assert "Sort" not in plan, plan
    found = pg_store.window_next_can(can_after=T0, key_after=end)
    assert found == T0 + timedelta(seconds=5_000), "the second 5,000's registration"
