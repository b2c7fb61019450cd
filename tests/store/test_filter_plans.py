"""A filter by pool or by a word of the task reads only the selected pools'
or tasks' rows, on SQLite and on PostgreSQL: every statement a count or a
page runs (caught as the store sends it) is planned, after ``ANALYZE``, on
the partial indexes with the pool or the task leading (migration 0014),
none as a pass over the table; a page of OK rows is read in its index's
order, each range only as far as the page wants (PostgreSQL merges the
ranges of several values in order); the distinct task names are probes of
the task index."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import timedelta
from itertools import pairwise
from typing import Any

import pytest
from sqlalchemy import Connection

from celery_dgs.core.kept_condition import condition_at
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store import sql_status_keys
from celery_dgs.store.selection import Selection
from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.store.sql_status_keys import task_names, within_of
from tests.store.conftest import T0
from tests.support.statements import statements_sent

TASKS = 40
POOLS = (None, "slow", "fast", "gpu", "io")


def fill(store: SqlScheduleStore) -> None:
    """20,000 never-run hourly schedules of 40 tasks in 5 pools (one: none)."""
    for lo in range(0, 20_000, 5_000):
        specs = [
            PeriodicSpec(
                task=f"p.task{i % TASKS:02d}",
                configuration=f"src{i:05d}",
                scheduling_period=timedelta(hours=1 + i % 3),
                pool=POOLS[i % len(POOLS)],
            )
            for i in range(lo, lo + 5_000)
        ]
        store.upsert_runtime(specs, T0 + timedelta(seconds=lo // 10))


def caught(store: SqlScheduleStore) -> AbstractContextManager[list[tuple[str, Any]]]:
    """The reads (and their parameters) the store sends meanwhile."""
    return statements_sent(store.engine, "SELECT", "WITH")


def plan(conn: Connection, statement: str, parameters: Any) -> str:
    explain = "EXPLAIN QUERY PLAN" if conn.dialect.name == "sqlite" else "EXPLAIN"
    found = conn.exec_driver_sql(f"{explain} {statement}", parameters)
    return "\n".join(str(r[-1]) for r in found)


def assert_along(plans: list[str], *keys: str) -> None:
    """Each plan reads an index with one of ``keys`` leading (but the probe of
    the largest margin, which bounds the OK rows' range, and a page's rows
    read by name after their names), none the table; the
    ranges of ``kept_level`` 1 and 2 (a WARNING or ERROR while no moment
    passed: empty here), the warnings of runs in progress (few), and the
    idle warnings within the largest margin of now (none here: never run,
    no margin), may be read from the unkeyed index, which PostgreSQL's
    estimate of one row picks."""
    for text in plans:
        assert "SCAN dgs_schedules\n" not in text + "\n", text
        assert "Seq Scan" not in text, text
        if "ix_dgs_schedules_margin_window" in text:  # the largest margin: one probe
            continue
        if "sqlite_autoindex_dgs_schedules_1" in text or "dgs_schedules_pkey" in text:
            continue  # a page after an offset: its rows by name
        rare = (
            "ix_dgs_schedules_running_warning" in text
            or ("ix_dgs_schedules_warning_at" in text and "(warning_at >= " in text)
            or ("ix_dgs_schedules_kept_level" in text and "(kept_level = " in text)
        )
        assert any(f"ix_dgs_schedules_{key}_" in text for key in keys) or rare, text
        if "_should_start" in text:  # OK in its index's order, as far as wanted
            assert "TEMP B-TREE" not in text, text
            lines = text.splitlines()
            for before, line in pairwise(lines):
                if "Scan using ix_dgs_schedules_" in line and "_should_start" in line:
                    assert "Limit" in before, text


@pytest.mark.parametrize(
    ("selection", "key"),
    [
        (Selection(pools=("slow",)), "pool"),
        (Selection(pools=("celery", "gpu")), "pool"),  # the default: NULL
        (Selection(task_word="task1"), "task"),  # 10 tasks
        (Selection(task_word="task07", pools=("fast",)), "pool"),
    ],
    ids=["a pool", "the default pool", "a word", "a pool and a word"],
)
def test_a_filtered_page_and_count_read_the_keyed_indexes(
    sql_store: SqlScheduleStore, selection: Selection, key: str
) -> None:
    fill(sql_store)
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        conn.commit()
    now = T0 + timedelta(hours=1, minutes=30)  # some ERROR, some OK
    with caught(sql_store) as sent:
        counts = sql_store.condition_counts(now, selection)
        rows = list(sql_store.status_rows(now, selection, limit=50, offset=50))
        ok = list(sql_store.status_rows(now, replace(selection, conditions=("ok",)), limit=50))
    assert {level for level, _ in counts} == {"ERROR", "OK"}
    assert len(rows) == len(ok) == 50
    with sql_store.engine.connect() as conn:
        plans = [plan(conn, s, p) for s, p in sent if "found(t)" not in s]
        words = [plan(conn, s, p) for s, p in sent if "found(t)" in s]
    assert bool(words) == bool(selection.task_word)
    assert_along(plans, key, *(["task"] if selection.task_word else []))
    if not (selection.pools and selection.task_word):  # both: few rows, the planner's pick
        assert any(f"ix_dgs_schedules_{key}_should_start" in text for text in plans), plans
    assert_along(words, "task")


def test_the_distinct_tasks_are_read_along_the_task_index(sql_store: SqlScheduleStore) -> None:
    fill(sql_store)
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        assert task_names(conn) == [f"p.task{i:02d}" for i in range(TASKS)]


def test_with_a_pool_and_a_task_the_key_holding_fewer_leads(
    sql_store: SqlScheduleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(sql_store)
    few_tasks = Selection(pools=("slow", "fast"), task_word="task07")  # 500 by task, 8,000 by pool
    few_pools = Selection(pools=("gpu",), task_word="task")  # 4,000 by pool, 20,000 by task
    with sql_store.engine.connect() as conn:
        assert within_of(conn, few_tasks).column == "task"
        assert within_of(conn, few_pools).column == "pool"
        # Each key counted no further than the bound: both past it, the tasks lead.
        monkeypatch.setattr(sql_status_keys, "KEY_COUNT_BOUND", 1_000)
        assert within_of(conn, few_tasks).column == "task"
        assert within_of(conn, few_pools).column == "task"
        monkeypatch.setattr(sql_status_keys, "KEY_COUNT_BOUND", 5_000)
        assert within_of(conn, few_pools).column == "pool"
    every = [r.name for r in sql_store.status_rows(T0, Selection())]
    for selection in (few_tasks, few_pools):  # the rows, whichever key leads
        chosen = [r.name for r in sql_store.status_rows(T0, selection)]
        assert chosen == [n for n in every if n in set(chosen)]
        assert sql_store.count_selected(T0, selection, 10**6) == len(chosen)


def test_the_ok_rows_are_read_from_the_largest_margin_on(sql_store: SqlScheduleStore) -> None:
    """A page of OK rows (and their bounded count) reads the should_start_by
    index from ``now`` less the largest margin: the long-overdue rows before
    it (in ERROR) are not read one by one; the rows are the OK ones, in order."""
    fill(sql_store)
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        conn.commit()
    now = T0 + timedelta(hours=2, minutes=30)  # the hourly ones in ERROR, some OK
    selection = Selection(conditions=("ok",))
    with caught(sql_store) as sent:
        ok = list(sql_store.status_rows(now, selection, limit=50))
        counted = sql_store.count_selected(now, selection, 10_001)
    assert len(ok) == 50
    levels = {condition_at(sql_store.kept_times(s.name).condition, now)[0].name for s in ok}
    assert levels == {"OK"}
    assert [s.kept_should_start_by for s in ok] == sorted(s.kept_should_start_by for s in ok)
    reads = [(s, p) for s, p in sent if "should_start_by >=" in s]
    assert len(reads) == 2, sent  # the page and the count
    with sql_store.engine.connect() as conn:
        page = plan(conn, *reads[0])
    assert "ix_dgs_schedules_should_start" in page, page
    if sql_store.engine.dialect.name == "postgresql":  # the range starts at the bound
        assert "Index Cond: ((should_start_by >= " in page, page
    else:
        assert "should_start_by>?" in page.replace(" ", ""), page
    assert counted == sum(
        n for (level, _), n in sql_store.condition_counts(now, Selection()).items() if level == "OK"
    )
