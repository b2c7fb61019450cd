"""Adaptive schedules in the store: a run's end moves the interval ladder in
the same transaction as the run record, failures disable, an upsert enables
and carries the lister's ``last_modified``. One contract for the memory,
SQLite and PostgreSQL stores; hand-edited rows on the SQL stores."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from celery_dgs.core.adaptive import fudge_factor, ladder_interval
from celery_dgs.core.spec import AdaptiveSpec
from celery_dgs.store import ScheduleStore, SqlScheduleStore

from .conftest import T0, start

S = timedelta(seconds=1)
NAME = "t.visit@src"


def visit(**kw: object) -> AdaptiveSpec:
    fields: dict[str, object] = {"task": "t.visit", "configuration": "src", "interval_unit": 60}
    fields.update(kw)
    return AdaptiveSpec(**fields)  # type: ignore[arg-type]


def run(
    store: ScheduleStore,
    token: int,
    outcome: str,
    eventful: bool | None = None,
    at: timedelta = timedelta(0),
) -> None:
    begin = T0 + at
    start(store, NAME, f"r{token}", token, begin)
    store.record_run_end(
        run_id=f"r{token}", outcome=outcome, ended_at=begin + 2 * S, eventful=eventful
    )


def test_runs_move_the_ladder_with_the_run_record(store: ScheduleStore) -> None:
    store.upsert_runtime([visit()], T0)
    _, cursor = store.load_active()
    assert store.get(NAME).stats.interval_index is None  # the spec's initial 4
    steps = [(True, 2), (False, 3), (None, 3), (True, 1), (True, 0), (True, 0)]
    for token, (eventful, index) in enumerate(steps, start=1):
        at = timedelta(minutes=10 * token)
        run(store, token, "success", eventful, at)
        row = store.get(NAME)
        assert row.stats.interval_index == index
        want = T0 + at + ladder_interval(index, 60 * S) * fudge_factor(NAME, token)
        assert row.stats.next_target_at == want
        assert store.runs(NAME, limit=1)[0].outcome == "success"
    changed, _ = store.changes_since(cursor)
    assert changed[-1].stats == store.get(NAME).stats  # beat reads the new ladder
    [loaded] = store.load_active()[0]
    assert loaded.stats.interval_index == 0


def test_failures_disable_and_an_upsert_enables_again(store: ScheduleStore) -> None:
    store.upsert_runtime([visit(max_failures=3)], T0)
    run(store, 1, "success", True)
    target = store.get(NAME).stats.next_target_at
    for token in (2, 3, 4):
        assert store.get(NAME).disabled_reason is None
        run(store, token, "failure", at=timedelta(minutes=token))
        row = store.get(NAME)
        assert (row.stats.interval_index, row.stats.next_target_at) == (2, target)
    row = store.get(NAME)
    assert row.disabled_reason is not None
    assert "3 consecutive failures" in row.disabled_reason
    assert NAME in row.disabled_reason
    _, cursor = store.load_active()
    report = store.upsert_runtime([visit(max_failures=3)], T0 + timedelta(hours=1))
    assert report.updated == [NAME], "the same spec, but it enables the schedule"
    row = store.get(NAME)
    assert row.disabled_reason is None
    assert row.stats.failure_count == 3, "the failures stay counted"
    assert [r.name for r in store.changes_since(cursor)[0]] == [NAME]
    assert store.upsert_runtime([visit(max_failures=3)], T0).unchanged == [NAME]
    run(store, 5, "success", None, timedelta(hours=2))
    assert store.get(NAME).stats.failure_count == 0


def test_interruptions_and_fenced_ends_leave_the_ladder(store: ScheduleStore) -> None:
    store.upsert_runtime([visit()], T0)
    run(store, 1, "success", False)
    before = store.get(NAME).stats
    run(store, 2, "cancelled", True, timedelta(minutes=5))
    assert store.get(NAME).stats.interval_index == before.interval_index
    start(store, NAME, "r3", 3, T0 + timedelta(minutes=6))
    start(store, NAME, "r4", 4, T0 + timedelta(minutes=7))
    with pytest.raises(Exception, match="current token"):
        store.record_run_end(
            run_id="r3", outcome="success", ended_at=T0 + timedelta(minutes=8), eventful=True
        )
    assert store.get(NAME).stats.interval_index == before.interval_index


def test_eventful_must_be_a_bool_or_none(store: ScheduleStore) -> None:
    store.upsert_runtime([visit()], T0)
    start(store, NAME, "r1", 1, T0)
    with pytest.raises(ValueError, match="eventful"):
        store.record_run_end(run_id="r1", outcome="success", ended_at=T0, eventful="yes")  # type: ignore[arg-type]
    assert store.runs(NAME)[0].outcome == "running", "nothing recorded"


def test_last_modified_is_stored_kept_and_compared(store: ScheduleStore) -> None:
    hint = T0 - timedelta(days=3)
    report = store.upsert_runtime([visit()], T0, last_modified={NAME: hint})
    assert report.inserted == [NAME]
    assert store.get(NAME).stats.upstream_modified_at == hint
    assert store.upsert_runtime([visit()], T0, last_modified={NAME: hint}).unchanged == [NAME]
    assert store.upsert_runtime([visit()], T0).unchanged == [NAME], "no hint: kept"
    assert store.get(NAME).stats.upstream_modified_at == hint
    newer = T0 - timedelta(hours=1)
    assert store.upsert_runtime([visit()], T0, last_modified={NAME: newer}).updated == [NAME]
    assert store.get(NAME).stats.upstream_modified_at == newer
    run(store, 1, "success", True, timedelta(minutes=1))
    assert store.get(NAME).stats.upstream_modified_at == newer, "a run keeps it"


def test_a_malformed_interval_index_names_the_schedule_and_field(
    sql_store: SqlScheduleStore,
) -> None:
    sql_store.upsert_runtime([visit()], T0)
    with sql_store.engine.begin() as conn:
        conn.execute(
            text("UPDATE dgs_schedules SET interval_index = 42 WHERE name = :n"), {"n": NAME}
        )
    for row in (sql_store.get(NAME), sql_store.load_active()[0][0]):
        assert row.spec is None, "beat cannot schedule it"
        assert row.spec_error is not None
        assert row.spec_error.startswith("interval_index:")
        assert "42" in row.spec_error
    run(sql_store, 1, "success", False)  # recording a run repairs it
    row = sql_store.get(NAME)
    assert row.spec_error is None
    assert row.stats.interval_index == 5  # read as unknown (the initial 4), then +1


def test_resume_enables_a_disabled_schedule(store: ScheduleStore) -> None:
    store.upsert_runtime([visit(max_failures=1)], T0)
    run(store, 1, "failure")
    assert store.get(NAME).disabled_reason is not None
    assert store.set_paused(NAME, True) is True
    assert store.get(NAME).disabled_reason is not None, "pausing leaves it disabled"
    _, cursor = store.load_active()
    assert store.set_paused(NAME, False) is True
    row = store.get(NAME)
    assert (row.paused, row.disabled_reason) == (False, None)
    assert [r.name for r in store.changes_since(cursor)[0]] == [NAME]
    assert store.set_paused(NAME, False) is False, "nothing left to change"


def test_run_ends_and_lister_upserts_racing_lose_no_update(store: ScheduleStore) -> None:
    """A worker recording runs and a lister upserting hints at the same time:
    every run's ladder step and the last hint are kept (the run end's write of
    the row and the upsert's are serialised on the row's lock)."""
    import threading

    store.upsert_runtime([visit()], T0)
    rounds = 20
    hints = [T0 - timedelta(days=30) + timedelta(hours=i) for i in range(rounds)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker() -> None:
        barrier.wait(timeout=30)
        for token in range(1, rounds + 1):  # uneventful: +1 each, clamped at 10
            run(store, token, "success", False, timedelta(minutes=token))

    def lister() -> None:
        barrier.wait(timeout=30)
        for hint in hints:
            store.upsert_runtime([visit()], T0, last_modified={NAME: hint})

    def guarded(job: object) -> None:
        try:
            job()  # type: ignore[operator]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(job,)) for job in (worker, lister)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    row = store.get(NAME)
    assert row.stats.interval_index == 10
    assert row.stats.upstream_modified_at == hints[-1]
    assert len(store.runs(NAME, limit=100)) == rounds, "no run record lost"
    assert row.stats.next_target_at == T0 + timedelta(minutes=rounds) + ladder_interval(
        10, 60 * S
    ) * fudge_factor(NAME, rounds)
