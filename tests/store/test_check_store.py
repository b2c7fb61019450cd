"""Deferred checks in the store: adding (keep or move), the verdict of a run's
end (again, done, guards), failures, cancelling, beat's window reads
(``due_checks``, ``changes_since(check_until=...)``), the operator reads and
pruning. One contract for the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from celery_dgs.core.checks import round_to_slot
from celery_dgs.core.instants import format_instant
from celery_dgs.core.spec import CheckSpec
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.store import ScheduleStore
from celery_dgs.store.check_types import NewCheck

from .conftest import T0, periodic, start

S = timedelta(seconds=1)
M = timedelta(minutes=1)


def check(key: str, **kw: object) -> CheckSpec:
    return CheckSpec(task="shop.check_order", key=key, **kw)  # type: ignore[arg-type]


def add(store: ScheduleStore, *items: tuple[CheckSpec, datetime], on_exists: str = "keep") -> None:
    store.add_checks([NewCheck(spec, at) for spec, at in items], T0, on_exists=on_exists)


def run(
    store: ScheduleStore,
    name: str,
    token: int,
    at: datetime,
    outcome: str = "success",
    verdict: object = None,
) -> None:
    start(store, name, f"r{token}", token, at)
    error = "boom" if outcome == "failure" else None
    store.record_run_end(
        run_id=f"r{token}", outcome=outcome, ended_at=at + 2 * S, verdict=verdict, error=error
    )


def test_add_keeps_or_moves_an_existing_check(store: ScheduleStore) -> None:
    spec = check("42", kwargs={"order": 42})
    report = store.add_checks([NewCheck(spec, T0 + 3 * M)], T0)
    assert report.added == [spec.name]
    assert not report.kept
    row = store.get(spec.name)
    assert row.kind == "check"
    assert row.owner == "check"
    assert row.active
    assert row.first_check_at == T0 + 3 * M
    assert row.check_count == 0
    assert row.stats.next_target_at == T0 + 3 * M

    again = store.add_checks([NewCheck(check("42", kwargs={"order": 43}), T0 + 9 * M)], T0)
    assert again.kept == [spec.name]
    assert store.get(spec.name).stats.next_target_at == T0 + 3 * M  # kept as it was

    moved = store.add_checks(
        [NewCheck(check("42", kwargs={"order": 43}), T0 + 9 * M)], T0, on_exists="move"
    )
    assert moved.moved == [spec.name]
    row = store.get(spec.name)
    assert row.stats.next_target_at == T0 + 9 * M
    assert row.first_check_at == T0 + 3 * M
    assert row.spec is not None
    assert row.spec.kwargs == {"order": 43}


def test_checks_are_not_schedules_for_listing_or_loading(store: ScheduleStore) -> None:
    store.sync([periodic("t.a")], T0)
    add(store, (check("1"), T0))
    assert [s.name for s in store.list_schedules(include_inactive=True)] == ["t.a"]
    assert [s.name for s in store.load_active()[0]] == ["t.a"]
    assert [s.name for s in store.pending_checks()] == ["shop.check_order@check:1"]
    store.sync([], T0)  # sync leaves checks alone
    assert store.get("shop.check_order@check:1").active


def test_a_name_of_another_kind_or_given_twice_is_refused(store: ScheduleStore) -> None:
    with pytest.raises(ScheduleConfigError, match=r"'key'.*twice"):
        add(store, (check("1"), T0), (check("1"), T0 + M))
    assert store.pending_checks() == []
    with pytest.raises(ValueError, match="on_exists"):
        store.add_checks([NewCheck(check("1"), T0)], T0, on_exists="replace")


def test_verdicts_move_the_check_then_end_it_into_history(store: ScheduleStore) -> None:
    spec = check("7")
    add(store, (spec, T0))
    run(store, spec.name, 1, T0, verdict=timedelta(hours=3))
    row = store.get(spec.name)
    assert row.active
    assert row.check_count == 1
    assert row.stats.next_target_at == T0 + 2 * S + timedelta(hours=3)
    later = T0 + timedelta(hours=3, seconds=5)
    run(store, spec.name, 2, later, verdict=None)
    row = store.get(spec.name)
    assert not row.active
    assert row.check_count == 2
    [record] = store.check_history(name=spec.name)
    assert (record.outcome, record.check_count, record.failure_count) == ("done", 2, 0)
    assert record.first_check_at == T0
    assert record.last_check_at == later
    assert record.ended_at == later + 2 * S
    assert record.key == "7"
    assert store.pending_checks() == []


@pytest.mark.parametrize(
    ("verdict", "outcome", "why"),
    [
        (T0 - M, "past", f"({format_instant(T0 - M)}) is not after"),
        (timedelta(days=40), "horizon", "horizon"),
        ("yes", "invalid_verdict", "returned 'yes'"),
    ],
)
def test_guards_end_the_check_with_a_reason(
    store: ScheduleStore, verdict: object, outcome: str, why: str
) -> None:
    spec = check("g")
    add(store, (spec, T0))
    run(store, spec.name, 1, T0, verdict=verdict)
    [record] = store.check_history(name=spec.name)
    assert record.outcome == outcome
    assert record.reason is not None
    assert why in record.reason
    assert "+00:00" not in record.reason, "times as the other surfaces print them"


def test_max_checks_ends_the_nth_check(store: ScheduleStore) -> None:
    spec = check("m", max_checks=2)
    add(store, (spec, T0))
    run(store, spec.name, 1, T0, verdict=M)
    assert store.get(spec.name).active
    run(store, spec.name, 2, T0 + 2 * M, verdict=M)
    [record] = store.check_history(name=spec.name)
    assert (record.outcome, record.check_count) == ("max_checks", 2)


def test_failures_retry_then_end_after_max_failures(store: ScheduleStore) -> None:
    spec = check("f", max_failures=2)
    add(store, (spec, T0))
    run(store, spec.name, 1, T0, outcome="failure")
    row = store.get(spec.name)
    assert row.active
    assert row.stats.failure_count == 1
    assert row.check_count == 0
    assert row.stats.next_target_at == T0  # still due: the retry ladder holds it back
    run(store, spec.name, 2, T0 + 5 * M, outcome="lost")
    [record] = store.check_history(name=spec.name)
    assert record.outcome == "failed"
    assert record.failure_count == 2
    assert record.reason is not None
    assert "lost" in record.reason


def test_an_interrupted_run_leaves_the_check_due(store: ScheduleStore) -> None:
    spec = check("i")
    add(store, (spec, T0))
    run(store, spec.name, 1, T0, outcome="stolen")
    row = store.get(spec.name)
    assert row.active
    assert row.check_count == 0
    assert row.stats.next_target_at == T0


def test_cancel_ends_pending_checks_only(store: ScheduleStore) -> None:
    add(store, (check("a"), T0), (check("b"), T0))
    done = store.cancel_checks(["shop.check_order@check:a", "shop.check_order@check:zz"], T0 + M)
    assert done == ["shop.check_order@check:a"]
    assert store.cancel_checks(["shop.check_order@check:a"], T0 + M) == []
    [record] = store.check_history()
    assert record.outcome == "cancelled"
    assert record.ended_at == T0 + M
    assert [c.name for c in store.pending_checks()] == ["shop.check_order@check:b"]
    # a cancelled check's run still ends; its verdict is ignored
    start(store, "shop.check_order@check:a", "late", 1, T0 + 2 * M)
    store.record_run_end(run_id="late", outcome="success", ended_at=T0 + 3 * M, verdict=M)
    assert not store.get("shop.check_order@check:a").active
    assert len(store.check_history()) == 1


def test_an_ended_check_added_again_is_a_new_check(store: ScheduleStore) -> None:
    spec = check("r")
    add(store, (spec, T0))
    run(store, spec.name, 1, T0, verdict=None)
    report = store.add_checks([NewCheck(spec, T0 + timedelta(hours=1))], T0 + M)
    assert report.added == [spec.name]
    row = store.get(spec.name)
    assert row.active
    assert row.check_count == 0
    assert row.first_check_at == T0 + timedelta(hours=1)
    assert row.current_token == 1  # the fencing floor survives


def test_due_checks_read_a_window_in_time_then_name_order(store: ScheduleStore) -> None:
    add(store, *[(check(f"k{i}"), T0 + (i // 2) * M) for i in range(6)])
    first = store.due_checks(None, T0 + 10 * M, 3)
    assert [c.configuration for c in first] == ["check:k0", "check:k1", "check:k2"]
    last = first[-1]
    assert last.stats.next_target_at is not None
    rest = store.due_checks((last.stats.next_target_at, last.name), T0 + 10 * M, 10)
    assert [c.configuration for c in rest] == ["check:k3", "check:k4", "check:k5"]
    assert [c.configuration for c in store.due_checks(None, T0 + M, 10)] == [
        "check:k0",
        "check:k1",
        "check:k2",
        "check:k3",
    ]


def test_change_poll_skips_checks_never_due_in_the_window(store: ScheduleStore) -> None:
    _, cursor = store.load_active()
    near, far = check("near"), check("far")
    add(store, (near, T0 + M), (far, T0 + timedelta(days=2)))
    until = T0 + 10 * M
    rows, cursor = store.changes_since(cursor, check_until=until)
    assert [r.name for r in rows] == [near.name]
    assert {r.name for r in store.changes_since(0)[0]} == {near.name, far.name}
    # moved out of the window: still reported (beat must drop what it holds)
    add(store, (near, T0 + timedelta(days=3)), on_exists="move")
    rows, cursor = store.changes_since(cursor, check_until=until)
    assert [r.name for r in rows] == [near.name]
    assert rows[0].stats.next_target_at == T0 + timedelta(days=3)
    # ended far outside the window: reported (inactive)
    store.cancel_checks([far.name], T0)
    rows, cursor = store.changes_since(cursor, check_until=until)
    assert [(r.name, r.active) for r in rows] == [(far.name, False)]


def test_summary_and_pending_reads(store: ScheduleStore) -> None:
    add(
        store,
        (check("a"), T0 - M),
        (check("b"), T0 + M),
        (CheckSpec(task="mail.remind", key="u1"), T0 - 2 * M),
    )
    summary = store.check_summary(T0)
    assert summary.pending == {"mail.remind": 1, "shop.check_order": 2}
    assert summary.overdue == {"mail.remind": 1, "shop.check_order": 1}
    assert summary.oldest_due["shop.check_order"] == T0 - M
    assert (summary.total_pending, summary.total_overdue) == (3, 2)
    overdue = store.pending_checks(due_before=T0)
    assert [c.name for c in overdue] == ["mail.remind@check:u1", "shop.check_order@check:a"]
    assert [c.name for c in store.pending_checks(task="mail.remind")] == ["mail.remind@check:u1"]


def test_prune_deletes_old_history_and_unreferenced_ended_rows(store: ScheduleStore) -> None:
    add(store, (check("old"), T0), (check("ran"), T0))
    store.cancel_checks(["shop.check_order@check:old"], T0)
    run(store, "shop.check_order@check:ran", 1, T0, verdict=None)
    assert store.prune_checks(T0 + timedelta(days=400)) == 2
    assert store.check_history() == []
    with pytest.raises(Exception, match="no schedule"):
        store.get("shop.check_order@check:old")
    assert not store.get("shop.check_order@check:ran").active  # its run refers to it


def test_slot_rounds_up_from_the_epoch() -> None:
    slot = timedelta(minutes=15)
    at = T0.replace(hour=10, minute=5)
    assert round_to_slot(at, slot) == at.replace(minute=15)
    assert round_to_slot(at.replace(minute=15), slot) == at.replace(minute=15)
    assert round_to_slot(at, None) == at
