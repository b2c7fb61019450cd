"""The WARNING rows are read as two ranges: the idle schedules' warnings
within the largest margin of now (an idle warning comes at ``error_at`` less
the expected run, which the margin is not below), and the warnings of runs
in progress, which may have begun at any time. Together they are every
schedule in WARNING by time, in order, on every backend: the same rows and
counts as one query over every name."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from celery_dgs.core.kept_condition import condition_at
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store import ScheduleStore
from celery_dgs.store.selection import Selection
from celery_dgs.store.sql import SqlScheduleStore

from .conftest import T0, start
from .test_filter_plans import caught, plan

H = timedelta(hours=1)
M = timedelta(minutes=1)
NOW = T0 + 8 * H + 55 * M


def fleet(store: ScheduleStore) -> None:
    """At ``NOW``: 40 hourly schedules that last ran at 8 h for 10 minutes
    (idle, WARNING ``likely_late`` from 8:50), 40 never run (ERROR since 1 h,
    their warnings long past), and three runs in progress whose warnings
    began long before ``NOW`` less any margin: one past its
    ``max_expected_duration`` since 0:01, one expected to end after its
    deadline, one of them in ERROR."""
    specs = [
        PeriodicSpec(task="idle", configuration=f"c{i:02d}", scheduling_period=H, pool=pool)
        for i, pool in zip(range(40), ["slow", None] * 20, strict=True)
    ]
    specs += [
        PeriodicSpec(task="never", configuration=f"c{i:02d}", scheduling_period=H)
        for i in range(40)
    ]
    long_run = PeriodicSpec(
        task="stuck",
        scheduling_period=7 * 24 * H,
        max_expected_duration=M,
        pool="slow",
    )
    late_run = PeriodicSpec(
        task="late", scheduling_period=10 * H, duration_override=5 * H, pool="slow"
    )
    overdue = PeriodicSpec(task="overdue", scheduling_period=2 * H, max_expected_duration=M)
    store.sync([*specs, long_run, late_run, overdue], T0)
    token = 0
    for i, spec in enumerate(specs[:40]):
        start(store, spec.name, f"i{i}", token=(token := token + 1), at=T0 + 8 * H)
        store.record_run_end(run_id=f"i{i}", outcome="success", ended_at=T0 + 8 * H + 10 * M)
    start(store, long_run.name, "stuck", token=(token := token + 1), at=T0)
    start(store, late_run.name, "late", token=(token := token + 1), at=T0 + 6 * H)
    start(store, overdue.name, "overdue", token=(token := token + 1), at=T0)


def names(store: ScheduleStore, selection: Selection, **page: int) -> list[str]:
    return [s.name for s in store.status_rows(NOW, selection, **page)]


@pytest.mark.parametrize(
    "selection",
    [Selection(), Selection(conditions=("warning",)), Selection(pools=("slow",))],
    ids=["every", "warning", "a pool"],
)
def test_every_warning_is_read_the_idle_ones_and_the_runs(
    store: ScheduleStore, selection: Selection
) -> None:
    fleet(store)
    one_query = replace(selection, patterns=("*",))
    expected = names(store, one_query)
    assert names(store, selection) == expected
    assert names(store, selection, limit=5, offset=3) == expected[3:8]
    counts = store.condition_counts(NOW, selection)
    assert counts == store.condition_counts(NOW, one_query)
    assert store.count_selected(NOW, selection, 1_000) == len(expected)
    reasons = {why for (level, why) in counts if level == "WARNING"}
    assert {"over_expected_duration", "likely_late_running"} <= reasons
    if selection.pools == ():
        assert counts[("WARNING", "likely_late")] == 40


def test_the_idle_warnings_are_read_from_the_largest_margin_on(
    sql_store: SqlScheduleStore,
) -> None:
    """The idle part's range starts at ``now`` less the largest margin: the
    rows in ERROR whose warnings passed long ago are not read one by one."""
    fleet(sql_store)
    never = [  # enough rows in ERROR for the planner to read an index
        PeriodicSpec(task="never", configuration=f"more{i:04d}", scheduling_period=H)
        for i in range(5_000)
    ]
    sql_store.upsert_runtime(never, T0)
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        conn.commit()
    with caught(sql_store) as sent:
        rows = list(sql_store.status_rows(NOW, Selection(conditions=("warning",)), limit=50))
    levels = {condition_at(sql_store.kept_times(s.name).condition, NOW)[0].name for s in rows}
    assert levels == {"WARNING"}
    assert len(rows) == 42
    idle = [(s, p) for s, p in sent if "warning_reason = 'likely_late'" in s]
    assert len(idle) == 1, sent
    with sql_store.engine.connect() as conn:
        page = plan(conn, *idle[0])
    assert "ix_dgs_schedules_warning_at" in page, page
    if sql_store.engine.dialect.name == "postgresql":
        assert "(warning_at >= " in page, page
    else:
        assert "warning_at>?" in page.replace(" ", ""), page


def test_the_failed_ones_are_read_in_order_not_sorted(sql_store: SqlScheduleStore) -> None:
    """The schedules in WARNING because their last run failed are read along
    their own index in ``should_start_by`` order, as far as the page (no
    sort of every such row), from the largest margin on."""
    fleet(sql_store)
    failed = [
        PeriodicSpec(task="failed", configuration=f"f{i:03d}", scheduling_period=24 * H)
        for i in range(200)
    ]
    sql_store.upsert_runtime(failed, T0)
    for i, spec in enumerate(failed):
        start(sql_store, spec.name, f"f{i}", token=1, at=T0 + 8 * H + i * M / 10)
        sql_store.record_run_end(run_id=f"f{i}", outcome="failure", ended_at=NOW - 10 * M)
    sql_store.upsert_runtime(
        [
            PeriodicSpec(task="never", configuration=f"more{i:04d}", scheduling_period=H)
            for i in range(5_000)
        ],
        T0,
    )
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
        conn.commit()
    warning = Selection(conditions=("warning",))
    with caught(sql_store) as sent:
        page = names(sql_store, warning, limit=10, offset=45)  # past the 42 others
    assert page == names(sql_store, replace(warning, patterns=("*",)))[45:55]
    assert all(name.startswith("failed@") for name in page)
    [(statement, parameters)] = [(s, p) for s, p in sent if "kept_level = 1" in s]
    with sql_store.engine.connect() as conn:
        read = plan(conn, statement, parameters)
    assert "ix_dgs_schedules_kept_warning" in read, read
    assert "TEMP B-TREE" not in read, read
    assert "Sort" not in read, read
