"""A hand-edited average duration (NaN, infinity, negative) is reported with the
schedule and the field; the row is skipped and beat serves the others."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import text

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import SystemClock
from celery_dgs.settings import DgsSettings
from celery_dgs.store import SqlScheduleStore

from .conftest import T0, periodic, start


@pytest.fixture
def store(sql_store: SqlScheduleStore) -> SqlScheduleStore:
    """These tests edit stored rows by hand: the SQL store only (SQLite and PostgreSQL)."""
    return sql_store


def set_average(store: SqlScheduleStore, name: str, value: float) -> None:
    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(
            text("UPDATE dgs_schedules SET average_good_duration_s = :v WHERE name = :n"),
            {"v": value, "n": name},
        )
    store.request_run(name, T0)  # writes through the store bump the change cursor
    store.clear_run_request(name)


def bad_values(store: SqlScheduleStore) -> list[float]:
    # SQLite stores NaN as NULL; PostgreSQL keeps it.
    values = [float("inf"), -1.0]
    if store.engine.dialect.name != "sqlite":  # type: ignore[attr-defined]
        values.append(float("nan"))
    return values


class Nothing:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"not used: {name}")


class Leases:
    ping_timeout_ms = 90_000

    def beat_view_reader(self) -> Nothing:
        return Nothing()


@pytest.mark.parametrize("reader", ["iter_active", "load_active", "get", "list"])
def test_every_read_path_reports_the_row_and_keeps_the_others(
    store: SqlScheduleStore, reader: str
) -> None:
    store.sync([periodic("t.good"), periodic("t.bad")], T0)
    for value in bad_values(store):
        set_average(store, "t.bad", value)
        if reader == "iter_active":
            rows = list(store.iter_active()[1])
        elif reader == "load_active":
            rows = store.load_active()[0]
        elif reader == "get":
            rows = [store.get("t.good"), store.get("t.bad")]
        else:
            rows = store.list_schedules()
        by_name = {r.name: r for r in rows}
        assert by_name["t.good"].spec is not None
        bad = by_name["t.bad"]
        assert bad.spec is None, value
        assert bad.spec_error is not None
        assert "average_good_duration_s" in bad.spec_error
        assert repr(value) in bad.spec_error


def test_changes_since_reports_it_too(store: SqlScheduleStore) -> None:
    store.sync([periodic("t.good"), periodic("t.bad")], T0)
    _, cursor = store.changes_since(0)
    for value in bad_values(store):
        set_average(store, "t.bad", value)
        rows, cursor = store.changes_since(cursor)
        assert [(r.name, r.spec) for r in rows] == [("t.bad", None)]


def test_beat_logs_schedule_and_field_and_serves_the_others(
    store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.sync([periodic("t.good"), periodic("t.bad")], T0)
    set_average(store, "t.bad", bad_values(store)[-1])
    engine = BeatEngine(
        store=store,
        leases=Leases(),
        registry=Nothing(),
        dispatches=Nothing(),
        publish=lambda orders: [],
        settings=DgsSettings(),
        clock=SystemClock(),
    )
    engine.pending_dispatches.adopt = lambda: None  # type: ignore[method-assign]  # no Redis here
    with caplog.at_level(logging.ERROR, logger="celery_dgs.beat"):
        engine.load()
    assert "t.good" in engine.ranking.index
    assert "t.bad" not in engine.ranking.index
    assert "'t.bad' is not schedulable: average_good_duration_s" in caplog.text


def test_recording_a_run_over_a_bad_average_repairs_it(
    store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.sync([periodic("t.bad")], T0)
    set_average(store, "t.bad", bad_values(store)[-1])
    start(store, "t.bad", "r1", token=1)
    ended = store.record_run_end(run_id="r1", outcome="success", ended_at=T0.replace(minute=5))
    assert ended.spec is not None
    assert ended.stats.average_good_duration is not None
    assert ended.stats.average_good_duration.total_seconds() == 300
    assert "'t.bad': average_good_duration_s" in caplog.text


def test_a_bad_duration_deviation_is_reported_with_its_field(store: SqlScheduleStore) -> None:
    store.sync([periodic("t.good"), periodic("t.bad")], T0)
    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(
            text("UPDATE dgs_schedules SET duration_deviation_s = -2.5 WHERE name = 't.bad'")
        )
    by_name = {r.name: r for r in store.iter_active()[1]}
    assert by_name["t.good"].spec is not None
    assert by_name["t.bad"].spec is None
    assert by_name["t.bad"].spec_error == (
        "duration_deviation_s: expected a finite number of seconds >= 0, got -2.5"
    )
    assert store.get("t.bad").spec_error == by_name["t.bad"].spec_error
