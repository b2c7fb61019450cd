"""Beat's hourly prune of ended deferred checks reads only them (a range of
the partial index ``ix_dgs_schedules_checks_ended``), and the rewrite after a
change of the retry settings only the failing schedules
(``ix_dgs_schedules_failing``), on SQLite and on PostgreSQL, whatever the
size of the fleet beside them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Select, select

from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.store.sql_checks import ended_checks_statement
from celery_dgs.store.sql_kept_ladder import _PARTS, _T
from tests.store.conftest import T0, start
from tests.store.test_pg_plans import fill


def plan_of(conn: Connection, query: Select[Any]) -> str:
    compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
    explain = "EXPLAIN QUERY PLAN" if conn.dialect.name == "sqlite" else "EXPLAIN"
    return "\n".join(str(r[-1]) for r in conn.exec_driver_sql(f"{explain} {compiled}"))


def test_the_prune_of_ended_checks_reads_their_index(sql_store: SqlScheduleStore) -> None:
    fill(sql_store)
    query = ended_checks_statement(T0 + timedelta(days=30), 1000)
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        plan = plan_of(conn, query)
        assert conn.execute(query).all() == []
    assert "ix_dgs_schedules_checks_ended" in plan, plan
    assert "SCAN dgs_schedules\n" not in plan + "\n", plan
    assert "Seq Scan on dgs_schedules" not in plan, plan


def test_the_retry_settings_rewrite_reads_the_failing_rows_index(
    sql_store: SqlScheduleStore,
) -> None:
    """The rewrite after a change of the retry settings reads the failing
    schedules' names along their partial index, not the whole fleet."""
    fill(sql_store)
    for i in range(3):
        name = f"p.scrape@src{i:05d}"
        start(sql_store, name, f"r{i}", 1, at=T0 + timedelta(hours=1))
        sql_store.record_run_end(
            run_id=f"r{i}", outcome="failure", ended_at=T0 + timedelta(hours=1, minutes=1)
        )
    schedules, checks = _PARTS
    query = select(_T.c.name).where(schedules)
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        plans = {
            "ix_dgs_schedules_failing": plan_of(conn, query),
            "ix_dgs_schedules_check_due": plan_of(conn, select(_T.c.name).where(checks)),
        }
        found = sorted(conn.execute(query).scalars())
    assert found == [f"p.scrape@src{i:05d}" for i in range(3)]
    for index, plan in plans.items():
        assert index in plan, plan
        assert "SCAN dgs_schedules\n" not in plan + "\n", plan
        assert "Seq Scan on dgs_schedules" not in plan, plan
