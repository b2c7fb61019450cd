"""Beat's reads by margin bucket read the fleet's index, not the fleet, on
SQLite and on PostgreSQL: the buckets in use are a skip scan of
``ix_dgs_schedules_margin_window`` (one entry a bucket), and a bucket's slice
is the first rows of a range of it, no sort."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Connection, Executable

from celery_dgs.core.laxity import margin_bucket
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.store.sql_window import MARGIN_BUCKETS, bucket_statement
from tests.store.conftest import T0

#: The fleet's margins, one a quarter of it.
MARGINS = (timedelta(seconds=5), timedelta(minutes=1), timedelta(minutes=20), timedelta(hours=2))
INDEX = "ix_dgs_schedules_margin_window"


def fill(store: SqlScheduleStore) -> None:
    """20,000 never-run schedules registered a second apart, their margins
    (duration overrides) in turn."""
    hour = timedelta(hours=1)
    for lo in range(0, 20_000, 5_000):
        specs = [
            PeriodicSpec(
                task="p.scrape",
                configuration=f"src{i:05d}",
                scheduling_period=hour,
                duration_override=MARGINS[i % len(MARGINS)],
            )
            for i in range(lo, lo + 5_000)
        ]
        store.upsert_runtime(specs, T0 + timedelta(seconds=lo))


def plan_of(conn: Connection, query: Executable) -> str:
    compiled = query.compile(conn, compile_kwargs={"literal_binds": True})  # type: ignore[attr-defined]
    explain = "EXPLAIN QUERY PLAN" if conn.dialect.name == "sqlite" else "EXPLAIN"
    return "\n".join(str(r[-1]) for r in conn.exec_driver_sql(f"{explain} {compiled}"))


def reads_no_table(plan: str) -> None:
    """``plan`` scans no part of ``dgs_schedules`` but along the index."""
    assert "SCAN dgs_schedules\n" not in plan + "\n", plan
    assert "Seq Scan on dgs_schedules" not in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    assert "Sort" not in plan, plan


def test_the_buckets_in_use_are_a_skip_scan_of_the_margin_index(
    sql_store: SqlScheduleStore,
) -> None:
    fill(sql_store)
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        plan = plan_of(conn, MARGIN_BUCKETS)
    assert INDEX in plan, plan
    reads_no_table(plan)
    if sql_store.engine.dialect.name == "postgresql":
        assert "Limit" in plan, "each min() is the first entry of a range"
    expected = sorted(margin_bucket(m.total_seconds()) for m in MARGINS)
    assert sql_store.window_margin_buckets() == expected


def test_a_bucket_slice_reads_the_first_rows_of_the_margin_index(
    sql_store: SqlScheduleStore,
) -> None:
    fill(sql_store)
    later = T0 + timedelta(days=1)
    bucket = margin_bucket(MARGINS[2].total_seconds())
    key = (T0 + timedelta(hours=1, minutes=20), T0, "p.scrape@src00100")
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        plans = [
            plan_of(conn, bucket_statement(bucket, later, None, 100)),
            plan_of(conn, bucket_statement(bucket, later, key, 100)),
        ]
    for plan in plans:
        assert INDEX in plan, plan
        reads_no_table(plan)
    rows = sql_store.window_schedules(
        can_after=None, can_until=later, key_after=None, limit=3, bucket=bucket
    )
    assert [r.name for r in rows] == ["p.scrape@src00002", "p.scrape@src00006", "p.scrape@src00010"]
