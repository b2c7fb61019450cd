"""Runtime schedules in the store: the API owns them, ``sync`` never touches
them, an unchanged upsert writes nothing, a removal reaches beat's change poll
and keeps the history. One contract for the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.store import OWNER_DECLARED, OWNER_RUNTIME, ScheduleStore, SqlScheduleStore

from .conftest import T0, cron, periodic, start

LATER = T0 + timedelta(hours=1)


def scraper(source: str, hours: float = 24, url: str = "") -> PeriodicSpec:
    return PeriodicSpec(
        task="t.scrape",
        configuration=source,
        scheduling_period=timedelta(hours=hours),
        args=(url or f"https://{source}.example",),
        kwargs={"depth": 2},
    )


def test_upsert_inserts_runtime_rows_that_beat_sees(store: ScheduleStore) -> None:
    _, cursor = store.load_active()
    report = store.upsert_runtime([scraper("a"), scraper("b")], T0)
    assert (report.inserted, report.updated, report.unchanged) == (
        ["t.scrape@a", "t.scrape@b"],
        [],
        [],
    )
    row = store.get("t.scrape@a")
    assert row.owner == OWNER_RUNTIME
    assert row.spec == scraper("a")
    assert row.spec is not None
    assert row.spec.args == ("https://a.example",)
    assert row.spec.kwargs == {"depth": 2}
    assert (row.active, row.paused, row.stats.registered_at) == (True, False, T0)
    changed, cursor = store.changes_since(cursor)
    assert [r.name for r in changed] == ["t.scrape@a", "t.scrape@b"]
    assert len({r.change_seq for r in changed}) == 1, "one change_seq for the batch"
    assert [r.name for r in store.load_active()[0]] == ["t.scrape@a", "t.scrape@b"]


def test_an_unchanged_upsert_writes_nothing(store: ScheduleStore) -> None:
    store.upsert_runtime([scraper("a"), scraper("b")], T0)
    _, cursor = store.load_active()
    before = store.get("t.scrape@a")
    report = store.upsert_runtime([scraper("a"), scraper("b")], LATER)
    assert report.unchanged == ["t.scrape@a", "t.scrape@b"]
    assert not report.changed
    assert store.get("t.scrape@a") == before, "not even updated_at moved"
    assert store.changes_since(cursor)[0] == [], "beat re-reads nothing"
    # One changed row in a batch: only that one is written.
    report = store.upsert_runtime([scraper("a"), scraper("b", url="https://new")], LATER)
    assert (report.unchanged, report.updated) == (["t.scrape@a"], ["t.scrape@b"])
    changed, _ = store.changes_since(cursor)
    assert [r.name for r in changed] == ["t.scrape@b"]
    assert changed[0].spec is not None
    assert changed[0].spec.args == ("https://new",)
    assert changed[0].updated_at == LATER


def test_upsert_keeps_statistics_pause_and_history(store: ScheduleStore) -> None:
    store.upsert_runtime([scraper("a")], T0)
    start(store, "t.scrape@a", "r1", token=1)
    store.record_run_end(run_id="r1", outcome="success", ended_at=T0 + timedelta(seconds=30))
    store.set_paused("t.scrape@a", True)
    store.upsert_runtime([scraper("a", hours=2)], LATER)
    row = store.get("t.scrape@a")
    assert row.spec == scraper("a", hours=2)
    assert row.paused
    assert row.stats.average_good_duration == timedelta(seconds=30)
    assert [r.run_id for r in store.runs("t.scrape@a")] == ["r1"]


def test_remove_deactivates_keeps_history_and_reaches_the_poll(store: ScheduleStore) -> None:
    store.upsert_runtime([scraper("a"), scraper("b")], T0)
    start(store, "t.scrape@a", "live", token=1)
    _, cursor = store.load_active()
    report = store.remove_runtime(["t.scrape@a", "t.scrape@zzz"], LATER)
    assert (report.removed, report.absent, report.refused) == (["t.scrape@a"], ["t.scrape@zzz"], [])
    changed, cursor = store.changes_since(cursor)
    assert [(r.name, r.active) for r in changed] == [("t.scrape@a", False)]
    assert [r.name for r in store.load_active()[0]] == ["t.scrape@b"]
    # The live run ends as usual and its record stays.
    ended = store.record_run_end(run_id="live", outcome="success", ended_at=LATER)
    assert not ended.active
    assert [(r.run_id, r.outcome) for r in store.runs("t.scrape@a")] == [("live", "success")]
    # Removing again writes nothing.
    _, cursor = store.load_active()
    assert store.remove_runtime(["t.scrape@a"], LATER).absent == ["t.scrape@a"]
    assert store.changes_since(cursor)[0] == []
    # An upsert brings it back, statistics kept.
    report2 = store.upsert_runtime([scraper("a")], LATER)
    assert report2.reactivated == ["t.scrape@a"]
    back = store.get("t.scrape@a")
    assert back.active
    assert back.stats.last_good_end_at == LATER


def test_the_api_never_changes_a_declared_schedule(store: ScheduleStore) -> None:
    declared = periodic("t.scrape", "a")
    store.sync([declared, cron("t.c")], T0)
    before = store.get("t.scrape@a")
    report = store.upsert_runtime([scraper("a"), scraper("b")], LATER)
    assert (report.refused, report.inserted) == (["t.scrape@a"], ["t.scrape@b"])
    assert store.get("t.scrape@a") == before
    removal = store.remove_runtime(["t.c", "t.scrape@b"], LATER)
    assert (removal.refused, removal.removed) == (["t.c"], ["t.scrape@b"])
    assert store.get("t.c").active
    assert store.get("t.scrape@a").owner == OWNER_DECLARED


def test_sync_never_deactivates_or_changes_a_runtime_schedule(store: ScheduleStore) -> None:
    store.sync([periodic("t.code")], T0)
    store.upsert_runtime([scraper("a"), scraper("b")], T0)
    runtime_rows = {n: store.get(n) for n in ("t.scrape@a", "t.scrape@b")}
    # Code declares t.scrape@a too (different fields), and nothing else runtime.
    report = store.sync([periodic("t.code"), periodic("t.scrape", "a", hours=1)], LATER)
    assert report.refused == ["t.scrape@a"]
    assert (report.deactivated, report.updated, report.inserted) == ([], [], [])
    assert {n: store.get(n) for n in runtime_rows} == runtime_rows
    # Nothing declared at all: only the declared schedule goes.
    report = store.sync([], LATER, invalid={"t.scrape@b": "field 'tz': bad"})
    assert report.deactivated == ["t.code"]
    assert report.invalid == []
    assert {n: store.get(n) for n in runtime_rows} == runtime_rows


def test_a_removed_runtime_schedule_can_be_declared_and_back(store: ScheduleStore) -> None:
    store.upsert_runtime([scraper("a")], T0)
    store.remove_runtime(["t.scrape@a"], T0)
    report = store.sync([periodic("t.scrape", "a")], LATER)
    assert report.reactivated == ["t.scrape@a"]
    row = store.get("t.scrape@a")
    assert (row.owner, row.active, row.spec) == (OWNER_DECLARED, True, periodic("t.scrape", "a"))
    store.sync([], LATER)  # no longer declared: deactivated, and the API may take it
    assert store.upsert_runtime([scraper("a")], LATER).reactivated == ["t.scrape@a"]
    assert store.get("t.scrape@a").owner == OWNER_RUNTIME


def test_list_by_owner(store: ScheduleStore) -> None:
    store.sync([periodic("t.code")], T0)
    store.upsert_runtime([scraper("a"), scraper("b")], T0)
    store.remove_runtime(["t.scrape@b"], T0)
    assert [s.name for s in store.list_schedules(owner=OWNER_RUNTIME)] == ["t.scrape@a"]
    assert [s.name for s in store.list_schedules(True, owner=OWNER_RUNTIME)] == [
        "t.scrape@a",
        "t.scrape@b",
    ]
    assert [s.name for s in store.list_schedules(owner=OWNER_DECLARED)] == ["t.code"]
    assert len(store.list_schedules()) == 2


def test_a_name_twice_with_different_fields_writes_nothing(store: ScheduleStore) -> None:
    with pytest.raises(ScheduleConfigError) as err:
        store.upsert_runtime([scraper("a"), scraper("a", hours=1)], T0)
    assert err.value.schedule == "t.scrape@a"
    assert err.value.field == "scheduling_period"
    assert store.list_schedules(include_inactive=True) == []
    assert store.upsert_runtime([scraper("a"), scraper("a")], T0).inserted == ["t.scrape@a"]


def test_bulk_upsert_and_remove_of_thousands(store: ScheduleStore) -> None:
    specs = [scraper(f"s{i:05d}") for i in range(3000)]
    _, cursor = store.load_active()
    assert len(store.upsert_runtime(specs, T0).inserted) == 3000
    assert len(store.changes_since(cursor)[0]) == 3000
    _, cursor = store.load_active()
    assert len(store.upsert_runtime(specs, LATER).unchanged) == 3000
    assert store.changes_since(cursor)[0] == []
    report = store.remove_runtime([s.name for s in specs[:2000]], LATER)
    assert len(report.removed) == 2000
    assert len(store.load_active()[0]) == 1000


def test_concurrent_upserts_removals_and_syncs_never_interleave(
    sql_store: SqlScheduleStore,
) -> None:
    """Listers, a remover and deploys at once (SQLite's one writer, PostgreSQL's
    advisory lock): every call succeeds, no declared row becomes runtime or
    the reverse, and every change reaches the change poll."""
    declared = [periodic("t.code", f"c{i}") for i in range(20)]
    sql_store.sync(declared, T0)
    _, cursor = sql_store.load_active()
    barrier = threading.Barrier(6)

    def lister(offset: int) -> None:
        barrier.wait(timeout=30)
        for round_ in range(3):
            batch = [scraper(f"s{i}", hours=1 + round_) for i in range(offset, offset + 40)]
            sql_store.upsert_runtime([*batch, periodic("t.code", "c0")], LATER)

    def remover() -> None:
        barrier.wait(timeout=30)
        for i in range(0, 80, 7):
            sql_store.remove_runtime([f"t.scrape@s{i}", "t.code@c1"], LATER)

    def deploy() -> None:
        barrier.wait(timeout=30)
        for _ in range(3):
            report = sql_store.sync(declared, LATER)
            assert report.deactivated == []

    with ThreadPoolExecutor(6) as pool:
        futures = [
            pool.submit(lister, 0),
            pool.submit(lister, 20),
            pool.submit(lister, 40),
            pool.submit(remover),
            pool.submit(deploy),
            pool.submit(deploy),
        ]
        for future in futures:
            future.result(timeout=120)
    rows = {s.name: s for s in sql_store.list_schedules(include_inactive=True)}
    assert {n for n, s in rows.items() if s.owner == OWNER_DECLARED} == {s.name for s in declared}
    assert all(rows[s.name].active for s in declared)
    assert {n for n, s in rows.items() if s.owner == OWNER_RUNTIME} == {
        f"t.scrape@s{i}" for i in range(80)
    }
    changed, _ = sql_store.changes_since(cursor)
    assert {r.name for r in changed} == {f"t.scrape@s{i}" for i in range(80)}
    assert {r.name: r for r in changed} == {n: rows[n] for n in rows if n.startswith("t.scrape")}
