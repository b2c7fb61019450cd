"""The kept columns (start times, condition moments) follow every change that
moves them, in the same write, on every backend; and the status reads count,
filter and page by them."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from sqlalchemy import text

from celery_dgs.core.condition import Level
from celery_dgs.core.kept_condition import ALWAYS, condition_at, kept_times
from celery_dgs.core.laxity import margin_bucket_of
from celery_dgs.core.spec import AdaptiveSpec, PeriodicSpec
from celery_dgs.store import ScheduleStore, SqlScheduleStore
from celery_dgs.store.selection import Selection
from celery_dgs.store.sql_kept import backfill_kept

from .conftest import T0, periodic, start

H = timedelta(hours=1)
M = timedelta(minutes=1)


def assert_kept(store: ScheduleStore, name: str, at: datetime = T0) -> None:
    """The stored kept columns are what the core derives from the stored row
    written ``at``, the margin bucket that of its kept ``error_at -
    should_start_by``."""
    stored = store.get(name)
    want = kept_times(stored.spec, stored.stats, at, declaration_error=stored.declaration_error)
    assert store.kept_times(name) == want
    assert stored.kept_error_at == want.condition.error_at
    assert stored.kept_margin_bucket == margin_bucket_of(
        want.should_start_by, want.condition.error_at
    )


def level(store: ScheduleStore, name: str, at: timedelta) -> tuple[Level, str]:
    return condition_at(store.kept_times(name).condition, T0 + at)


def test_sync_and_declaration_errors_keep_them(store: ScheduleStore) -> None:
    store.sync([periodic("a", hours=1)], T0)
    assert_kept(store, "a")
    assert store.kept_times("a").should_start_by == T0 + H
    assert level(store, "a", H + M) == (Level.ERROR, "never_succeeded")
    store.sync([periodic("a", hours=2)], T0 + M)  # a spec change moves the deadline
    assert_kept(store, "a")
    assert level(store, "a", H + M) == (Level.OK, "ok")
    store.sync([], T0 + 2 * M, invalid={"a": "scheduling_period: bad"})
    assert_kept(store, "a")
    assert level(store, "a", timedelta(0)) == (Level.ERROR, "declaration_invalid")
    store.sync([periodic("a", hours=2)], T0 + 3 * M)
    assert level(store, "a", timedelta(0)) == (Level.OK, "ok")
    assert store.insert_if_missing(periodic("b"), T0)
    assert_kept(store, "b")


def test_runtime_upserts_keep_them(store: ScheduleStore) -> None:
    store.upsert_runtime([periodic("r", "1", hours=1), periodic("r", "2", hours=1)], T0)
    assert_kept(store, "r@1")
    assert store.kept_times("r@1").should_start_by == T0 + H
    store.upsert_runtime([periodic("r", "1", hours=3)], T0 + M)  # updated in bulk
    assert_kept(store, "r@1")
    assert store.kept_times("r@1").should_start_by == T0 + 3 * H
    assert store.kept_times("r@2").should_start_by == T0 + H


def test_a_runtime_update_keeps_them_from_the_stored_runs_and_the_new_spec(
    store: ScheduleStore,
) -> None:
    """An update written in bulk computes them from the row as it will be: the
    stored runs (a failure's retry step, an adaptive schedule's interval) and
    the new spec, with the lister's ``last_modified``."""
    adaptive = AdaptiveSpec(task="ad", configuration="x", interval_unit=H)
    store.upsert_runtime([periodic("r", "1", hours=1), adaptive], T0)
    start(store, "r@1", "r1", token=1, at=T0 + M)
    store.record_run_end(run_id="r1", outcome="failure", ended_at=T0 + 2 * M)
    start(store, "ad@x", "r2", token=1, at=T0 + M)
    store.record_run_end(run_id="r2", outcome="success", ended_at=T0 + 2 * M)
    moved = PeriodicSpec(task="r", configuration="1", scheduling_period=3 * H, pool="slow")
    changed = [moved, dataclasses.replace(adaptive, interval_unit=2 * H)]
    report = store.upsert_runtime(changed, T0 + 3 * M, last_modified={"ad@x": T0 + 2 * M})
    assert sorted(report.updated) == ["ad@x", "r@1"]
    for name in ("r@1", "ad@x"):
        assert_kept(store, name, T0 + 3 * M)
    assert store.kept_times("r@1").next_can_start_at == T0 + 2 * M + 5 * M  # the retry step
    assert store.get("ad@x").stats.upstream_modified_at == T0 + 2 * M
    in_slow = store.status_rows(T0 + 3 * M, Selection(pools=("slow",)))
    assert [s.name for s in in_slow] == ["r@1"]  # its new pool, kept for the filters


