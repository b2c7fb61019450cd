"""``dgs.schedules``: runtime schedules validated as declarations, bulk rows
reported by line, schedule and field, ownership refused both ways; and the
JSON-lines / CSV files ``import`` reads and ``export`` writes. On a real
SQLite store."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta

import pytest
from celery import Celery

from celery_dgs import OwnershipError, ScheduleConfigError, UnknownScheduleError
from celery_dgs.core.spec import CronSpec, PeriodicSpec
from celery_dgs.declarations import Declarations
from celery_dgs.dgs import DGS
from celery_dgs.runtime_schedules import RowError, RuntimeSchedules
from celery_dgs.schedule_files import read_rows, write_rows
from celery_dgs.store import OWNER_RUNTIME, SqlScheduleStore
from tests.cli.conftest import make_app


@pytest.fixture
def app(sqlite_url: str, redis_url: str) -> Iterator[Celery]:
    app = make_app(sqlite_url, redis_url)
    for name in ("t.scrape", "t.code"):

        def noop(*args: object, **kwargs: object) -> None:
            pass

        app.task(name=name, shared=False)(noop)
    app.conf.dgs_schedules = {"t.code": {"period": 3600}}
    yield app
    app.close()


def test_upsert_get_list_remove(app: Celery, sqlite_store: SqlScheduleStore) -> None:
    api = DGS(app).schedules
    action = api.upsert(
        "t.scrape@example.org",
        period=3600,
        cooldown=60,
        args=["https://example.org"],
        kwargs={"depth": 2},
    )
    assert action == "inserted"
    row = api.get("t.scrape@example.org")
    assert row.owner == OWNER_RUNTIME
    assert row.spec == PeriodicSpec(
        task="t.scrape",
        configuration="example.org",
        scheduling_period=timedelta(hours=1),
        cooldown_duration=timedelta(minutes=1),
        args=("https://example.org",),
        kwargs={"depth": 2},
    )
    seq = sqlite_store.get("t.scrape@example.org").change_seq
    assert (
        api.upsert(
            "t.scrape",
            configuration="example.org",
            period=3600,
            cooldown=60,
            args=["https://example.org"],
            kwargs={"depth": 2},
        )
        == "unchanged"
    )
    assert sqlite_store.get("t.scrape@example.org").change_seq == seq, "nothing written"
    assert api.upsert("t.scrape@example.org", cron="0 * * * *", within=600) == "updated"
    assert isinstance(sqlite_store.get("t.scrape@example.org").spec, CronSpec)
    assert [s.name for s in api.list()] == ["t.scrape@example.org"]
    assert api.remove("t.scrape@example.org") is True
    assert api.remove("t.scrape@example.org") is False
    assert api.list() == []
    assert [s.name for s in api.list(include_removed=True)] == ["t.scrape@example.org"]
    with pytest.raises(UnknownScheduleError):
        api.get("t.nothing")


def test_validation_is_the_declarations(app: Celery, sqlite_store: SqlScheduleStore) -> None:
    api = DGS(app).schedules
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.scrape@a", period=60, cooldown=120)
    assert (err.value.schedule, err.value.field) == ("t.scrape@a", "cooldown")
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.scrape@a", period=60, perod=5)
    assert err.value.field == "perod"
    assert "did you mean 'period'" in err.value.message
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.unknown@a", period=60)
    assert (err.value.field, err.value.message) == ("task", "unknown task 't.unknown'")
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.scrap@a", period=60)
    assert err.value.message == "unknown task 't.scrap'; did you mean 't.scrape'?"
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.scrape@a", period=60, args=[object()])
    assert err.value.field == "args"
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.scrape@a", configuration="b", period=60)
    assert (err.value.schedule, err.value.field) == ("t.scrape@a", "configuration")
    assert sqlite_store.list_schedules(include_inactive=True) == []


def test_the_api_refuses_a_declared_schedule(app: Celery, sqlite_store: SqlScheduleStore) -> None:
    dgs = DGS(app)
    decl = dgs.all_declarations()
    sqlite_store.sync(list(decl.specs.values()), sqlite_store._clock.now())
    before = sqlite_store.get("t.code")
    with pytest.raises(OwnershipError) as err:
        dgs.schedules.upsert("t.code", period=60)
    assert err.value.schedule == "t.code"
    assert err.value.field == "owner"
    assert "declared in code" in str(err.value)
    with pytest.raises(OwnershipError):
        dgs.schedules.remove("t.code")
    with pytest.raises(UnknownScheduleError, match="declared schedule"):
        dgs.schedules.get("t.code")
    assert sqlite_store.get("t.code") == before


def test_bulk_reports_bad_rows_and_applies_the_good(
    app: Celery, sqlite_store: SqlScheduleStore
) -> None:
    dgs = DGS(app)
    sqlite_store.sync(list(dgs.all_declarations().specs.values()), sqlite_store._clock.now())
    rows: list[object] = [
        {"name": "t.scrape@a", "period": 3600},
        {"name": "t.scrape@b", "period": -1},  # line 2: bad field
        {"name": "t.scrape@c", "cron": "0 * * * *", "within": 60},
        {"name": "t.code", "period": 60},  # line 4: declared
        {"task": "t.nope", "period": 60},  # line 5: unknown task
        {"name": "t.scrape@a", "period": 7200},  # line 6: again, different
        {"name": "t.scrape@a", "period": 3600},  # line 7: again, the same: fine
        ["not", "a", "mapping"],  # line 8
        {"period": 60},  # line 9: no task
        {"name": "t.scrape@d", "task": "t.code", "period": 60},  # line 10: name disagrees
    ]
    report = dgs.schedules.upsert_many(rows)  # type: ignore[arg-type]
    assert report.applied.inserted == ["t.scrape@a", "t.scrape@c"]
    got = [(e.line, e.schedule, e.field) for e in report.errors]
    assert got == [
        (2, "t.scrape@b", "period"),
        (4, "t.code", "owner"),
        (5, "t.nope", "task"),
        (6, "t.scrape@a", "period"),
        (8, "?", "row"),
        (9, "?", "task"),
        (10, "t.scrape@d", "name"),
    ]
    assert "first on line 1" in report.errors[3].message
    assert str(report.errors[0]).startswith("line 2: schedule 't.scrape@b', field ")
    assert {s.name for s in sqlite_store.list_schedules()} == {"t.code", "t.scrape@a", "t.scrape@c"}


def test_a_store_failure_applies_nothing(app: Celery, sqlite_store: SqlScheduleStore) -> None:
    class Broken(Exception):
        pass

    class FailingStore(SqlScheduleStore):
        def upsert_runtime_texts(self, specs, now, *, last_modified=None):  # type: ignore[no-untyped-def]
            raise Broken("database went away")

    failing = FailingStore(sqlite_store.url)
    api = RuntimeSchedules(failing)
    with pytest.raises(Broken):
        api.upsert_many([{"name": "t.scrape@a", "period": 60}])
    failing.close()
    assert sqlite_store.list_schedules(include_inactive=True) == []


def test_jsonl_and_csv_round_trip(sqlite_store: SqlScheduleStore) -> None:
    api = RuntimeSchedules(sqlite_store)
    specs = [
        PeriodicSpec(
            task="t.scrape",
            configuration="a",
            scheduling_period=timedelta(hours=1),
            args=("https://a", 3),
            kwargs={"deep": True},
            tz="Europe/Paris",
            blackout_periods=[("01:00", "02:00")],
            pool="io",
            max_expected_duration=timedelta(seconds=30),
        ),
        CronSpec(
            task="t.scrape",
            configuration="b",
            cron_schedule="*/5 * * * *",
            cron_max_schedule_duration=timedelta(minutes=2),
        ),
    ]
    for fmt in ("jsonl", "csv"):
        out = io.StringIO()
        assert write_rows(out, fmt, specs) == 2
        rows = list(read_rows(io.StringIO(out.getvalue()), fmt))
        assert [line for line, _ in rows] == ([1, 2] if fmt == "jsonl" else [2, 3])
        report = api.upsert_lines(rows)
        assert report.ok, report.errors
        assert [sqlite_store.get(s.name).spec for s in specs] == specs
        # The second format writes the same schedules: nothing changes.
        assert report.applied.unchanged == ([] if fmt == "jsonl" else ["t.scrape@a", "t.scrape@b"])


def test_file_errors_name_their_line() -> None:
    jsonl = '{"name": "t.a@1", "period": 60}\n\n# a comment\n{"name": oops}\n[1, 2]\n'
    rows = list(read_rows(io.StringIO(jsonl), "jsonl"))
    assert [line for line, _ in rows] == [1, 4, 5]
    assert rows[0][1] == {"name": "t.a@1", "period": 60}
    assert isinstance(rows[1][1], RowError)
    assert (rows[1][1].line, rows[1][1].field) == (4, "json")
    assert isinstance(rows[2][1], RowError)
    csv_text = (
        "name,period,args,kwargs,tz,configuration\n"
        't.a,60,"[""x"", 1]","{""k"": 2}",UTC,007\n'
        "\n"
        "t.b,90,,,,\n"
        "t.c,1,2,3,4,5,6\n"
    )
    rows = list(read_rows(io.StringIO(csv_text), "csv"))
    assert rows[0] == (
        2,
        {
            "name": "t.a",
            "period": 60,
            "args": ["x", 1],
            "kwargs": {"k": 2},
            "tz": "UTC",
            "configuration": "007",
        },
    )
    assert rows[1] == (4, {"name": "t.b", "period": 90})
    assert isinstance(rows[2][1], RowError)
    assert (rows[2][0], rows[2][1].field) == (5, "csv")


def test_no_cooldown_gets_the_default_a_declaration_gets(
    app: Celery, sqlite_store: SqlScheduleStore
) -> None:
    dgs = DGS(app)
    assert dgs.schedules.upsert("t.scrape@a", period=3600) == "inserted"
    decl = Declarations()
    decl.declare("periodic", "t.scrape", {"configuration": "a", "period": 3600}, source="test")
    fraction = dgs.settings.default_cooldown_fraction
    expected = decl.with_default_cooldown(fraction).specs["t.scrape@a"]
    assert isinstance(expected, PeriodicSpec)
    assert expected.default_cooldown
    assert sqlite_store.get("t.scrape@a").spec == expected
    assert dgs.schedules.upsert("t.scrape@a", period=3600) == "unchanged"
    out = io.StringIO()
    write_rows(out, "jsonl", [expected])
    report = dgs.schedules.upsert_lines(read_rows(io.StringIO(out.getvalue()), "jsonl"))
    assert report.applied.unchanged == ["t.scrape@a"], "an exported row imports unchanged"


def test_a_row_given_again_names_only_the_fields_it_gave(
    app: Celery, sqlite_store: SqlScheduleStore
) -> None:
    """The default cooldown is derived from the period: a second row with
    another period differs in the period alone."""
    report = DGS(app).schedules.upsert_many(
        [
            {"name": "t.scrape@a", "period": 3600},
            {"name": "t.scrape@a", "period": "2h"},
            {"name": "t.scrape@b", "period": 3600},
            {"name": "t.scrape@b", "period": 3600, "cooldown": 60},
        ]
    )
    assert [(e.line, e.field, e.message) for e in report.errors] == [
        (
            2,
            "period",
            "schedule given again with different period (first on line 1, which is applied)",
        ),
        (
            4,
            "cooldown",
            "schedule given again with different cooldown (first on line 3, which is applied)",
        ),
    ]
    assert report.applied.inserted == ["t.scrape@a", "t.scrape@b"]


def test_rows_take_durations_as_text(app: Celery, sqlite_store: SqlScheduleStore) -> None:
    api = DGS(app).schedules
    assert api.upsert("t.scrape@a", period="1h", cooldown="5m") == "inserted"
    spec = sqlite_store.get("t.scrape@a").spec
    assert isinstance(spec, PeriodicSpec)
    assert (spec.scheduling_period, spec.cooldown_duration) == (
        timedelta(hours=1),
        timedelta(minutes=5),
    )
    assert api.upsert("t.scrape@a", period=3600, cooldown=300) == "unchanged"
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.scrape@b", period="soon")
    assert (err.value.field, err.value.message) == (
        "period",
        "'soon' is not a duration: give seconds, or a duration like 90s, 30m, 1h30m, 7d",
    )
