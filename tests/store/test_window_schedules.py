"""``window_schedules``: beat's slices of the fleet by kept start times, and
of one margin bucket by kept ``error_at``, the same on every store; with the
kept times and margin bucket on every row a store returns;
``window_margin_buckets``: the buckets in use."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.laxity import NO_MARGIN_BUCKET, margin_bucket
from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.core.timing import start_margin
from celery_dgs.core.window import KeptStart, next_can_of, slice_of
from celery_dgs.core.window_part import SliceRead
from celery_dgs.store.base import ScheduleStore
from celery_dgs.store.check_types import NewCheck
from celery_dgs.store.kept import kept_past_blackout
from celery_dgs.store.memory import MemoryScheduleStore
from celery_dgs.store.records import StoredSchedule
from tests.store.conftest import T0, start

M = timedelta(minutes=1)
H = timedelta(hours=1)


def periodic(i: int) -> PeriodicSpec:
    return PeriodicSpec(
        task="w.job", configuration=f"s{i:02d}", scheduling_period=timedelta(hours=1)
    )


def fill(store: ScheduleStore) -> None:
    """s00..s09: never ran, registered a minute apart (can start then; the
    deadline an hour later); s10 and s11 share s05's times; a deferred check."""
    for i in range(10):
        store.upsert_runtime([periodic(i)], T0 + i * M)
    store.upsert_runtime([periodic(10), periodic(11)], T0 + 5 * M)
    store.add_checks([NewCheck(CheckSpec(task="w.check", key="k", within=M), T0)], T0)


def names(rows: list[StoredSchedule]) -> list[str]:
    return [r.name for r in rows]


def test_rows_carry_their_kept_start_times(store: ScheduleStore) -> None:
    fill(store)
    row = store.get("w.job@s03")
    assert row.kept_can_start_at == T0 + 3 * M
    assert row.kept_should_start_by is not None
    assert row.kept_should_start_by > row.kept_can_start_at


def test_slices_go_by_deadline_then_start_then_name(store: ScheduleStore) -> None:
    fill(store)
    first = store.window_schedules(can_after=None, can_until=T0 + 5 * M, key_after=None, limit=4)
    assert names(first) == ["w.job@s00", "w.job@s01", "w.job@s02", "w.job@s03"]
    last = first[-1]
    assert last.kept_should_start_by is not None
    assert last.kept_can_start_at is not None
    key = (last.kept_should_start_by, last.kept_can_start_at, last.name)
    on = store.window_schedules(can_after=None, can_until=T0 + 5 * M, key_after=key, limit=10)
    assert names(on) == ["w.job@s04", "w.job@s05", "w.job@s10", "w.job@s11"], "no check"
    later = store.window_schedules(
        can_after=T0 + 5 * M, can_until=T0 + 7 * M, key_after=None, limit=10
    )
    assert names(later) == ["w.job@s06", "w.job@s07"]


def test_a_removed_schedule_is_in_no_slice(store: ScheduleStore) -> None:
    fill(store)
    store.remove_runtime(["w.job@s01"], T0)
    rows = store.window_schedules(can_after=None, can_until=T0 + 9 * M, key_after=None, limit=100)
    assert "w.job@s01" not in names(rows)
    assert len(rows) == 11


def test_the_stores_and_the_simulators_slice_agree(store: ScheduleStore) -> None:
    fill(store)
    rows = store.list_schedules()
    kept = [(r.name, KeptStart(r.kept_can_start_at, r.kept_should_start_by)) for r in rows]
    for read in (
        SliceRead(None, T0 + 9 * M, None, 5, restart=True),
        SliceRead(T0 + 2 * M, T0 + 6 * M, None, 3, restart=False),
    ):
        got = store.window_schedules(
            can_after=read.can_after, can_until=read.can_until, key_after=None, limit=read.limit
        )
        assert names(got) == slice_of(read, kept)


def key_of(row: StoredSchedule) -> tuple[datetime, datetime, str]:
    assert row.kept_should_start_by is not None
    assert row.kept_can_start_at is not None
    return (row.kept_should_start_by, row.kept_can_start_at, row.name)


