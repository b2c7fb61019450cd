"""A schedule's and a deferred check's ``args``/``kwargs`` are held where they
enter: at most ``dgs_max_argument_bytes`` of JSON, and bound to the task's
signature when the task is registered. On a real SQLite store and the real
Redis-compatible server, through the API, the CLI and declarations."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import Celery

from celery_dgs.dgs import DGS, get_dgs
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.settings import DgsSettings
from celery_dgs.store import SqlScheduleStore
from celery_dgs.task_arguments import unknown_task
from tests.cli.conftest import make_app

BLOB = "x" * (10 * 1024 * 1024)  # the 10 MB value of the report


def scrape(url: str, depth: int = 1) -> None:
    """A task with a signature: one URL, an optional depth."""


def check_order(order_id: int) -> None:
    """A deferred check's task."""


def register(app: Celery) -> DGS:
    dgs = get_dgs(app)
    app.task(name="t.scrape", shared=False)(scrape)
    dgs.deferred()(app.task(name="t.check_order", shared=False)(check_order))
    return dgs


@pytest.fixture
def app(sqlite_url: str, redis_url: str) -> Iterator[Celery]:
    app = make_app(sqlite_url, redis_url)
    register(app)
    yield app
    app.close()


@pytest.fixture
def store(sqlite_url: str) -> Iterator[SqlScheduleStore]:
    store = SqlScheduleStore.open(sqlite_url)
    yield store
    store.close()


def test_the_limit_is_a_setting_of_64_kib_by_default() -> None:
    assert DgsSettings().max_argument_bytes == 64 * 1024
    assert DgsSettings.from_conf({"dgs_max_argument_bytes": None}).max_argument_bytes is None
    with pytest.raises(ValueError, match="dgs_max_argument_bytes must be a positive integer"):
        DgsSettings.from_conf({"dgs_max_argument_bytes": 0})


def test_upsert_refuses_large_arguments_and_applies_the_good_rows(
    app: Celery, store: SqlScheduleStore
) -> None:
    api = get_dgs(app).schedules
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.scrape@big", period=3600, args=["https://a"], kwargs={"depth": BLOB})
    assert (err.value.schedule, err.value.field) == ("t.scrape@big", "kwargs")
    assert "more than the 65536 allowed (dgs_max_argument_bytes)" in err.value.message
    report = api.upsert_many(
        [
            {"name": "t.scrape@a", "period": 3600, "args": ["https://a"]},
            {"name": "t.scrape@b", "period": 3600, "args": [BLOB]},
        ]
    )
    assert [(e.line, e.field) for e in report.errors] == [(2, "args")]
    assert report.applied.inserted == ["t.scrape@a"]
    assert [s.name for s in store.list_schedules()] == ["t.scrape@a"]


def test_upsert_binds_the_arguments_to_the_task(app: Celery, store: SqlScheduleStore) -> None:
    api = get_dgs(app).schedules
    with pytest.raises(ScheduleConfigError) as err:
        api.upsert("t.scrape@a", period=3600, args=["https://a"], kwargs={"blob": 1})
    assert (err.value.schedule, err.value.field) == ("t.scrape@a", "kwargs")
    assert err.value.message == (
        "task 't.scrape' cannot take these arguments: got an unexpected keyword argument "
        "'blob' (its signature: (url, depth=1))"
    )
    with pytest.raises(ScheduleConfigError) as missing:
        api.upsert("t.scrape@a", period=3600)
    assert missing.value.field == "args"
    assert "missing a required argument: 'url'" in missing.value.message
    assert api.upsert("t.scrape@a", period=3600, args=["https://a"], kwargs={"depth": 2}) == (
        "inserted"
    )
    assert store.list_schedules(include_inactive=True)[0].name == "t.scrape@a"


