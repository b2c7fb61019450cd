"""Concurrent writers (threads and processes) lose no update, and the change cursor
misses no change. Threads: every backend; processes and transactions: SQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from sqlalchemy import text

from celery_dgs.errors import StaleTokenError
from celery_dgs.store import ScheduleStore, SqlScheduleStore, StoredSchedule
from celery_dgs.store.engine import connection_transaction
from celery_dgs.store.sql_base import BUMP_COUNTER

from .conftest import T0, periodic, start
from .run_writer import spawn

S = timedelta(seconds=1)


def _run_all(jobs: list[Callable[[], object]]) -> None:
    barrier = threading.Barrier(len(jobs))

    def go(job: Callable[[], object]) -> None:
        barrier.wait(timeout=30)
        job()

    with ThreadPoolExecutor(len(jobs)) as pool:
        for future in [pool.submit(go, job) for job in jobs]:
            future.result(timeout=60)


def test_threads_ending_runs_of_different_schedules_lose_nothing_and_the_cursor_misses_nothing(
    store: ScheduleStore,
) -> None:
    names = [f"s{i}" for i in range(6)]
    rounds = 12
    store.sync([periodic(n) for n in names], T0)
    view: dict[str, StoredSchedule] = {}
    rows, cursor = store.load_active()
    view.update((r.name, r) for r in rows)
    done = threading.Event()

    def reader() -> None:
        nonlocal cursor
        while not done.is_set():
            changed, cursor = store.changes_since(cursor)
            view.update((r.name, r) for r in changed)

    def writer(name: str) -> Callable[[], None]:
        def job() -> None:
            for i in range(rounds):
                at = T0 + timedelta(minutes=i)
                start(store, name, f"{name}-{i}", token=i + 1, at=at)
                outcome = "success" if i == 0 else "failure"
                store.record_run_end(run_id=f"{name}-{i}", outcome=outcome, ended_at=at + 1 * S)

        return job

    polling = threading.Thread(target=reader)
    polling.start()
    try:
        _run_all([writer(n) for n in names])
    finally:
        done.set()
        polling.join(timeout=30)
    changed, cursor = store.changes_since(cursor)
    view.update((r.name, r) for r in changed)
    for name in names:
        final = store.get(name)
        assert final.stats.failure_count == rounds - 1, name
        assert final.stats.average_good_duration == 1 * S
        assert final.current_token == rounds
        assert len(store.runs(name)) == rounds
        assert view[name] == final  # the cursor-driven view caught every last change


def test_concurrent_ends_of_the_same_schedule_are_serialised(store: ScheduleStore) -> None:
    """16 runs (tokens 1..16) end at once: the current one updates the stats, the
    15 stale ones are refused for the stats, and no run record is lost."""
    store.sync([periodic("hot")], T0)
    runs = 16
    for i in range(runs):
        start(store, "hot", f"r{i}", token=i + 1, at=T0 + i * S)
    ends = [T0 + timedelta(minutes=1, seconds=i) for i in range(runs)]
    refused: list[int] = []

    def end(i: int) -> Callable[[], object]:
        def job() -> None:
            try:
                store.record_run_end(run_id=f"r{i}", outcome="failure", ended_at=ends[i])
            except StaleTokenError:
                refused.append(i)

        return job

    _run_all([end(i) for i in range(runs)])
    stats = store.get("hot").stats
    assert sorted(refused) == list(range(runs - 1))
    assert stats.failure_count == 1
    assert stats.last_end_at == ends[-1]
    history = store.runs("hot")
    assert {r.outcome for r in history} == {"failure"}
    assert sorted(r.run_id for r in history if r.fenced) == sorted(f"r{i}" for i in refused)


def test_separate_processes_lose_no_update(database_url: str, sql_store: SqlScheduleStore) -> None:
    store = sql_store
    writers = [f"p{i}" for i in range(4)]
    rounds = 8
    store.sync([periodic(n) for n in [*writers, "shared"]], T0)
    procs = spawn(database_url, writers, "shared", rounds)
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        assert out.strip() == "done", err
    for name in writers:
        own = store.get(name)
        assert own.stats.failure_count == rounds
        assert own.current_token == rounds
    # Every end that was not fenced counted once: no read-modify-write was lost.
    shared = store.runs("shared", limit=10000)
    counted = [r for r in shared if r.outcome == "failure" and not r.fenced]
    assert store.get("shared").stats.failure_count == len(counted) >= 1
    assert len([r for r in shared if r.outcome == "failure"]) == rounds * len(writers)
    tokens = [r.token for r in shared if r.outcome == "failure"]
    assert len(set(tokens)) == len(tokens)  # no token started twice
    assert store.running_runs() == []


def test_a_later_writer_commits_after_an_earlier_uncommitted_change(
    sql_store: SqlScheduleStore,
) -> None:
    """Commit order equals change_seq order: while a change holds seq N uncommitted, a
    second writer cannot take N+1 and commit first (the cursor would skip N)."""
    store = sql_store
    store.sync([periodic("a"), periodic("b")], T0)
    _, cursor = store.load_active()
    finished = threading.Event()

    def pause_b() -> None:
        store.set_paused("b", True)
        finished.set()

    later = threading.Thread(target=pause_b)
    with connection_transaction(store.engine, write=True) as conn:
        seq = conn.execute(BUMP_COUNTER).scalar_one()
        conn.execute(
            text("UPDATE dgs_schedules SET paused = :p, change_seq = :s WHERE name = 'a'"),
            {"p": True, "s": seq},
        )
        later.start()
        assert not finished.wait(0.5)  # the second writer waits for the first to commit
        assert store.changes_since(cursor) == ([], cursor)  # and readers see neither yet
    assert finished.wait(20)
    later.join(timeout=20)
    changed, _ = store.changes_since(cursor)
    assert [(r.name, r.paused) for r in changed] == [("a", True), ("b", True)]
    assert changed[0].change_seq < changed[1].change_seq
