"""Beat's hourly prune of ended deferred checks reads only them: a range of
the partial index ``ix_dgs_schedules_checks_ended``, on SQLite and on
PostgreSQL, whatever the size of the fleet beside them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Select

from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.store.sql_checks import ended_checks_statement
from tests.store.conftest import T0
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