def test_declarations_are_held_to_the_signature_and_the_limit(
    sqlite_url: str, redis_url: str
) -> None:
    app = make_app(sqlite_url, redis_url)
    app.conf.dgs_max_argument_bytes = 100
    dgs = register(app)
    dgs.periodic(3600, configuration="ok", args=["https://a"])(app.tasks["t.scrape"])
    dgs.periodic(3600, configuration="blob", args=["https://a"], kwargs={"blob": 1})(
        app.tasks["t.scrape"]
    )
    app.conf.dgs_schedules = {"t.scrape@big": {"period": "1h", "args": ["x" * 200]}}
    decl = dgs.all_declarations(import_modules=False)
    assert sorted(decl.specs) == ["t.scrape@ok"]
    assert {n: e.field for n, e in decl.errors.items()} == {
        "t.scrape@blob": "kwargs",
        "t.scrape@big": "args",
    }
    assert "unexpected keyword argument 'blob'" in str(decl.errors["t.scrape@blob"])
    assert "more than the 100 allowed" in str(decl.errors["t.scrape@big"])
    app.close()


def test_check_at_holds_arguments_and_names_a_missing_task(
    app: Celery, store: SqlScheduleStore
) -> None:
    dgs = get_dgs(app)
    with pytest.raises(ScheduleConfigError) as big:
        dgs.check_at("t.check_order", 1, after=60, kwargs={"order_id": BLOB})
    assert (big.value.schedule, big.value.field) == ("t.check_order@check:1", "kwargs")
    with pytest.raises(ScheduleConfigError) as unknown:
        dgs.check_at("t.check_order", 1, after=60, kwargs={"order": 1})
    assert "unexpected keyword argument 'order'" in unknown.value.message
    with pytest.raises(ScheduleConfigError) as nope:
        dgs.check_at("t.check_ordr", 1, after=60)
    assert str(nope.value) == (
        "schedule 't.check_ordr', field 'task': no such task 't.check_ordr' is registered; "
        "did you mean 't.check_order'?"
    )
    with pytest.raises(ScheduleConfigError, match="is not declared as a deferred check"):
        dgs.check_at("t.scrape", 1, after=60)
    assert store.pending_checks() == []
    assert dgs.check_at("t.check_order", 1, after=60, kwargs={"order_id": 1}) == "added"


def test_at_many_reports_every_bad_item_and_adds_the_good_ones(
    app: Celery, store: SqlScheduleStore
) -> None:
    items: list[dict[str, Any]] = [
        {"task": "t.check_order", "key": "a", "after": 60, "args": [1]},
        {"task": "t.check_order", "key": "b", "after": -5, "args": [2]},
        {"task": "t.nope", "key": "c", "after": 60},
        {"task": "t.check_order", "key": "d", "after": 60, "args": [BLOB]},
        {"task": "t.check_order", "key": "e", "at": None, "after": timedelta(minutes=5)},
        {"task": "t.check_order", "key": "f", "after": 60, "args": [6]},
    ]
    report = get_dgs(app).checks.at_many(items)
    assert [(e.line, e.schedule, e.field) for e in report.errors] == [
        (2, "t.check_order@check:b", "after"),
        (3, "t.nope", "task"),
        (4, "t.check_order@check:d", "args"),
        (5, "t.check_order@check:e", "args"),  # order_id is required
    ]
    assert "got -5s" in report.errors[0].message
    assert not report.ok
    assert report.added == ["t.check_order@check:a", "t.check_order@check:f"]
    assert sorted(c.name for c in store.pending_checks()) == report.added


def test_an_unknown_task_is_likened_only_to_a_task_whose_own_name_is_alike() -> None:
    """The module prefix the names share ('proj.') does not make a suggestion."""
    known = ["proj.slow", "proj.fetch", "celery.backend_cleanup"]
    assert unknown_task("proj.nope", known) == "unknown task 'proj.nope'"
    assert unknown_task("proj.fetchh", known) == (
        "unknown task 'proj.fetchh'; did you mean 'proj.fetch'?"
    )
    assert (
        unknown_task("prj.fetch", known) == "unknown task 'prj.fetch'; did you mean 'proj.fetch'?"
    )