def test_a_slice_up_to_a_key_is_the_simulators(store: ScheduleStore) -> None:
    """The eligible part's refresh: a next start in (after, until] and a key
    in (key_after, key_until], as the simulator's slice selects it."""
    fill(store)
    rows = {r.name: r for r in store.list_schedules() if r.kind != "check"}
    kept = [(n, r.kept_start()) for n, r in rows.items()]
    key_after, key_until = key_of(rows["w.job@s01"]), key_of(rows["w.job@s10"])
    read = SliceRead(T0 + M, T0 + 8 * M, key_after, 10, restart=False, key_until=key_until)
    got = store.window_schedules(
        can_after=read.can_after,
        can_until=read.can_until,
        key_after=key_after,
        key_until=key_until,
        limit=10,
    )
    assert names(got) == ["w.job@s02", "w.job@s03", "w.job@s04", "w.job@s05", "w.job@s10"]
    assert names(got) == slice_of(read, kept)
    with pytest.raises(ValueError, match="no can_after and no key_until"):
        store.window_schedules(
            can_after=None, can_until=T0, key_after=None, key_until=key_until, limit=1, bucket=3
        )


def test_the_next_start_past_a_key(store: ScheduleStore) -> None:
    """``window_next_can``: the earliest kept next start after a moment among
    the schedules past a key (the window's end): when beat must wake."""
    fill(store)
    rows = {r.name: r for r in store.list_schedules() if r.kind != "check"}
    kept = [(n, r.kept_start()) for n, r in rows.items()]
    end = key_of(rows["w.job@s03"])
    for after, expected in [
        (T0, T0 + 4 * M),  # s01..s03 are at or before the end
        (T0 + 4 * M, T0 + 5 * M),
        (T0 + 5 * M, T0 + 6 * M),  # s05, s10, s11 share it: past it
        (T0 + 9 * M, None),
    ]:
        found = store.window_next_can(can_after=after, key_after=end)
        assert found == expected, after
        assert found == next_can_of(after, end, kept)
        if found is not None:
            assert found.utcoffset() == timedelta(0)


def test_the_should_start_by_a_number_of_rows_past_a_key(store: ScheduleStore) -> None:
    fill(store)
    until = T0 + 7 * M
    first = store.window_schedules(can_after=None, can_until=until, key_after=None, limit=2)
    last = first[-1]
    assert last.kept_should_start_by is not None
    assert last.kept_can_start_at is not None
    key = (last.kept_should_start_by, last.kept_can_start_at, last.name)
    after = store.window_schedules(can_after=None, can_until=until, key_after=key, limit=20)
    assert len(after) == 8, "s02..s07, s10, s11: the check and the later ones left out"
    for offset, row in enumerate(after):
        found = store.window_should_at(can_until=until, key_after=key, offset=offset)
        assert found == row.kept_should_start_by
        assert found is not None
        assert found.utcoffset() == timedelta(0)
    assert store.window_should_at(can_until=until, key_after=key, offset=8) is None
    with pytest.raises(ValueError, match="the offset must be >= 0, got -1"):
        store.window_should_at(can_until=until, key_after=key, offset=-1)


#: The margins of the bucket tests' schedules, by configuration number mod 3.
MARGINS = (timedelta(seconds=30), timedelta(minutes=10), timedelta(hours=1))


def with_margin(i: int) -> PeriodicSpec:
    """b00..b11: a margin of MARGINS[i % 3] (its duration override)."""
    return PeriodicSpec(
        task="w.bucket",
        configuration=f"b{i:02d}",
        scheduling_period=timedelta(hours=2),
        duration_override=MARGINS[i % 3],
    )


def fill_buckets(store: ScheduleStore) -> None:
    """b00..b11 registered a minute apart, b10 and b11 with b05; s00 (no
    margin); a deferred check."""
    for i in range(10):
        store.upsert_runtime([with_margin(i)], T0 + i * M)
    store.upsert_runtime([with_margin(10), with_margin(11)], T0 + 5 * M)
    store.upsert_runtime([periodic(0)], T0)
    store.add_checks([NewCheck(CheckSpec(task="w.check", key="k", within=M), T0)], T0)


def kept_of(rows: list[StoredSchedule]) -> list[tuple[str, KeptStart]]:
    return [
        (
            r.name,
            KeptStart(
                r.kept_can_start_at, r.kept_should_start_by, r.kept_error_at, r.kept_margin_bucket
            ),
        )
        for r in rows
        if r.kind != "check" and r.active
    ]


