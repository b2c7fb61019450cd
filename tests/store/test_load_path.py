"""The start-up load path (SpecCache, raw rows, BeatEngine.load) against the validated one.

Every test runs on a real SQLite file and a real PostgreSQL database
(``database_url``) and, where beat is involved, a real Redis server.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import timedelta

import pytest
import redis
from sqlalchemy import text

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.overload import RUN_REQUEST_PRIORITY_S
from celery_dgs.core.spec import CronSpec, PeriodicSpec, ScheduleSpec
from celery_dgs.core.timing import start_times
from celery_dgs.keys import KeySpace
from celery_dgs.settings import DgsSettings
from celery_dgs.store import SqlScheduleStore
from celery_dgs.store.records import StoredSchedule
from tests.support.beat import beat_engine

from .conftest import T0, start

H = timedelta(hours=1)


@pytest.fixture
def store(sql_store: SqlScheduleStore) -> SqlScheduleStore:
    """The raw load path of the SQL store: the SQL store only (SQLite and PostgreSQL)."""
    return sql_store


def _periodic(task: str, configuration: str, **kw: object) -> PeriodicSpec:
    fields: dict[str, object] = {"scheduling_period": 6 * H, "max_expected_duration": 5 * 60}
    fields.update(kw)
    return PeriodicSpec(task=task, configuration=configuration, **fields)  # type: ignore[arg-type]


def _cron(task: str, configuration: str, expr: str, tz: str, **kw: object) -> CronSpec:
    return CronSpec(
        task=task,
        configuration=configuration,
        cron_schedule=expr,
        tz=tz,
        cron_max_schedule_duration=timedelta(minutes=20),
        **kw,  # type: ignore[arg-type]
    )


# Shapes shared by several names (and tasks), shapes of their own, name fields that
# also occur inside kwargs, names that JSON escapes: the cases the cache must get right.
SPECS: list[ScheduleSpec] = [
    *(_periodic("scrape", c, args=(1,)) for c in ("", "a", "b", "c", "d")),
    _periodic("other.scrape", "a", args=(1,)),  # same shape, another task
    _periodic("scrape", "e", args=(2,)),  # same but for the args
    _periodic("scrape", "f", kwargs={"task": "scrape", "configuration": "f"}),
    _periodic("scrape", "g", kwargs={"k": "g"}),
    _periodic("scrape", "h", kwargs={"k": "g"}),
    _periodic("scrape", 'q"uo\\te', args=(1,)),
    _periodic("scrape", "café", args=(1,)),
    _periodic("scrape", "cool", cooldown_duration=H, pool="io", dont_run_on_nodes=["n1"]),
    _periodic(
        "scrape",
        "night",
        blackout_periods=[("22:00", "02:00")],
        tz="Europe/London",
        avoid_blackout_overlap=True,
        duration_override=30 * 60,
    ),
    *(_cron("nightly", c, "0 2 * * *", "America/New_York") for c in ("x", "y", "z")),
    *(_cron("hourly", c, "30 * * * *", "Europe/Berlin") for c in ("x", "y")),
]


def _fill(store: SqlScheduleStore) -> None:
    """Sync SPECS and give them a history: successes, a failure, a pause, a run request."""
    store.sync(SPECS, T0 - 30 * 24 * H)
    for i, spec in enumerate(SPECS):
        if i % 4 == 3:
            continue  # never ran
        started = T0 - timedelta(minutes=7 * i)
        start(store, spec.name, f"run-{i}", token=i + 1, at=started)
        outcome = "failure" if i % 5 == 1 else "success"
        ended = started + timedelta(seconds=40 * i)
        store.record_run_end(run_id=f"run-{i}", outcome=outcome, ended_at=ended)
    store.set_paused("scrape@b", True)
    store.request_run("scrape@c", T0)


@pytest.fixture
def engine(store: SqlScheduleStore, redis_client: redis.Redis) -> BeatEngine:
    return beat_engine(store, redis_client, KeySpace("loadtest"), clock=FakeClock(T0))


def test_loaded_rows_equal_the_validated_path(store: SqlScheduleStore) -> None:
    _fill(store)
    validated = store.list_schedules()  # ORM rows, every spec parsed and validated in full
    rows, _cursor = store.load_active()
    assert rows == validated
    fields = {f.name for f in dataclasses.fields(StoredSchedule)}
    assert all(set(vars(r)) == fields for r in rows)  # the loader fills __dict__ itself
    assert [r.name for r in rows] == sorted(s.name for s in SPECS)
    assert all(r.spec is not None and r.spec.name == r.name for r in rows)
    changed, _ = store.changes_since(0)
    assert sorted(changed, key=lambda r: r.name) == validated
    # The cache did serve most of them (else this test would not test it).
    assert store._spec_cache.hits >= 10


def test_beat_indexes_the_validated_start_times(
    store: SqlScheduleStore, engine: BeatEngine
) -> None:
    _fill(store)
    engine.load()
    now = T0
    ladder = DgsSettings().retry_ladder
    for row in store.list_schedules():
        assert row.spec is not None
        assert engine.state.tracked[row.name].spec == row.spec
        assert engine.state.tracked[row.name].stats == row.stats
        if row.paused:
            assert row.name in engine.state.held
            assert row.name not in engine.ranking.index
            continue
        got = engine.ranking.index.times(row.name)
        assert got is not None, row.name
        if row.run_requested_at is not None:
            at = row.run_requested_at.timestamp()
            assert (got.can_start_by, got.should_start_by) == (at, at - RUN_REQUEST_PRIORITY_S)
            continue
        want = start_times(row.spec, row.stats, now, retry_ladder=ladder)
        assert (got.can_start_by, got.should_start_by) == (
            want.can_start_by.timestamp(),
            want.should_start_by.timestamp(),
        ), row.name
    assert len(engine.ranking.index) == len(SPECS) - 1


def test_same_shape_different_names_share_no_state(store: SqlScheduleStore) -> None:
    specs = [_periodic("scrape", c, kwargs={"k": k}) for c, k in (("a", 1), ("b", 1), ("c", 2))]
    store.sync(specs, T0)
    a, b, c = (r.spec for r in store.load_active()[0])
    assert a is not None
    assert b is not None
    assert c is not None
    assert (a.name, b.name, c.name) == ("scrape@a", "scrape@b", "scrape@c")
    assert (a.configuration, b.configuration) == ("a", "b")
    assert a.kwargs == b.kwargs == {"k": 1}
    assert c.kwargs == {"k": 2}
    assert a.kwargs is not b.kwargs  # the one mutable field is each schedule's own
    a.kwargs["k"] = 99  # type: ignore[index]
    assert b.kwargs == {"k": 1}
    again = {r.name: r.spec for r in store.load_active()[0]}
    assert again["scrape@a"] == _periodic("scrape", "a", kwargs={"k": 1})
    assert store._spec_cache.hits >= 2


def _set_spec(store: SqlScheduleStore, name: str, spec_text: str, **columns: str) -> None:
    sets = ", ".join(["spec = :spec", *(f"{c} = :{c}" for c in columns)])
    with store.engine.begin() as conn:
        conn.execute(
            text(f"UPDATE dgs_schedules SET {sets} WHERE name = :name"),
            {"spec": spec_text, "name": name, **columns},
        )


def test_malformed_rows_are_reported_with_schedule_and_field_and_skipped(
    store: SqlScheduleStore, engine: BeatEngine, caplog: pytest.LogCaptureFixture
) -> None:
    names = [f"scrape@{c}" for c in "abcdefg"]
    store.sync([_periodic("scrape", n.split("@")[1], args=(1,)) for n in names], T0)
    good = store.get("scrape@a")
    with store.engine.connect() as conn:
        query = text("SELECT spec FROM dgs_schedules WHERE name = 'scrape@b'")
        canonical = json.loads(conn.execute(query).scalar_one())

    def edited(**changes: object) -> str:
        return json.dumps({**canonical, **changes}, sort_keys=True, separators=(",", ":"))

    _set_spec(store, "scrape@b", "{not json")
    _set_spec(store, "scrape@c", edited(configuration="c", scheduling_period=-5))
    # Same shape as the good rows, so the cached template is used: the name is still checked.
    _set_spec(store, "scrape@d", edited(configuration="d@x"), configuration="d@x")
    _set_spec(store, "scrape@e", edited(configuration="e", tz="Mars/Olympus"))
    _set_spec(store, "scrape@f", edited(configuration="f", kind="hourly"))
    expected_fields = {
        "scrape@c": "scheduling_period",
        "scrape@d": "configuration",
        "scrape@e": "tz",
        "scrape@f": "kind",
    }

    rows = {r.name: r for r in store.load_active()[0]}
    assert rows["scrape@a"] == good
    assert rows["scrape@g"].spec is not None
    assert rows["scrape@b"].spec is None
    assert "JSONDecodeError" in str(rows["scrape@b"].spec_error)
    for name, field in expected_fields.items():
        assert rows[name].spec is None, name
        assert f"field {field!r}" in str(rows[name].spec_error), rows[name].spec_error
    assert rows["scrape@c"].spec_error is not None
    assert "'scrape@c'" in rows["scrape@c"].spec_error

    with caplog.at_level(logging.ERROR, logger="celery_dgs.beat"):
        engine.load()
    assert sorted(engine.ranking.index) == ["scrape@a", "scrape@g"]
    assert sorted(engine.state.tracked) == ["scrape@a", "scrape@g"]
    for name in ["scrape@b", *expected_fields]:
        assert any(repr(name) in r.getMessage() for r in caplog.records), name
    for name, field in expected_fields.items():
        assert any(
            repr(name) in r.getMessage() and repr(field) in r.getMessage() for r in caplog.records
        ), name


@pytest.mark.postgres
def test_a_large_sync_analyzes_so_the_poll_uses_the_index(pg_store: SqlScheduleStore) -> None:
    pg_store.sync([_periodic("bulk", f"c{i}") for i in range(pg_store.analyze_after_sync_rows)], T0)
    _, cursor = pg_store.load_active()
    with pg_store.engine.connect() as conn:
        plan = "\n".join(
            conn.execute(
                text(
                    "EXPLAIN SELECT * FROM dgs_schedules WHERE change_seq > :c "
                    "ORDER BY change_seq, name"
                ),
                {"c": cursor},
            ).scalars()
        )
    assert "Seq Scan" not in plan, plan
    assert "ix_dgs_schedules_change_seq" in plan, plan


def test_a_large_load_moves_the_loaded_objects_out_of_the_gcs_reach(
    store: SqlScheduleStore, engine: BeatEngine
) -> None:
    import gc

    _fill(store)
    before = gc.get_freeze_count()
    engine.load()  # below gc_freeze_rows: nothing frozen
    assert gc.get_freeze_count() == before
    engine.loader.gc_freeze_rows = len(SPECS) - 1
    try:
        engine.load()
        assert gc.get_freeze_count() > before
        assert gc.isenabled()
    finally:
        gc.unfreeze()
