"""``insert_if_missing``: a worker stores a declared schedule beat has not synced
yet, without ever changing a stored row, and without conflicting with a sync."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from celery_dgs.core.spec import ScheduleSpec
from celery_dgs.store import ScheduleStore, SyncReport

from .conftest import T0, periodic, start

LATER = T0 + timedelta(hours=1)


def test_inserts_a_missing_schedule_as_sync_would(store: ScheduleStore) -> None:
    _, cursor = store.load_active()
    spec = periodic("t.a")
    assert store.insert_if_missing(spec, T0) is True
    row = store.get("t.a")
    assert (row.spec, row.active, row.paused, row.stats.registered_at) == (spec, True, False, T0)
    changed, _ = store.changes_since(cursor)
    assert [r.name for r in changed] == ["t.a"], "beat's change poll sees it"
    assert store.insert_if_missing(spec, LATER) is False
    assert store.get("t.a").change_seq == row.change_seq
    # The sync that follows finds it stored and equal: nothing to do.
    report = store.sync([spec], LATER)
    assert (report.inserted, report.unchanged) == ([], ["t.a"])
    assert store.get("t.a").change_seq == row.change_seq


def test_never_touches_a_stored_row(store: ScheduleStore) -> None:
    store.sync([periodic("t.a"), periodic("t.b")], T0)
    start(store, "t.a", "r1", token=1)
    store.sync([periodic("t.b")], T0)  # t.a deactivated
    before = {r.name: r for r in store.list_schedules(include_inactive=True)}
    # A different spec (another code version) and an inactive name: both left alone.
    assert store.insert_if_missing(periodic("t.a", hours=1), LATER) is False
    assert store.insert_if_missing(periodic("t.b", hours=1), LATER) is False
    assert {r.name: r for r in store.list_schedules(include_inactive=True)} == before


def _race(
    store: ScheduleStore, specs: list[ScheduleSpec], declared: list[ScheduleSpec]
) -> tuple[set[str], set[str]]:
    """One worker per spec calls insert_if_missing while beat syncs ``declared``,
    all released at once; returns the names each side inserted."""
    barrier = threading.Barrier(len(specs) + 1)

    def worker(spec: ScheduleSpec) -> bool:
        barrier.wait(timeout=30)
        return store.insert_if_missing(spec, T0)

    def beat() -> SyncReport:
        barrier.wait(timeout=30)
        return store.sync(declared, T0)

    with ThreadPoolExecutor(len(specs) + 1) as pool:
        inserted = [pool.submit(worker, s) for s in specs]
        report = pool.submit(beat).result(timeout=60)
        by_worker = {s.name for s, f in zip(specs, inserted, strict=True) if f.result(60)}
    return by_worker, set(report.inserted)


def test_races_with_sync_without_conflict(store: ScheduleStore) -> None:
    """Workers storing schedules while beat syncs the same names: every call
    succeeds (no unique violation), each name is stored once, by one side, and
    runs recorded in between survive the later syncs."""
    rounds, names = 8, [f"race.{i}" for i in range(4)]
    declared: list[ScheduleSpec] = []
    for r in range(rounds):
        specs = [periodic(f"{n}.{r}") for n in names]
        declared += specs
        by_worker, by_sync = _race(store, specs, declared)
        assert by_worker.isdisjoint(by_sync)
        assert by_worker | by_sync == {s.name for s in specs}
        start(store, specs[0].name, f"run-{r}", token=1)
    stored = {s.name: s for s in store.list_schedules(include_inactive=True)}
    assert len(stored) == rounds * len(names)
    assert all(s.active for s in stored.values())
    assert all(stored[f"race.0.{r}"].current_token == 1 for r in range(rounds))