def test_rows_carry_their_kept_error_at_and_margin_bucket(store: ScheduleStore) -> None:
    fill_buckets(store)
    for i, margin in enumerate(MARGINS):
        row = store.get(f"w.bucket@b{i:02d}")
        assert row.kept_should_start_by is not None
        assert row.kept_error_at == row.kept_should_start_by + margin
        assert row.kept_margin_bucket == margin_bucket(margin.total_seconds())
    listed = {r.name: r for r in store.list_schedules()}
    assert listed["w.bucket@b04"].kept_margin_bucket == margin_bucket(MARGINS[1].total_seconds())
    assert store.get("w.job@s00").kept_margin_bucket == NO_MARGIN_BUCKET


def test_the_buckets_in_use_are_listed_ascending(store: ScheduleStore) -> None:
    fill_buckets(store)
    expected = sorted({NO_MARGIN_BUCKET, *(margin_bucket(m.total_seconds()) for m in MARGINS)})
    assert store.window_margin_buckets() == expected
    store.remove_runtime(["w.job@s00"], T0)
    assert store.window_margin_buckets() == expected[1:], "an inactive row has no bucket"


def test_each_bucket_slice_is_the_simulators(store: ScheduleStore) -> None:
    fill_buckets(store)
    kept = kept_of(store.list_schedules())
    buckets = store.window_margin_buckets()
    assert len(buckets) == 4
    for bucket in buckets:
        for until, limit in ((T0 + 9 * M, 20), (T0 + 5 * M, 2), (T0 + 30 * M, 3)):
            read = SliceRead(None, until, None, limit, restart=False, bucket=bucket)
            got = store.window_schedules(
                can_after=None, can_until=until, key_after=None, limit=limit, bucket=bucket
            )
            assert names(got) == slice_of(read, kept), (bucket, until, limit)
            assert all(r.kept_margin_bucket == bucket for r in got)
            if not got:
                continue
            last = got[0]
            assert last.kept_error_at is not None
            assert last.kept_can_start_at is not None
            key = (last.kept_error_at, last.kept_can_start_at, last.name)
            on = store.window_schedules(
                can_after=None, can_until=until, key_after=key, limit=limit, bucket=bucket
            )
            expected = slice_of(SliceRead(None, until, key, limit, False, bucket=bucket), kept)
            assert names(on) == expected, (bucket, until, limit, key)


def test_a_bucket_slice_goes_by_error_at_then_start_then_name(store: ScheduleStore) -> None:
    fill_buckets(store)
    bucket = margin_bucket(MARGINS[2].total_seconds())
    rows = store.window_schedules(
        can_after=None, can_until=T0 + 9 * M, key_after=None, limit=10, bucket=bucket
    )
    assert names(rows) == ["w.bucket@b02", "w.bucket@b05", "w.bucket@b11", "w.bucket@b08"]


def test_a_bucket_read_takes_no_can_after(store: ScheduleStore) -> None:
    with pytest.raises(ValueError, match="a read of margin bucket 3 takes no can_after"):
        store.window_schedules(can_after=T0, can_until=T0 + M, key_after=None, limit=1, bucket=3)


def test_a_run_end_moves_a_schedule_to_its_new_margins_bucket(store: ScheduleStore) -> None:
    spec = PeriodicSpec(task="w.alone", scheduling_period=timedelta(hours=2))
    store.upsert_runtime([spec], T0)
    assert store.window_margin_buckets() == [NO_MARGIN_BUCKET]
    start(store, "w.alone", "r1", 1, at=T0 + M)
    store.record_run_end(run_id="r1", outcome="success", ended_at=T0 + 21 * M)
    row = store.get("w.alone")
    assert row.spec is not None
    margin = start_margin(row.spec, row.stats)
    assert margin == 20 * M
    assert store.window_margin_buckets() == [margin_bucket(margin.total_seconds())]
    rows = store.window_schedules(
        can_after=None,
        can_until=T0 + 10 * timedelta(hours=1),
        key_after=None,
        limit=5,
        bucket=margin_bucket(margin.total_seconds()),
    )
    assert names(rows) == ["w.alone"]
    assert rows[0].kept_error_at == rows[0].kept_should_start_by + margin