def test_runs_retries_and_pauses_keep_them(store: ScheduleStore) -> None:
    slow = PeriodicSpec(task="s", scheduling_period=H, duration_override=50 * M)
    store.sync([slow, periodic("a", hours=1)], T0)
    start(store, "s", "r1", token=1, at=T0 + 20 * M)  # expected to end after its deadline
    assert_kept(store, "s")
    assert store.kept_times("s").condition.warning_at == ALWAYS
    assert level(store, "s", 21 * M) == (Level.WARNING, "likely_late_running")
    store.record_run_end(run_id="r1", outcome="success", ended_at=T0 + 30 * M)
    assert_kept(store, "s")
    assert level(store, "s", 29 * M) == (Level.OK, "ok")  # likely late from 30 min on
    assert level(store, "s", 31 * M) == (Level.WARNING, "likely_late")
    start(store, "a", "r2", token=1, at=T0 + M)
    store.record_run_end(run_id="r2", outcome="failure", ended_at=T0 + 2 * M)
    assert_kept(store, "a")  # the retry step: not before the ladder's first delay
    assert store.kept_times("a").next_can_start_at == T0 + 2 * M + 5 * M
    assert level(store, "a", 3 * M) == (Level.WARNING, "last_run_failed")
    assert store.set_paused("a", True)
    assert_kept(store, "a")
    assert store.set_paused("a", False)
    assert_kept(store, "a")


def test_a_disabled_adaptive_schedule_keeps_them(store: ScheduleStore) -> None:
    spec = AdaptiveSpec(task="ad", interval_unit=H, max_failures=1)
    store.upsert_runtime([spec], T0)
    start(store, "ad", "r1", token=1, at=T0 + M)
    store.record_run_end(run_id="r1", outcome="failure", ended_at=T0 + 2 * M)
    assert store.get("ad").disabled_reason is not None
    assert_kept(store, "ad")
    assert store.set_paused("ad", False)  # resuming enables it
    assert_kept(store, "ad")


@pytest.fixture
def fleet(store: ScheduleStore) -> ScheduleStore:
    """Schedules never run, registered at T0: ``p.*`` every hour, ``q.*`` every
    2 h, ``x%_y`` every 3 h in pool ``slow``."""
    specs = [periodic("p", str(i), hours=1) for i in range(3)]
    specs += [periodic("q", str(i), hours=2) for i in range(2)]
    specs.append(PeriodicSpec(task="x%_y", scheduling_period=3 * H, pool="slow"))
    store.sync(specs, T0)
    return store


def test_counts_are_one_query_by_level_and_reason(fleet: ScheduleStore) -> None:
    assert fleet.condition_counts(T0, Selection()) == {("OK", "ok"): 6}
    at = T0 + H + M
    assert fleet.condition_counts(at, Selection()) == {
        ("ERROR", "never_succeeded"): 3,
        ("OK", "ok"): 3,
    }
    assert fleet.condition_counts(at, Selection(conditions=("error",), patterns=("p@1",))) == {
        ("ERROR", "never_succeeded"): 1
    }
    assert fleet.condition_counts(at, Selection(pools=("slow",))) == {("OK", "ok"): 1}
    assert fleet.condition_counts(at, Selection(pools=("celery",), default_pool="celery")) == {
        ("ERROR", "never_succeeded"): 3,
        ("OK", "ok"): 2,
    }


