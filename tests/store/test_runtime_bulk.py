"""The bulk write path of runtime schedules (driver-level writes: COPY on
PostgreSQL, one executemany on SQLite) and the loader's shapes without
``args``/``kwargs``, against the validated path. SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import select, text

from celery_dgs.core.kept_condition import kept_times
from celery_dgs.declarations import entry_spec
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.runtime_schedules import RuntimeSchedules
from celery_dgs.store import OWNER_RUNTIME, SqlScheduleStore, sql_runtime
from celery_dgs.store.convert import spec_json
from celery_dgs.store.models import ScheduleRow

from .conftest import T0, periodic, start

N = 1_500


def row(i: int, period: int = 3600) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": f"t.scrape@s{i:05d}",
        "period": period + 60 * (i % 7),
        "args": [f"https://s{i}.example/feed"],
        "kwargs": {"depth": i % 3, "tag": f"é{i}"},
    }
    if i % 5 == 0:
        out["blackouts"] = [["01:00", "02:00"]]
    return out


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def now(self) -> Any:
        return self.at


def _stored_texts(store: SqlScheduleStore) -> dict[str, tuple[str, str, int, str]]:
    with store.engine.connect() as conn:
        return {
            name: (spec, kind, change_seq, owner)
            for name, spec, kind, change_seq, owner in conn.execute(
                text("SELECT name, spec, kind, change_seq, owner FROM dgs_schedules")
            )
        }


def test_bulk_rows_are_stored_as_validated_and_bad_rows_reported(
    sql_store: SqlScheduleStore,
) -> None:
    rows: list[Any] = [row(i) for i in range(N)]
    rows[10] = {**row(10), "period": -5}
    rows[700] = {**row(700), "args": "not a list"}
    rows[701] = {**row(701), "kwargs": {"depth": float("nan")}}
    api = RuntimeSchedules(sql_store, clock=Clock())
    report = api.upsert_many(rows)
    assert [(e.line, e.schedule, e.field) for e in report.errors] == [
        (11, "t.scrape@s00010", "period"),
        (701, "t.scrape@s00700", "args"),
        (702, "t.scrape@s00701", "kwargs"),
    ]
    assert len(report.applied.inserted) == N - 3
    stored = _stored_texts(sql_store)
    assert len(stored) == N - 3
    assert len({seq for _, _, seq, _ in stored.values()}) == 1, "one change_seq"
    for i in (0, 1, 5, 699, 1499):
        want = entry_spec(row(i))
        spec_text, kind, _, owner = stored[want.name]
        assert (spec_text, kind, owner) == (spec_json(want), "periodic", OWNER_RUNTIME)
        got = sql_store.get(want.name)
        assert got.spec == want
        assert got.stats.registered_at == T0
        assert (got.active, got.paused, got.declaration_error) == (True, False, None)
    # What the loader reads is what the validated (ORM) path reads.
    assert sql_store.load_active()[0] == sql_store.list_schedules()


def test_bulk_again_writes_nothing_and_changes_write_only_the_changed(
    sql_store: SqlScheduleStore,
) -> None:
    clock = Clock()
    api = RuntimeSchedules(sql_store, clock=clock)
    api.upsert_many(row(i) for i in range(N))
    sql_store.sync([periodic("t.code")], T0)
    start(sql_store, "t.scrape@s00003", "run-3", token=7)
    sql_store.set_paused("t.scrape@s00004", True)
    api.remove_many(["t.scrape@s00005"])
    _, cursor = sql_store.load_active()
    before = _stored_texts(sql_store)
    clock.at = T0 + timedelta(hours=1)

    again = api.upsert_many([row(i) for i in range(N) if i != 5])
    assert len(again.applied.unchanged) == N - 1
    assert not again.applied.changed
    assert sql_store.changes_since(cursor)[0] == []
    assert _stored_texts(sql_store) == before

    changed = [row(i, period=7200) if i in (3, 4) else row(i) for i in range(N)]
    changed.append({"name": "t.code", "period": 60})
    report = api.upsert_many(changed)
    assert report.applied.updated == ["t.scrape@s00003", "t.scrape@s00004"]
    assert report.applied.reactivated == ["t.scrape@s00005"]
    assert [(e.line, e.field) for e in report.errors] == [(N + 1, "owner")]
    rows, _ = sql_store.changes_since(cursor)
    assert [r.name for r in rows] == ["t.scrape@s00003", "t.scrape@s00004", "t.scrape@s00005"]
    three = sql_store.get("t.scrape@s00003")
    assert three.spec == entry_spec(row(3, period=7200))
    assert three.current_token == 7, "statistics and tokens stay"
    assert three.stats.registered_at == T0
    assert three.updated_at == clock.at
    assert sql_store.get("t.scrape@s00004").paused, "paused stays"
    assert sql_store.get("t.scrape@s00005").active
    assert sql_store.get("t.code").owner != OWNER_RUNTIME


def test_a_failure_after_the_inserts_applies_nothing(
    sql_store: SqlScheduleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = RuntimeSchedules(sql_store, clock=Clock())
    api.upsert_many([row(0), row(1)])

    def broken(*args: object) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(sql_runtime, "update_changed", broken)
    with pytest.raises(RuntimeError):
        api.upsert_many([row(0, period=60), *(row(i) for i in range(2, 50))])
    assert [s.name for s in sql_store.list_schedules()] == ["t.scrape@s00000", "t.scrape@s00001"]
    assert sql_store.get("t.scrape@s00000").spec == entry_spec(row(0))


def _set_spec(store: SqlScheduleStore, name: str, spec_text: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            text("UPDATE dgs_schedules SET spec = :s WHERE name = :n"), {"s": spec_text, "n": name}
        )


def test_the_loader_shares_a_template_across_arguments_and_reads_edits_as_validated(
    sql_store: SqlScheduleStore,
) -> None:
    api = RuntimeSchedules(sql_store, clock=Clock())
    api.upsert_many(row(i) for i in range(100))
    canonical = json.loads(_stored_texts(sql_store)["t.scrape@s00001"][0])

    def edited(name: str, **changes: Any) -> str:
        data = {**canonical, "configuration": name.split("@")[1], **changes}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    edits = {
        "t.scrape@s00008": edited("t.scrape@s00008", args=[1.5, {"args": 1}]),  # a nested key
        "t.scrape@s00011": edited("t.scrape@s00011", kwargs={"kwargs": {"x": 1}}),
        "t.scrape@s00013": edited("t.scrape@s00013").replace('"args":[', '"args": ['),
        "t.scrape@s00015": edited("t.scrape@s00015", kwargs=["not", "an", "object"]),
        "t.scrape@s00016": edited("t.scrape@s00016", args={"not": "a list"}),
        "t.scrape@s00018": edited("t.scrape@s00018").replace('"args":[', '"args":[NaN,'),
        "t.scrape@s00022": edited("t.scrape@s00022").replace('"args":[', '"args":[1e400,'),
        "t.scrape@s00023": edited("t.scrape@s00023", args=["x" * 3, -0.0, 10**30, True, None]),
    }
    for name, spec_text in edits.items():
        _set_spec(sql_store, name, spec_text)
    hits = sql_store._spec_cache.hits
    loaded = sql_store.load_active()[0]
    validated = sql_store.list_schedules()  # every spec parsed and checked in full
    assert [(r.name, r.spec, r.spec_error) for r in loaded] == [
        (r.name, r.spec, r.spec_error) for r in validated
    ]
    assert loaded == validated
    errors = {r.name for r in loaded if r.spec is None}
    assert errors == {"t.scrape@s00015", "t.scrape@s00016", "t.scrape@s00018", "t.scrape@s00022"}
    # Schedules with their own arguments are copies of a few templates.
    assert sql_store._spec_cache.hits - hits >= 75
    assert len(sql_store._spec_cache) <= 20  # 14 shapes of row(), and the edits


def test_new_rows_keep_every_character_and_their_kept_values(sql_store: SqlScheduleStore) -> None:
    """Backslash, tab, newline, carriage return, ``COPY``'s text NULL marker,
    ``%`` and braces, and non-ASCII text, in the names, the arguments and the
    queue, are stored as given; so are the kept values and the hint."""
    odd = ["tab\there", "new\nline", "cr\rx", "back\\slash", "\\N", "é ü 雪", "%s {0}"]
    rows: list[dict[str, Any]] = [
        {
            "name": f"t.odd@{value}",
            "period": 3600,
            "queue": f"q{i % 2}{value}",
            "args": [value, i],
            "kwargs": {value: value},
        }
        for i, value in enumerate(odd)
    ]
    rows.append(
        {
            "name": "t.adaptive@a\tb",
            "kind": "adaptive",
            "interval_unit": 3600,
            "last_modified": "2026-02-01T10:30:00.250000+01:00",
        }
    )
    report = RuntimeSchedules(sql_store, clock=Clock()).upsert_many(rows)
    assert report.ok, report.errors
    assert len(report.applied.inserted) == len(rows)
    stored = _stored_texts(sql_store)
    for given in rows:
        fields = {k: v for k, v in given.items() if k != "last_modified"}
        want = entry_spec(fields)
        assert stored[want.name][0] == spec_json(want), want.name
        got = sql_store.get(want.name)
        assert got.spec == want
        assert got.spec.pool == given.get("queue")
        assert sql_store.kept_times(want.name) == kept_times(want, got.stats, T0)
    with sql_store.engine.connect() as conn:
        hint = conn.execute(
            select(ScheduleRow.upstream_modified_at).where(ScheduleRow.name == "t.adaptive@a\tb")
        ).scalar_one()
    assert hint == datetime(2026, 2, 1, 9, 30, 0, 250000, tzinfo=timezone.utc)


def _error_of(row: dict[str, Any]) -> tuple[str, str, str]:
    with pytest.raises(ScheduleConfigError) as info:
        entry_spec(row)
    return info.value.schedule, info.value.field, info.value.message


def test_bad_rows_of_a_known_shape_name_their_schedule_and_field(
    sql_store: SqlScheduleStore,
) -> None:
    """Every row is validated, also when its shape was seen before: a bad one
    is reported by line, schedule and field (the full validation's error),
    the others written."""
    bad: list[dict[str, Any]] = [
        {**row(1), "name": "t.scrape@a@b"},
        {**row(1), "name": "@s1"},
        {**row(1), "kwargs": {1: "x"}},
        {**row(1), "kwargs": []},
        {**row(1), "args": [object()]},
        {**row(1), "args": [float("nan")]},
        {**row(1), "args": "not a list"},
        {**row(1), "period": -1},
        {**row(1), "period": True},
        {**row(1), "priority": 100},
        {**row(1), "queue": ""},
        {**row(1), "periodd": 60},
    ]
    rows: list[dict[str, Any]] = [row(i) for i in range(50)]
    for i, bad_row in enumerate(bad):
        rows.append({**bad_row, "name": bad_row["name"].replace("s00001", f"b{i:02d}")})
    rows.append({"name": "t.scrape@p", "period": 60, "last_modified": "2026-01-01T00:00:00Z"})
    rows.append({"name": "t.a@q", "kind": "adaptive", "last_modified": "yesterday"})
    rows.extend(row(i) for i in range(50, 60))
    report = RuntimeSchedules(sql_store, clock=Clock()).upsert_many(rows)
    want = [(51 + i, *_error_of(r)) for i, r in enumerate(rows[50 : 50 + len(bad)])]
    last = 51 + len(bad)
    want.append(
        (last, "t.scrape@p", "last_modified", "only an adaptive schedule takes it (periodic)")
    )
    got = [(e.line, e.schedule, e.field, e.message) for e in report.errors]
    assert got[:-1] == want
    assert got[-1][:3] == (last + 1, "t.a@q", "last_modified")
    assert "must be an aware datetime" in got[-1][3]
    assert [field for _, _, field, _ in want] == [
        "configuration",
        "task",
        "kwargs",
        "kwargs",
        "args",
        "args",
        "args",
        "period",
        "period",
        "priority",
        "queue",
        "periodd",
        "last_modified",
    ]
    assert sorted(report.applied.inserted) == sorted(entry_spec(row(i)).name for i in range(60))