@settings(max_examples=60, deadline=None)
@given(
    st.none() | st.integers(1, 7200).map(lambda s: timedelta(seconds=s)),
    st.lists(
        st.tuples(
            st.integers(0, 7200), st.sampled_from(["success", "failure"]), st.integers(0, 90)
        ),
        max_size=6,
    ),
)
def test_the_kept_bucket_is_the_margins_after_any_runs(
    override: timedelta | None, runs: list[tuple[int, str, int]]
) -> None:
    """On the memory store: after runs that succeed and fail, a schedule's kept
    margin bucket is that of its margin (``start_margin``), and its kept
    ``error_at`` is its kept ``should_start_by`` plus that margin."""
    store = MemoryScheduleStore()
    spec = PeriodicSpec(
        task="w.prop", scheduling_period=timedelta(hours=3), duration_override=override
    )
    store.upsert_runtime([spec], T0)
    at = T0
    for token, (seconds, outcome, gap) in enumerate(runs, start=1):
        at += gap * M
        start(store, "w.prop", f"r{token}", token, at=at)
        at += timedelta(seconds=seconds)
        store.record_run_end(run_id=f"r{token}", outcome=outcome, ended_at=at)
        row = store.get("w.prop")
        assert row.spec is not None
        assert row.kept_should_start_by is not None
        margin = start_margin(row.spec, row.stats)
        assert row.kept_error_at == row.kept_should_start_by + margin
        assert row.kept_margin_bucket == margin_bucket(margin.total_seconds())
        assert store.window_margin_buckets() == [row.kept_margin_bucket]


def blacked_out(i: int) -> PeriodicSpec:
    """Never ran; may not start from 12:30 to 14:00 (UTC)."""
    return dataclasses.replace(periodic(i), blackout_periods=[("12:30", "14:00")])


def test_a_schedule_whose_blackout_began_since_is_kept_past_it(store: ScheduleStore) -> None:
    """Written at 12:00, may start then; at 13:00 its blackout keeps it from
    starting: its kept start times move to 14:00, nothing else changes, and
    the read of what may start at 13:00 no longer finds it. Rows that may
    start (no blackout, or one that has not begun, or written inside it)
    keep their times."""
    store.upsert_runtime([blacked_out(1), periodic(2)], T0)
    store.upsert_runtime([blacked_out(3)], T0 + 3 * H)  # written after its blackout
    at = T0 + H
    before = {r.name: r for r in store.window_schedules(**eligible_at(at))}
    assert set(before) == {"w.job@s01", "w.job@s02"}
    moved = [m for r in before.values() if (m := kept_past_blackout(r, at)) is not None]
    assert names(moved) == ["w.job@s01"]
    assert kept_past_blackout(before["w.job@s01"], T0 + 20 * M) is None, "not begun"
    assert kept_past_blackout(store.get("w.job@s03"), T0 + 3 * H) is None, "written inside"
    assert store.window_keep_past_blackout(moved) == 1
    was, after = before["w.job@s01"], store.get("w.job@s01")
    assert after.kept_can_start_at == moved[0].kept_can_start_at == T0 + 2 * H
    assert after.kept_should_start_by is not None
    assert was.kept_should_start_by is not None
    assert after.kept_should_start_by >= was.kept_should_start_by
    assert after.kept_should_start_by == moved[0].kept_should_start_by
    assert after.kept_margin_bucket == moved[0].kept_margin_bucket
    assert after.change_seq == was.change_seq, "derived times: no change for the pollers"
    assert after.stats == was.stats
    assert after.kept_error_at == was.kept_error_at
    assert names(store.window_schedules(**eligible_at(at))) == ["w.job@s02"]
    assert store.window_next_can(can_after=at, key_after=(T0 - H, T0 - H, "")) == T0 + 2 * H


def test_a_row_changed_since_it_was_read_keeps_its_new_times(store: ScheduleStore) -> None:
    store.upsert_runtime([blacked_out(1)], T0)
    at = T0 + H
    (read,) = store.window_schedules(**eligible_at(at))
    moved = kept_past_blackout(read, at)
    assert moved is not None
    start(store, "w.job@s01", "r1", 1, at=T0 + 10 * M)  # a run began meanwhile
    changed = store.get("w.job@s01")
    assert changed.change_seq != read.change_seq
    assert store.window_keep_past_blackout([moved]) == 0
    assert store.get("w.job@s01").kept_can_start_at == changed.kept_can_start_at


def eligible_at(at: datetime) -> dict[str, object]:
    """The arguments of the read of every schedule that may start by ``at``."""
    return {"can_after": None, "can_until": at, "key_after": None, "limit": 10}
