"""A worker runs a runtime schedule (in no declaration) with its stored spec,
supervised; a dispatch that arrives after its schedule was removed is skipped
and recorded, and the task body does not run. On real Redis and SQLite, with
the task wrapped as at worker start-up."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from celery_dgs.dgs import get_dgs
from celery_dgs.runtime import runtime_for
from celery_dgs.worker.hooks import wrap_scheduled_tasks
from celery_dgs.worker.runtime_specs import stored_spec
from tests.cli.conftest import make_app


@pytest.fixture
def app(sqlite_url: str, redis_url: str) -> Iterator[Celery]:
    app = make_app(sqlite_url, redis_url)
    yield app
    runtime_for(app, get_dgs(app).settings).close()
    app.close()


def test_runtime_schedule_runs_supervised_and_a_removed_one_is_skipped(app: Celery) -> None:
    calls: list[tuple[Any, ...]] = []

    def scrape(source: str, depth: int = 0) -> str:
        calls.append((source, depth))
        return source

    task = app.task(name="t.scrape", shared=False)(scrape)
    dgs = get_dgs(app)
    assert "t.scrape" in wrap_scheduled_tasks(app, dgs), "an undeclared task is wrapped too"
    store = runtime_for(app, dgs.settings).store
    dgs.schedules.upsert("t.scrape@a", period=3600, args=["a"], kwargs={"depth": 2})

    def dispatch(schedule: str | None) -> Any:
        task.push_request(
            dgs_schedule=schedule, hostname="w1@node1", called_directly=False, dgs_dispatch_id=None
        )
        try:
            return task.run("a", depth=2)
        finally:
            task.pop_request()

    assert dispatch("t.scrape@a") == "a"
    [run] = store.runs("t.scrape@a")
    assert (run.outcome, run.token, run.owner_name) == ("success", 1, "w1@node1")
    stored, why = stored_spec(runtime_for(app, dgs.settings), "t.scrape@a")
    assert why is None
    assert stored is not None
    assert (stored.spec, stored.token_floor) == (store.get("t.scrape@a").spec, 1)

    assert dgs.schedules.remove("t.scrape@a")
    assert dispatch("t.scrape@a") is None
    assert calls == [("a", 2)], "the removed schedule's body did not run"
    skipped, _ = store.runs("t.scrape@a")
    assert (skipped.outcome, skipped.error) == ("skipped", "schedule removed")

    # A plain call (no dispatch) of a task with no declaration runs as before,
    # and touches no store row.
    assert dispatch(None) == "a"
    assert len(store.runs("t.scrape@a")) == 2
    assert stored_spec(runtime_for(app, dgs.settings), "t.nothing") == (None, None)


def test_a_runtime_run_takes_its_token_floor_from_the_row_it_read(app: Celery) -> None:
    """The row read for the spec gives the lease its durable floor (the
    schedule's stored token): the store is not read again for it."""

    def scrape(source: str) -> str:
        return source

    task = app.task(name="t.scrape", shared=False)(scrape)
    dgs = get_dgs(app)
    wrap_scheduled_tasks(app, dgs)
    rt = runtime_for(app, dgs.settings)
    dgs.schedules.upsert("t.scrape@a", period=3600, args=["a"])
    floors_read: list[str] = []
    floors_asked: list[int | None] = []
    read_floor, acquire = rt.store.token_floor, rt.leases.acquire

    def counted(schedule: str) -> int:
        floors_read.append(schedule)
        return read_floor(schedule)

    def asked(schedule: str, **kwargs: Any) -> Any:
        floors_asked.append(kwargs.get("min_token"))
        return acquire(schedule, **kwargs)

    rt.store.token_floor = counted  # type: ignore[method-assign]
    rt.leases.acquire = asked  # type: ignore[method-assign]

    def dispatch() -> Any:
        task.push_request(dgs_schedule="t.scrape@a", hostname="w1@node1", called_directly=False)
        try:
            return task.run("a")
        finally:
            task.pop_request()

    assert dispatch() == "a"
    assert dispatch() == "a"
    assert [r.token for r in rt.store.runs("t.scrape@a")] == [2, 1]
    assert floors_asked == [0, 1]
    assert floors_read == []


def test_a_schedule_beat_declares_and_the_worker_does_not_runs_as_beat_stored_it(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    """Beat's code declares ``t.scrape@b`` (synced into the store), this
    worker's does not: beat's dispatch runs it supervised with the stored spec,
    saying so once; once beat no longer declares it, a late dispatch is skipped."""
    from datetime import datetime, timedelta, timezone

    from celery_dgs.core.spec_build import make_spec

    calls: list[str] = []

    def scrape(source: str) -> str:
        calls.append(source)
        return source

    task = app.task(name="t.scrape", shared=False)(scrape)
    dgs = get_dgs(app)
    wrap_scheduled_tasks(app, dgs)
    store = runtime_for(app, dgs.settings).store
    declared = make_spec(
        "periodic",
        task="t.scrape",
        configuration="b",
        scheduling_period=timedelta(hours=1),
        args=["b"],
    )
    store.sync([declared], datetime.now(timezone.utc))

    def dispatch() -> Any:
        task.push_request(
            dgs_schedule="t.scrape@b",
            hostname="w1@node1",
            called_directly=False,
            dgs_dispatch_id=None,
        )
        try:
            return task.run("b")
        finally:
            task.pop_request()

    with caplog.at_level("WARNING", logger="celery_dgs.worker"):
        assert dispatch() == "b"
        assert dispatch() == "b"
    said = [r.getMessage() for r in caplog.records if "does not declare" in r.getMessage()]
    assert len(said) == 1, said
    assert "'t.scrape@b'" in said[0]
    assert "spec beat stored" in said[0]
    assert [(r.outcome, r.token) for r in store.runs("t.scrape@b")] == [
        ("success", 2),
        ("success", 1),
    ]

    store.sync([], datetime.now(timezone.utc))  # beat's next code no longer declares it
    assert dispatch() is None
    assert calls == ["b", "b"]
    assert (store.runs("t.scrape@b")[0].outcome, store.runs("t.scrape@b")[0].error) == (
        "skipped",
        "schedule no longer declared",
    )
