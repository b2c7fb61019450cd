"""The schema exists only through the alembic migrations: an upgrade path with data,
idempotent and race-safe upgrades, and models that match the migrated schema."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect, text

from celery_dgs.core.laxity import margin_bucket
from celery_dgs.core.timing import start_margin
from celery_dgs.errors import SchemaTooNewError
from celery_dgs.store import SqlScheduleStore
from celery_dgs.store.engine import make_engine
from celery_dgs.store.migrate import VERSION_TABLE, current_revision, head_revision, upgrade_url
from celery_dgs.store.models import Base

from .conftest import T0, periodic


def insert_periodic_row(conn: Connection, name: str) -> None:
    """An active periodic schedule ``name`` written by hand, with only the
    columns every revision has (change_seq 1, updated 2026-03-01 12:00 UTC)."""
    postgres = conn.dialect.name == "postgresql"
    conn.execute(
        text(
            "INSERT INTO dgs_schedules (name, task, configuration, kind, spec,"
            " spec_format, active, paused, change_seq, updated_at) VALUES"
            " (:n, :n, '', 'periodic', :spec, 1, :t, :f, 1, :ts)"
        ),
        {
            "n": name,
            "spec": json.dumps(periodic(name).to_dict()),
            "t": True,
            "f": False,
            "ts": "2026-03-01 12:00:00" + ("+00:00" if postgres else ""),
        },
    )


def test_upgrade_from_the_first_revision_keeps_the_data(database_url: str) -> None:
    upgrade_url(database_url, "0001")
    engine = make_engine(database_url)
    assert current_revision(engine) == "0001"
    assert "progress" not in {c["name"] for c in inspect(engine).get_columns("dgs_runs")}
    spec = periodic("legacy").to_dict()

    stamp = "2026-03-01 12:00:00" + ("+00:00" if engine.dialect.name == "postgresql" else "")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO dgs_schedules (name, task, configuration, kind, spec, spec_format,"
                " active, paused, registered_at, last_start_at, failure_count,"
                " average_good_duration_s, current_token, change_seq, updated_at) VALUES"
                " ('legacy', 'legacy', '', 'periodic', :spec, 1, :t, :f, :ts, :ts, 2, 12.5,"
                " 4, 3, :ts)"
            ),
            {"spec": json.dumps(spec), "ts": stamp, "t": True, "f": False},
        )
        conn.execute(text("UPDATE dgs_counter SET value = 3"))
        conn.execute(
            text(
                "INSERT INTO dgs_runs (run_id, schedule, owner_node, token, started_at, outcome)"
                " VALUES ('old-run', 'legacy', 'n1', 4, :ts, 'running')"
            ),
            {"ts": stamp},
        )
    engine.dispose()

    store = SqlScheduleStore.open(database_url)
    try:
        assert current_revision(store.engine) == head_revision() == "0019_kept_warning"
        got = store.get("legacy")
        assert got.spec == periodic("legacy")
        assert got.stats.registered_at == T0
        assert got.stats.failure_count == 2
        assert got.current_token == 4
        assert got.stats.average_good_duration == timedelta(seconds=12.5)
        assert got.stats.duration_deviation is None  # 0003: not known yet
        assert got.declaration_error is None  # 0004: the declaration is valid
        assert got.owner == "declared"  # 0005: every older row was written by sync
        assert got.disabled_reason is None  # 0006: enabled, no adaptive state
        assert got.stats.interval_index is None
        assert got.run_requested_priority is None  # 0007: no run request
        [run] = store.running_runs()
        assert (run.run_id, run.token, run.progress, run.fenced) == ("old-run", 4, None, False)
        ended = store.record_run_end(  # progress: the new column works
            run_id="old-run", outcome="success", ended_at=T0 + timedelta(seconds=20), progress=0.75
        )
        assert ended.stats.failure_count == 0
        assert ended.stats.duration_deviation == timedelta(seconds=7.5)  # |20 - 12.5|
        assert ended.change_seq == 4
        store.request_run("legacy", T0, priority=30)  # 0007: the new column works
        assert store.get("legacy").run_requested_priority == 30
        assert store.runs("legacy")[0].progress == 0.75
    finally:
        store.close()


def test_0004_adds_the_declaration_error_to_existing_rows(database_url: str) -> None:
    upgrade_url(database_url, "0003")
    engine = make_engine(database_url)
    assert "declaration_error" not in {
        c["name"] for c in inspect(engine).get_columns("dgs_schedules")
    }
    engine.dispose()
    old = SqlScheduleStore(database_url)  # the 0003 schema, written by this version's sync
    try:
        with old.engine.begin() as conn:
            insert_periodic_row(conn, "kept")
            conn.execute(text("UPDATE dgs_counter SET value = 1"))
    finally:
        old.close()
    store = SqlScheduleStore.open(database_url)
    try:
        assert current_revision(store.engine) == head_revision()
        assert store.get("kept").declaration_error is None
        report = store.sync([], T0, invalid={"kept": "field 'tz': bad"})
        assert report.invalid == ["kept"]
        got = store.get("kept")
        assert got.active
        assert got.spec == periodic("kept")
        assert got.declaration_error == "field 'tz': bad"
    finally:
        store.close()


def test_0005_marks_existing_rows_declared_and_sync_keeps_runtime_ones(
    database_url: str,
) -> None:
    upgrade_url(database_url, "0004")
    engine = make_engine(database_url)
    assert "owner" not in {c["name"] for c in inspect(engine).get_columns("dgs_schedules")}
    engine.dispose()
    old = SqlScheduleStore(database_url)  # the 0004 schema
    try:
        with old.engine.begin() as conn:
            for name in ("old.a", "old.b"):
                insert_periodic_row(conn, name)
            conn.execute(text("UPDATE dgs_counter SET value = 1"))
    finally:
        old.close()
    store = SqlScheduleStore.open(database_url)
    try:
        assert current_revision(store.engine) == head_revision()
        assert [s.owner for s in store.list_schedules()] == ["declared", "declared"]
        assert store.upsert_runtime([periodic("old.a")], T0).refused == ["old.a"]
        assert store.upsert_runtime([periodic("new.r")], T0).inserted == ["new.r"]
        report = store.sync([periodic("old.a")], T0)
        assert report.deactivated == ["old.b"]
        assert store.get("new.r").active
        assert store.get("new.r").owner == "runtime"
    finally:
        store.close()


#: Rows of the 0016 test: name -> (average run seconds, deviation seconds).
_RUN_TIMES = {"none": (None, None), "short": (12.5, 2.0), "mid": (600.0, 90.0), "long": (3600, 0.0)}


def test_0016_backfills_the_margin_bucket_of_rows_kept_before(database_url: str) -> None:
    """Rows written before the kept columns get them at 0010 (without the
    margin bucket), and their margin bucket at 0016: that of their kept
    ``error_at - should_start_by``, the margin of their spec and statistics."""
    upgrade_url(database_url, "0009")
    old = SqlScheduleStore(database_url)  # the 0009 schema
    try:
        with old.engine.begin() as conn:
            for name, (average, deviation) in _RUN_TIMES.items():
                insert_periodic_row(conn, name)
                conn.execute(
                    text(
                        "UPDATE dgs_schedules SET average_good_duration_s = :a,"
                        " duration_deviation_s = :d WHERE name = :n"
                    ),
                    {"a": average, "d": deviation, "n": name},
                )
            insert_periodic_row(conn, "invalid")
            conn.execute(text("UPDATE dgs_schedules SET spec = '{' WHERE name = 'invalid'"))
            conn.execute(text("UPDATE dgs_counter SET value = 1"))
    finally:
        old.close()
    upgrade_url(database_url, "0015_kept_settings")
    engine = make_engine(database_url)
    try:
        columns = {c["name"] for c in inspect(engine).get_columns("dgs_schedules")}
        assert "error_at" in columns
        assert "margin_bucket" not in columns
    finally:
        engine.dispose()
    store = SqlScheduleStore.open(database_url)
    try:
        assert current_revision(store.engine) == head_revision()
        buckets = set()
        for name in _RUN_TIMES:
            got = store.get(name)
            assert got.spec is not None
            assert got.kept_should_start_by is not None
            assert got.kept_error_at is not None
            margin = start_margin(got.spec, got.stats).total_seconds()
            assert got.kept_margin_bucket == margin_bucket(margin), name
            buckets.add(got.kept_margin_bucket)
        assert len(buckets) == len(_RUN_TIMES)
        invalid = store.get("invalid")
        assert invalid.kept_should_start_by is None
        assert invalid.kept_margin_bucket is None
        assert store.window_margin_buckets() == sorted(buckets)
    finally:
        store.close()


def test_upgrade_twice_is_a_no_op_and_the_models_match_the_schema(database_url: str) -> None:
    store = SqlScheduleStore.open(database_url)
    try:
        store.sync([periodic("a")], T0)
        before = store.get("a")
        store.upgrade()
        SqlScheduleStore.open(database_url).close()
        assert store.get("a") == before
        assert current_revision(store.engine) == head_revision()
        with store.engine.connect() as conn:
            rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
            assert [r[0] for r in rows] == [head_revision()]
            context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        store.close()


def test_concurrent_upgrades_of_a_fresh_database(database_url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def upgrade() -> None:
        try:
            barrier.wait(timeout=30)
            upgrade_url(database_url)
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=upgrade) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    engine = make_engine(database_url)
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_a_schema_newer_than_the_scripts_is_named_not_migrated(database_url: str) -> None:
    """An older celery-dgs opening a schema a newer one upgraded (a rollback):
    one error naming the database, the revision and the way out, where
    alembic raised "Can't locate revision"."""
    assert upgrade_url(database_url) == (None, head_revision())
    assert upgrade_url(database_url) == (head_revision(), head_revision())
    engine = make_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '0099_from_the_future'"))
    finally:
        engine.dispose()
    with pytest.raises(SchemaTooNewError) as raised:
        SqlScheduleStore.open(database_url)
    message = str(raised.value)
    assert "has schema revision '0099_from_the_future', which this celery-dgs does not " in message
    assert f"(its newest is {head_revision()!r})" in message
    assert "run that version (or a newer one) in every process" in message
    assert "(dgs_database_url)" in message