def test_rows_are_paged_most_urgent_first(fleet: ScheduleStore) -> None:
    at = T0 + H + M

    def names(selection: Selection, **kw: int) -> list[str]:
        return [s.name for s in fleet.status_rows(at, selection, **kw)]

    assert names(Selection()) == ["p@0", "p@1", "p@2", "q@0", "q@1", "x%_y"]
    assert names(Selection(), limit=2) == ["p@0", "p@1"]
    assert names(Selection(), limit=2, offset=4) == ["q@1", "x%_y"]
    assert names(Selection(conditions=("OK",))) == ["q@0", "q@1", "x%_y"]
    assert names(Selection(names=("q@1", "p@2", "zz"))) == ["p@2", "q@1"]
    assert names(Selection(names=())) == []


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("q", ["q@0", "q@1"]),  # a plain word: anywhere in the name
        ("@1", ["p@1", "q@1"]),
        ("p@*", ["p@0", "p@1", "p@2"]),  # a glob: the whole name
        ("?@1", ["p@1", "q@1"]),
        ("p@[!0]", ["p@1", "p@2"]),
        ("[pq]@[02]", ["p@0", "p@2", "q@0"]),
        ("%", ["x%_y"]),  # LIKE's characters are plain ones
        ("x%_*", ["x%_y"]),
        ("x__y", []),
        ("P@*", []),  # case-sensitive
        ("p@[0", []),  # an unclosed class is a plain "["
    ],
)
def test_patterns_are_filtered_in_the_store(
    fleet: ScheduleStore, pattern: str, expected: list[str]
) -> None:
    got = [s.name for s in fleet.status_rows(T0, Selection(patterns=(pattern,)))]
    assert sorted(got) == expected


def test_the_migration_backfills_rows_without_them(sql_store: SqlScheduleStore) -> None:
    sql_store.sync([periodic("a", hours=1), periodic("b", hours=2)], T0)
    want = sql_store.kept_times("a")
    with sql_store.engine.begin() as conn:
        conn.execute(text("UPDATE dgs_schedules SET kept_level = NULL, error_at = NULL"))
        assert backfill_kept(conn, T0) == 2
    assert sql_store.kept_times("a") == want
    assert_kept(sql_store, "b")


def test_the_index_parts_agree_with_the_rule_at_every_moment(store: ScheduleStore) -> None:
    """Each condition counted and paged by its index parts equals the kept rule
    (``condition_at``) applied row by row, and the one-query path of a pattern."""
    specs = [
        PeriodicSpec(task="w", configuration=str(i), scheduling_period=(i + 1) * H)
        for i in range(8)
    ]
    specs.append(PeriodicSpec(task="slow", scheduling_period=H, duration_override=40 * M))
    store.sync(specs, T0)
    for i in range(0, 8, 2):
        start(store, f"w@{i}", f"r{i}", token=1, at=T0 + i * M)
        outcome = "failure" if i % 4 == 0 else "success"
        store.record_run_end(run_id=f"r{i}", outcome=outcome, ended_at=T0 + i * M + M)
    start(store, "slow", "rs", token=1, at=T0 + 30 * M)  # running, expected late
    names = [s.name for s in specs]
    for minutes in (0, 25, 59, 61, 125, 185, 300, 600):
        at = T0 + minutes * M
        want: dict[tuple[str, str], int] = {}
        for name in names:
            level_, reason = condition_at(store.kept_times(name).condition, at)
            want[(level_.name, reason)] = want.get((level_.name, reason), 0) + 1
        assert store.condition_counts(at, Selection()) == want, minutes
        assert store.condition_counts(at, Selection(patterns=("*",))) == want, minutes
        paged = [s.name for s in store.status_rows(at, Selection(), limit=len(names))]
        streamed = [s.name for s in store.status_rows(at, Selection(patterns=("*",)))]
        assert paged == streamed, minutes
        every = [s.name for s in store.status_rows(at, Selection())]  # each part streamed
        assert every == streamed, minutes
        assert [s.name for s in store.status_rows(at, Selection(), limit=3, offset=4)] == (
            streamed[4:7]
        ), minutes
        for level_name in ("ERROR", "WARNING", "OK"):
            only = Selection(conditions=(level_name,))
            got = store.condition_counts(at, only)
            assert got == {k: n for k, n in want.items() if k[0] == level_name}, minutes
            assert [s.name for s in store.status_rows(at, only, limit=20)] == [
                n
                for n in paged
                if condition_at(store.kept_times(n).condition, at)[0].name == level_name
            ]
