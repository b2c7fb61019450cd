"""How a sync's report reads in beat's log: sizes and a few names, never
every name of a large fleet."""

from __future__ import annotations

from celery_dgs.store.records import SyncReport


def test_a_report_names_a_few_schedules_of_each_changed_list() -> None:
    report = SyncReport(
        inserted=[f"t.s@{i}" for i in range(100_000)],
        updated=["t.u"],
        invalid=["t.bad"],
        unchanged=["t.x", "t.y"],
    )
    assert str(report) == (
        "100000 inserted (t.s@0, t.s@1, t.s@2, ...), 1 updated (t.u), "
        "1 invalid (t.bad), 2 unchanged"
    )


def test_an_empty_report_says_so() -> None:
    assert str(SyncReport()) == "no schedules declared"
