"""Schedules: sync, reads, the change cursor, operator flags, malformed stored specs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.errors import ScheduleConfigError, UnknownScheduleError
from celery_dgs.store import ScheduleStore, SqlScheduleStore

from .conftest import T0, cron, periodic, start


def test_sync_inserts_updates_deactivates_and_reactivates_keeping_stats(
    store: ScheduleStore,
) -> None:
    report = store.sync([periodic("a"), periodic("b"), cron("c")], T0)
    assert (report.inserted, report.updated, report.unchanged) == (["a", "b", "c"], [], [])
    a = store.get("a")
    assert a.stats.registered_at == T0
    assert a.active
    assert not a.paused
    assert a.spec is not None
    start(store, "a", "r1", token=1)
    store.record_run_end(run_id="r1", outcome="success", ended_at=T0 + timedelta(seconds=10))
    stats = store.get("a").stats

    later = T0 + timedelta(days=1)
    report = store.sync([periodic("a", hours=12), cron("c")], later)
    assert report.updated == ["a"]
    assert report.deactivated == ["b"]
    assert report.unchanged == ["c"]
    assert not report.inserted
    assert not report.reactivated
    a = store.get("a")
    assert a.stats == stats  # statistics are never reset
    assert a.spec is not None
    assert a.spec.to_dict()["scheduling_period"] == 12 * 3600
    assert not store.get("b").active
    assert [s.name for s in store.list_schedules()] == ["a", "c"]
    assert [s.name for s in store.list_schedules(include_inactive=True)] == ["a", "b", "c"]

    report = store.sync([periodic("a"), periodic("b"), cron("c")], later + timedelta(days=1))
    assert report.reactivated == ["b"]
    assert report.updated == ["a"]
    assert report.unchanged == ["c"]
    assert not report.deactivated
    assert store.get("a").stats == stats
    assert store.get("b").stats.registered_at == T0  # the first registration is kept
    assert [r.run_id for r in store.runs("a")] == ["r1"]  # history kept through it all


def test_sync_without_changes_bumps_nothing(store: ScheduleStore) -> None:
    store.sync([periodic("a")], T0)
    _, cursor = store.load_active()
    report = store.sync([periodic("a")], T0 + timedelta(hours=1))
    assert report.unchanged == ["a"]
    assert not report.changed
    assert store.changes_since(cursor) == ([], cursor)


def test_sync_refuses_a_name_declared_twice(store: ScheduleStore) -> None:
    with pytest.raises(ScheduleConfigError, match="'a@x'"):
        store.sync([periodic("a", configuration="x"), periodic("a", "x", hours=12)], T0)
    assert store.list_schedules(include_inactive=True) == []


def test_changes_since_returns_exactly_the_changed_rows(store: ScheduleStore) -> None:
    store.sync([periodic("a"), periodic("b"), periodic("c")], T0)
    rows, cursor = store.load_active()
    assert [r.name for r in rows] == ["a", "b", "c"]
    assert store.changes_since(cursor) == ([], cursor)

    assert store.set_paused("b", True) is True
    assert store.set_paused("b", True) is False  # no change, no bump
    changed, cursor2 = store.changes_since(cursor)
    assert [r.name for r in changed] == ["b"]
    assert changed[0].paused
    assert cursor2 > cursor

    start(store, "c", "r1", token=7)
    store.sync([periodic("a"), periodic("b")], T0)  # c deactivated: still reported
    changed, cursor3 = store.changes_since(cursor2)
    assert [r.name for r in changed] == ["c"]
    assert not changed[0].active
    assert changed[0].current_token == 7
    assert store.changes_since(cursor3) == ([], cursor3)
    assert [r.name for r in store.changes_since(0)[0]] == ["a", "b", "c"]  # 'a' from the insert
    # a cursor from another (replaced) database: everything, and the real cursor
    assert store.changes_since(cursor3 + 1000) == store.changes_since(0)
    assert store.changes_since(0)[1] == cursor3


def test_get_and_unknown_names(store: ScheduleStore) -> None:
    store.sync([periodic("a", configuration="eu")], T0)
    got = store.get("a@eu")
    assert (got.task, got.configuration, got.kind) == ("a", "eu", "periodic")
    with pytest.raises(UnknownScheduleError, match="'nope'"):
        store.get("nope")
    for call in (
        lambda: store.set_paused("nope", True),
        lambda: store.request_run("nope", T0),
        lambda: store.runs("nope"),
        lambda: start(store, "nope", "r1", token=1),
    ):
        with pytest.raises(UnknownScheduleError, match="'nope'"):
            call()


def test_run_requests(store: ScheduleStore) -> None:
    store.sync([periodic("a")], T0)
    store.request_run("a", T0)
    store.request_run("a", T0 + timedelta(minutes=1))  # the pending request keeps its time
    assert store.get("a").run_requested_at == T0
    seq = store.get("a").change_seq
    store.clear_run_request("a", requested_at=T0 - timedelta(seconds=1))  # not that request
    assert store.get("a").run_requested_at == T0
    assert store.get("a").change_seq == seq
    store.clear_run_request("a", requested_at=T0)
    assert store.get("a").run_requested_at is None
    assert store.get("a").change_seq > seq
    store.request_run("a", T0)
    store.clear_run_request("a")
    assert store.get("a").run_requested_at is None


def test_datetimes_come_back_aware_utc_and_naive_ones_are_refused(
    store: ScheduleStore,
) -> None:
    plus2 = timezone(timedelta(hours=2))
    store.sync([periodic("a")], T0.astimezone(plus2))
    got = store.get("a")
    assert got.stats.registered_at == T0
    assert got.stats.registered_at.tzinfo == timezone.utc
    assert got.updated_at.tzinfo == timezone.utc
    with pytest.raises(ValueError, match="naive"):
        store.request_run("a", datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("stored", "error"),
    [
        ("{not json", "JSONDecodeError"),
        ("[1, 2]", "expected a JSON object"),
        ('{"kind": "periodic", "task": "a", "scheduling_period": -5}', "scheduling_period"),
        ('{"kind": "weekly", "task": "a"}', "kind"),
        ('{"format": 99, "kind": "periodic", "task": "a"}', "format"),
    ],
)
def test_a_malformed_stored_spec_does_not_crash_readers(
    sql_store: SqlScheduleStore, stored: str, error: str
) -> None:
    store = sql_store
    store.sync([periodic("a"), periodic("b")], T0)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE dgs_schedules SET spec = :s WHERE name = 'a'"), {"s": stored})
    bad = store.get("a")
    assert bad.spec is None
    assert bad.spec_error is not None
    assert error in bad.spec_error
    rows, _ = store.load_active()
    assert [(r.name, r.spec is None) for r in rows] == [("a", True), ("b", False)]
    assert store.sync([periodic("a"), periodic("b")], T0).updated == ["a"]  # redeclared: fixed
    assert store.get("a").spec == periodic("a")


def test_iter_active_is_load_active(store: ScheduleStore) -> None:
    store.sync([periodic("b"), periodic("a"), periodic("c")], T0)
    store.sync([periodic("b"), periodic("a")], T0)
    cursor, rows = store.iter_active()
    assert (list(rows), cursor) == store.load_active()
    assert [r.name for r in store.load_active()[0]] == ["a", "b"]


def test_a_spec_reads_back_as_stored_json(store: ScheduleStore) -> None:
    """Specs come back as the store's JSON gives them (tuples inside args and
    kwargs become lists), and changing the declared spec afterwards changes
    nothing stored."""
    declared = PeriodicSpec(
        task="t", scheduling_period=timedelta(hours=1), args=((1, 2),), kwargs={"k": (3,)}
    )
    store.sync([declared], T0)
    got = store.get("t").spec
    assert got is not None
    assert (got.args, dict(got.kwargs)) == (([1, 2],), {"k": [3]})
    declared.kwargs["k"] = "changed"  # type: ignore[index]
    assert store.get("t").spec == got
    assert store.sync([got], T0).unchanged == ["t"]


def test_changes_since_lists_rows_in_change_order(store: ScheduleStore) -> None:
    store.sync([periodic("a"), periodic("b"), periodic("c")], T0)
    _, cursor = store.load_active()
    store.set_paused("c", True)
    store.request_run("a", T0)
    store.set_paused("b", True)
    store.set_paused("c", False)  # c again: now after b
    changed, _ = store.changes_since(cursor)
    assert [r.name for r in changed] == ["a", "b", "c"]
    assert [r.change_seq for r in changed] == sorted(r.change_seq for r in changed)
    store.set_paused("b", False)
    store.set_paused("a", True)
    assert [r.name for r in store.changes_since(cursor)[0]] == ["c", "b", "a"]


def test_names_near_reads_the_names_on_each_side_in_name_order(store: ScheduleStore) -> None:
    store.sync([periodic(f"t.{c}") for c in "abcdefg"], T0)
    store.sync([periodic(f"t.{c}") for c in "abcdef"], T0)  # t.g inactive: still a name
    assert store.names_near("t.d", 2) == ["t.b", "t.c", "t.d", "t.e"]
    assert store.names_near("t.dd", 2) == ["t.c", "t.d", "t.e", "t.f"]
    assert store.names_near("a", 3) == ["t.a", "t.b", "t.c"]
    assert store.names_near("z", 2) == ["t.f", "t.g"]
    assert store.names_near("t.a", 100) == [f"t.{c}" for c in "abcdefg"]
