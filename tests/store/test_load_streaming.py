"""The start-up read on its fast paths: PostgreSQL's streamed rows, the spec
shapes keyed with their task, the statistics built slot by slot.

Each is compared with the validated path (ORM rows, every spec parsed in full)
on a real SQLite file and a real PostgreSQL database (``database_url``); a
malformed row is still reported with its schedule and field.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Generator
from datetime import timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import text

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.store import SqlScheduleStore
from celery_dgs.store.engine import connection_transaction
from celery_dgs.store.loader import STATS_FIELDS, SpecCache, new_stats
from celery_dgs.store.streaming import streamed_rows

from .conftest import T0, start

H = timedelta(hours=1)


def _spec(task: str, configuration: str, **kw: object) -> PeriodicSpec:
    return PeriodicSpec(
        task=task,
        configuration=configuration,
        scheduling_period=6 * H,
        args=(f"https://{configuration}.example.org",),
        kwargs={"depth": len(configuration)},
        **kw,
    )  # type: ignore[arg-type]


def _fill(store: SqlScheduleStore, n: int = 40) -> list[PeriodicSpec]:
    specs = [_spec("scrape", f"s{i:03d}") for i in range(n)]
    specs += [_spec("other", f"s{i:03d}") for i in range(3)]  # same shapes, another task
    store.sync(specs, T0 - 24 * H)
    for i, spec in enumerate(specs[::3]):
        start(store, spec.name, f"run-{i}", token=i + 1, at=T0 - timedelta(minutes=i))
        ended = T0 - timedelta(minutes=i) + timedelta(seconds=20 + i)
        store.record_run_end(run_id=f"run-{i}", outcome="success", ended_at=ended)
    return specs


def _update(store: SqlScheduleStore, name: str, sets: str, **params: object) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            text(f"UPDATE dgs_schedules SET {sets} WHERE name = :name"), {"name": name, **params}
        )


def test_the_fast_paths_load_what_the_validated_path_loads(sql_store: SqlScheduleStore) -> None:
    specs = _fill(sql_store)
    validated = sql_store.list_schedules()
    rows, _ = sql_store.load_active()
    assert rows == validated
    assert [r.spec for r in rows] == sorted(specs, key=lambda s: s.name)
    assert all(
        r.stats == v.stats and type(r.stats) is ScheduleStats
        for r, v in zip(rows, validated, strict=True)
    )
    assert sql_store._spec_cache.hits >= len(specs) - 3
    # Each schedule has its own arguments and its own kwargs dict.
    assert len({id(r.spec.kwargs) for r in rows if r.spec is not None}) == len(rows)
    moments = [m for r in rows for m in (r.stats.last_good_start_at, r.stats.registered_at) if m]
    assert moments
    assert all(m.tzinfo is timezone.utc for m in moments)


@pytest.mark.postgres
def test_postgres_streams_the_rows(pg_store: SqlScheduleStore) -> None:
    _fill(pg_store, 5)
    with connection_transaction(pg_store.engine, write=False) as conn:
        conn.exec_driver_sql("SET LOCAL TIME ZONE 'UTC'")
        rows = streamed_rows(conn, "SELECT name, registered_at FROM dgs_schedules ORDER BY name", 2)
        assert rows is not None
        got = list(rows)
    assert [name for name, _ in got] == sorted(s.name for s in pg_store.list_schedules())
    assert all(moment.tzinfo is timezone.utc for _, moment in got)


def test_sqlite_is_not_streamed(sqlite_store: SqlScheduleStore) -> None:
    with connection_transaction(sqlite_store.engine, write=False) as conn:
        assert streamed_rows(conn, "SELECT 1", 10) is None


def test_a_load_closed_early_leaves_the_store_usable(sql_store: SqlScheduleStore) -> None:
    _fill(sql_store)
    _cursor, rows = sql_store.iter_active()
    first = next(rows)
    assert isinstance(rows, Generator)
    rows.close()  # beat stopped in the middle of its start-up
    assert sql_store.set_paused(first.name, True)
    loaded, _ = sql_store.load_active()
    assert loaded == sql_store.list_schedules()
    assert [r.paused for r in loaded if r.name == first.name] == [True]


def test_malformed_rows_on_the_fast_paths_name_schedule_and_field(
    sql_store: SqlScheduleStore,
) -> None:
    _fill(sql_store)
    with sql_store.engine.connect() as conn:
        spec_text = conn.execute(text("SELECT spec FROM dgs_schedules WHERE name = 'scrape@s002'"))
        canonical = json.loads(spec_text.scalar_one())
    # Same shape as the others (a cache hit), but a name the check refuses.
    bad_name = json.dumps(
        {**canonical, "configuration": "s@2"}, sort_keys=True, separators=(",", ":")
    )
    _update(sql_store, "scrape@s002", "spec = :spec, configuration = 's@2'", spec=bad_name)
    # The task column disagrees with the text's task: parsed in full, as before.
    _update(sql_store, "scrape@s004", "task = 'other'")
    _update(sql_store, "scrape@s006", "average_good_duration_s = -3")
    _update(sql_store, "scrape@s007", "duration_deviation_s = -1")
    _update(sql_store, "scrape@s008", "interval_index = -2")
    rows = {r.name: r for r in sql_store.load_active()[0]}
    assert rows == {r.name: r for r in sql_store.list_schedules()}
    expected = {
        "scrape@s002": "configuration",
        "scrape@s006": "average_good_duration_s",
        "scrape@s007": "duration_deviation_s",
        "scrape@s008": "interval_index",
    }
    for name, field in expected.items():
        assert rows[name].spec is None, name
        assert field in str(rows[name].spec_error), (name, rows[name].spec_error)
    assert "'scrape@s@2'" in str(rows["scrape@s002"].spec_error)
    assert rows["scrape@s004"].spec is not None
    assert rows["scrape@s004"].spec.task == "scrape"  # the text's, as parse_spec gives it
    assert rows["scrape@s005"].spec is not None  # the rest load


def test_new_stats_is_the_dataclass() -> None:
    assert tuple(f.name for f in dataclasses.fields(ScheduleStats)) == STATS_FIELDS
    assert list(inspect.signature(new_stats).parameters) == list(STATS_FIELDS)
    values: list[Any] = [
        T0,
        T0 - H,
        T0 - H / 2,
        T0,
        T0 + H,
        2,
        timedelta(seconds=3),
        timedelta(1),
        4,
        T0 + 2 * H,
        T0 - 3 * H,
        7,
        3,
    ]
    built = new_stats(*values)
    assert built == ScheduleStats(**dict(zip(STATS_FIELDS, values, strict=True)))
    assert built.has_succeeded
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.failure_count = 3  # type: ignore[misc]


def test_a_shape_is_shared_by_the_schedules_of_its_task_only() -> None:
    cache = SpecCache()
    a, b = _spec("scrape", "a"), _spec("scrape", "b")
    other = _spec("other", "a")
    for spec in (a, b, other):
        got, error = cache.parse(_json(spec), spec.task, spec.configuration)
        assert (got, error) == (spec, None)
    assert cache.hits == 1  # b; other has its own shape
    again, _ = cache.parse(_json(other), "other", "a")
    assert again == other
    assert cache.hits == 2
    # The text of a "scrape" schedule stored under task "other": not the template's task.
    mismatch, _ = cache.parse(_json(b), "other", "b")
    assert mismatch == b


def _json(spec: PeriodicSpec) -> str:
    from celery_dgs.store.convert import spec_json

    return spec_json(spec)
