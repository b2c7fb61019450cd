"""A store given new retry settings (``adopt_retry_ladder``) rewrites the kept
start times of exactly its failing rows, records the settings (and tells
them), and does nothing the second time; on every backend, and in batches in
the SQL store."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from celery_dgs.core.kept_condition import kept_times
from celery_dgs.core.spec import CheckSpec
from celery_dgs.core.timing import DEFAULT_RETRY_LADDER, RetryLadder
from celery_dgs.store import ScheduleStore, SqlScheduleStore, StoredSchedule
from celery_dgs.store.check_types import NewCheck
from celery_dgs.store.kept_ladder import (
    KeptLadderReader,
    describe_fingerprint,
    describe_ladder,
    ladder_fingerprint,
)
from celery_dgs.store.sql_kept_ladder import read_fingerprint_at

from .conftest import T0, periodic, start
from .run_writer import spawn

M = timedelta(minutes=1)
OLD = DEFAULT_RETRY_LADDER
NEW = RetryLadder((timedelta(seconds=30), timedelta(seconds=90)), 0.0)


def run(
    store: ScheduleStore, name: str, run_id: str, token: int, at: datetime, outcome: str
) -> None:
    """A run of ``name`` from ``at`` to a minute later, ending in ``outcome``."""
    start(store, name, run_id, token, at=at)
    store.record_run_end(run_id=run_id, outcome=outcome, ended_at=at + M)


def check(key: str) -> CheckSpec:
    return CheckSpec(task="shop.check_order", key=key, within=timedelta(hours=1))


def fleet(store: ScheduleStore, failing: int = 2, checks: int = 1) -> list[str]:
    """Schedules ``f0..`` that failed (``f1`` twice), ``ok`` that succeeded,
    ``gone`` that failed and is no longer declared, ``idle`` never run, and
    deferred checks ``c0..`` that failed once, ``cok`` pending; kept with
    :data:`OLD`. The names of the active failing rows."""
    names = [f"f{i}" for i in range(failing)]
    store.sync([periodic(n, hours=1) for n in (*names, "ok", "gone", "idle")], T0)
    keys = [f"c{i}" for i in range(checks)]
    store.add_checks([NewCheck(check(k), T0) for k in (*keys, "ok")], T0)
    for i, name in enumerate(names):
        run(store, name, f"{name}-1", 1, T0 + i * M, "failure")
    if failing > 1:
        run(store, "f1", "f1-2", 2, T0 + 20 * M, "failure")
    run(store, "ok", "ok-1", 1, T0, "success")
    run(store, "gone", "gone-1", 1, T0, "failure")
    store.sync([periodic(n, hours=1) for n in (*names, "ok", "idle")], T0 + 30 * M)
    checked = [check(k).name for k in keys]
    for i, name in enumerate(checked):
        run(store, name, f"{name}-1", 1, T0 + i * M, "failure")
    return names + checked


def every_name(store: ScheduleStore) -> list[str]:
    rows = store.list_schedules(include_inactive=True)
    return [r.name for r in rows] + [r.name for r in store.pending_checks(limit=100)]


def test_new_settings_rewrite_exactly_the_failing_rows(store: ScheduleStore) -> None:
    first = store.adopt_retry_ladder(OLD)
    assert (first.previous, first.rewritten) == (None, 0)
    failing = fleet(store)
    assert len(failing) == 3
    names = every_name(store)
    before = {n: (store.get(n), store.kept_times(n)) for n in names}
    assert store.kept_times("f0").next_can_start_at == T0 + M + 5 * M  # OLD's first step
    cursor = store.change_cursor()

    adopted = store.adopt_retry_ladder(NEW)

    assert (adopted.previous, adopted.rewritten) == (ladder_fingerprint(OLD), 3)
    assert str(adopted) == (
        "kept start times of 3 failing schedules rewritten for "
        "dgs_retry_backoff=(30, 90), dgs_retry_duration_fraction=0"
    )
    assert store.retry_ladder is NEW
    for name in names:
        stored, kept = store.get(name), store.kept_times(name)
        old_row, old_kept = before[name]
        assert stored.updated_at == old_row.updated_at
        if name not in failing:
            assert (kept, stored.change_seq) == (old_kept, old_row.change_seq), name
            continue
        assert kept != old_kept, name
        assert kept == kept_times(
            stored.spec,
            stored.stats,
            stored.updated_at,
            declaration_error=stored.declaration_error,
            retry_ladder=NEW,
        ), name
        assert stored.change_seq > cursor
    assert store.kept_times("f0").next_can_start_at == T0 + M + timedelta(seconds=30)
    assert store.kept_times("f1").next_can_start_at == T0 + 21 * M + timedelta(seconds=90)
    changed, cursor = store.changes_since(cursor)
    assert sorted(r.name for r in changed) == sorted(failing)
    assert [(r.name, r.kept_can_start_at) for r in changed if r.name == "f0"] == [
        ("f0", T0 + M + timedelta(seconds=30))
    ]

    again = store.adopt_retry_ladder(NEW)
    assert (again.previous, again.rewritten) == (ladder_fingerprint(NEW), None)
    assert store.changes_since(cursor)[0] == []
    # Later writes keep the new ladder.
    run(store, "f0", "f0-2", 2, T0 + 40 * M, "failure")
    assert store.kept_times("f0").next_can_start_at == T0 + 41 * M + timedelta(seconds=90)


def test_a_fresh_store_records_the_settings(store: ScheduleStore) -> None:
    store.sync([periodic("a", hours=1)], T0)
    cursor = store.change_cursor()
    first = store.adopt_retry_ladder(NEW)
    assert (first.previous, first.rewritten) == (None, 0)
    assert store.changes_since(cursor) == ([], cursor)
    assert store.adopt_retry_ladder(NEW).rewritten is None
    # Another fraction is other settings.
    other = RetryLadder(NEW, 0.5)
    assert store.adopt_retry_ladder(other).previous == ladder_fingerprint(NEW)


def test_a_store_tells_the_settings_it_holds(store: ScheduleStore) -> None:
    assert isinstance(store, KeptLadderReader)
    assert store.stored_ladder_fingerprint() is None
    store.adopt_retry_ladder(NEW)
    assert store.stored_ladder_fingerprint() == ladder_fingerprint(NEW)
    store.adopt_retry_ladder(OLD)
    assert store.stored_ladder_fingerprint() == ladder_fingerprint(OLD)


def test_a_stored_fingerprint_is_described_as_its_settings() -> None:
    assert describe_fingerprint(ladder_fingerprint(OLD)) == describe_ladder(OLD)
    assert describe_fingerprint(ladder_fingerprint(NEW)) == (
        "dgs_retry_backoff=(30, 90), dgs_retry_duration_fraction=0"
    )
    for odd in ("not json", "{}", '{"dgs_retry_backoff": 5}', "[1]"):
        assert describe_fingerprint(odd) == odd


def test_the_settings_are_read_at_a_url_without_upgrading_it(
    sqlite_store: SqlScheduleStore, sqlite_url: str, tmp_path: Path
) -> None:
    assert read_fingerprint_at(sqlite_url) is None
    sqlite_store.adopt_retry_ladder(NEW)
    assert read_fingerprint_at(sqlite_url) == ladder_fingerprint(NEW)
    bare = tmp_path / "bare.sqlite3"  # a store never migrated: no table, nothing created
    with pytest.raises(OperationalError, match="dgs_kept_settings"):
        read_fingerprint_at(f"sqlite:///{bare}")
    with closing(sqlite3.connect(bare)) as conn:  # closed: a context alone only commits
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_a_store_without_recorded_settings_rewrites_its_failing_rows(
    store: ScheduleStore,
) -> None:
    failing = fleet(store)  # kept with the store's default ladder, none recorded
    adopted = store.adopt_retry_ladder(NEW)
    assert (adopted.previous, adopted.rewritten) == (None, len(failing))
    assert store.kept_times("f0").next_can_start_at == T0 + M + timedelta(seconds=30)


def test_batches_rewrite_every_row_once_each_with_its_change_seq(
    sql_store: SqlScheduleStore,
) -> None:
    sql_store.adopt_retry_ladder(OLD)
    failing = fleet(sql_store, failing=5, checks=3)
    sql_store.retry_rewrite_batch = 2
    cursor = sql_store.change_cursor()
    assert sql_store.adopt_retry_ladder(NEW).rewritten == 8
    changed, _ = sql_store.changes_since(cursor)
    assert sorted(r.name for r in changed) == sorted(failing)
    # Schedules f0..f4 in batches of 2, then checks c0..c2: five transactions.
    assert len({r.change_seq for r in changed}) == 5
    for row in changed:
        want = kept_times(row.spec, row.stats, row.updated_at, retry_ladder=NEW)
        assert sql_store.kept_times(row.name) == want, row.name

    with sql_store.engine.connect() as conn:
        stored = conn.execute(text("SELECT key, value FROM dgs_kept_settings")).all()
    assert [tuple(r) for r in stored] == [("retry_ladder", ladder_fingerprint(NEW))]

    # Another store on the database (beat restarted) finds the settings recorded.
    reopened = SqlScheduleStore(sql_store.url)
    try:
        assert reopened.adopt_retry_ladder(NEW).rewritten is None
        assert reopened.adopt_retry_ladder(OLD).rewritten == 8
        assert reopened.kept_times("f0").next_can_start_at == T0 + M + 5 * M
    finally:
        reopened.close()


def test_rewrites_racing_writer_processes_lose_nothing_and_tear_nothing(
    database_url: str, sql_store: SqlScheduleStore
) -> None:
    """Writer processes end failed runs (kept with their own ladder, the
    default) while this store adopts one ladder, then the other, row by row:
    no writer fails, no run end is lost, the change poll misses no row, and
    each row's kept columns are those of one ladder or the other at its last
    write, never a mix."""
    store = sql_store
    writers = [f"p{i}" for i in range(3)]
    rounds = 6
    store.sync([periodic(n) for n in [*writers, "shared"]], T0)
    _, cursor = store.load_active()
    seen: dict[str, StoredSchedule] = {}
    store.retry_rewrite_batch = 1
    procs = spawn(database_url, writers, "shared", rounds)
    adoptions = 0
    while any(proc.poll() is None for proc in procs) or adoptions < 2:
        store.adopt_retry_ladder(NEW if adoptions % 2 == 0 else OLD)
        adoptions += 1
        changed, cursor = store.changes_since(cursor)
        seen.update((r.name, r) for r in changed)
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert (proc.returncode, out.strip()) == (0, "done"), err
    changed, cursor = store.changes_since(cursor)
    seen.update((r.name, r) for r in changed)
    for name in [*writers, "shared"]:
        row = store.get(name)
        assert seen[name] == row, name
        kept = store.kept_times(name)
        at = row.updated_at
        wants = [kept_times(row.spec, row.stats, at, retry_ladder=ladder) for ladder in (OLD, NEW)]
        assert kept in wants, name
        if name != "shared":
            assert row.stats.failure_count == rounds
    print(f"{adoptions} adoptions while the writers ran")


def test_the_settings_read_as_the_settings_are_written() -> None:
    assert describe_ladder(RetryLadder((timedelta(hours=1),), 0.0)) == (
        "dgs_retry_backoff=(3600,), dgs_retry_duration_fraction=0"
    )
    assert describe_ladder(OLD) == (
        "dgs_retry_backoff=(300, 3600, 14400), dgs_retry_duration_fraction=1"
    )
    assert ladder_fingerprint(OLD) == ladder_fingerprint(RetryLadder(tuple(OLD), 1.0))
    assert ladder_fingerprint(OLD) != ladder_fingerprint(RetryLadder(tuple(OLD), 0.5))


def test_a_new_stores_first_settings_say_nothing_was_re_timed(store: ScheduleStore) -> None:
    adopted = store.adopt_retry_ladder(NEW)
    assert (adopted.previous, adopted.rewritten) == (None, 0)
    assert str(adopted).startswith("retry settings recorded (")
    assert str(adopted).endswith("): no failing schedule to re-time")
