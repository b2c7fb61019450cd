"""The condition tally (``celery_dgs.store.condition_tally``): the fleet's
counts by condition kept by the database's triggers as rows change, equal at
every moment to the counts of the rows themselves (each condition's index
ranges, ``sql_status_parts.counts_by_part``), folded or not, on SQLite and
PostgreSQL."""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from celery_dgs.beat.reaper import TallyFolder
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.condition import Level
from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.store import SqlScheduleStore
from celery_dgs.store import condition_tally as tally
from celery_dgs.store.check_types import NewCheck
from celery_dgs.store.convert import utc
from celery_dgs.store.engine import connection_transaction, make_engine
from celery_dgs.store.selection import Selection
from celery_dgs.store.sql_status_parts import ALL_LEVELS, counts_by_part

from .conftest import T0, start

M = timedelta(minutes=1)
S = timedelta(seconds=1)
#: The time-to-error ranges asked for: ends within a bucket, on one, and far.
BOUNDS = (7 * S, 2 * M + 3 * S, 20 * M, 4 * 60 * M)


def by_rows(store: SqlScheduleStore, at: datetime) -> dict[tuple[str, str], int]:
    """The counts at ``at`` from the rows: each condition's index ranges."""
    with connection_transaction(store.engine, write=False) as conn:
        return counts_by_part(conn, {"now": utc(at, "now")}, set(ALL_LEVELS))


def deltas(store: SqlScheduleStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM dgs_condition_deltas")).scalar_one())


def moments(store: SqlScheduleStore, rng: random.Random) -> list[datetime]:
    """Moments worth asking at: each row's ``warning_at`` and ``error_at``,
    just before and after them, bucket starts, and random ones."""
    with store.engine.connect() as conn:
        found = conn.execute(text("SELECT warning_at, error_at FROM dgs_schedules")).all()
    times = [utc_of(t) for row in found for t in row if t is not None]
    picked = rng.sample(times, min(8, len(times)))
    out = []
    for t in picked:
        bucket = datetime.fromtimestamp(tally.bucket_of(t), timezone.utc)
        out += [t, t - S / 1000, t + S / 1000, bucket, bucket + tally.BUCKET_S * S]
    return out + [T0 + rng.uniform(-60, 6000) * M for _ in range(4)]


def utc_of(value: object) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def assert_counts_agree(store: SqlScheduleStore, rng: random.Random) -> int:
    """The counts the store gives, and the tally's own, equal the rows' at
    each of :func:`moments`, and so do the counts by time to ERROR; how many
    the tally answered (not a moment before its last fold's margin)."""
    answered = 0
    for at in moments(store, rng):
        want = by_rows(store, at)
        assert store.condition_counts(at, Selection()) == want, at
        with connection_transaction(store.engine, write=False) as conn:
            kept = tally.counts_at(conn, utc(at, "now"))
            ahead = tally.time_to_error_at(conn, utc(at, "now"), BOUNDS)
        assert (kept is None) == (ahead is None), at
        if kept is not None:
            assert {(Level(lv).name, why): n for (lv, why), n in kept.items()} == want, at
            assert ahead == store.time_to_error_by_rows(at, BOUNDS), at
            answered += 1
        assert store.time_to_error_counts(at, BOUNDS) == store.time_to_error_by_rows(at, BOUNDS)
    return answered


@pytest.mark.parametrize("seed", [1, 2])
def test_the_tally_counts_what_the_rows_say_at_every_moment(
    sql_store: SqlScheduleStore, seed: int
) -> None:
    """Random changes (declared and runtime schedules, runs that succeed,
    fail or stay running, pauses, removals, an invalid declaration, deferred
    checks), each followed by the counts at many moments (the rows' own
    moments, a millisecond either side, bucket edges), sometimes folded
    between."""
    rng = random.Random(seed)
    store = sql_store
    declared = [
        PeriodicSpec(task="d", configuration=str(i), scheduling_period=20 * M) for i in range(4)
    ]
    store.sync(declared, T0)
    names = [s.name for s in declared]
    runs = answered = 0
    for step in range(12):
        now = T0 + step * 7 * M
        specs = [
            PeriodicSpec(
                task="t",
                configuration=f"{step}.{i}",
                scheduling_period=rng.choice([5, 20, 60, 240]) * M,
            )
            for i in range(rng.randint(2, 8))
        ]
        store.upsert_runtime(specs, now)
        names += [s.name for s in specs]
        for name in rng.sample(names, min(len(names), 6)):
            runs += 1
            started = now + rng.uniform(0, 5) * M
            start(store, name, f"r{runs}", token=store.token_floor(name) + 1, at=started)
            if rng.random() < 0.8:
                outcome = rng.choice(["success", "success", "failure"])
                store.record_run_end(run_id=f"r{runs}", outcome=outcome, ended_at=started + M)
        for name in rng.sample(names, 2):
            store.set_paused(name, rng.random() < 0.5)
        if step == 5:  # a declaration turns invalid: ERROR with no moment
            store.sync(declared[1:], now, invalid={declared[0].name: "scheduling_period: bad"})
        if step == 6:
            checks = [NewCheck(CheckSpec(task="c", key=str(i)), now + i * M) for i in range(3)]
            store.add_checks(checks, now)
        runtime = [n for n in names if n.startswith("t@")]
        if rng.random() < 0.4 and runtime:
            gone = rng.choice(runtime)
            store.remove_runtime([gone], now)
            names.remove(gone)
        if rng.random() < 0.5:
            store.fold_condition_tally(now + rng.uniform(-30, 300) * M)
        answered += assert_counts_agree(store, rng)
    assert answered > 100
    late = T0 + 10_000 * M
    store.fold_condition_tally(late)
    assert deltas(store) == 0
    for at in (late, late + 7 * S, late + 3 * M):
        assert store.condition_counts(at, Selection()) == by_rows(store, at)
    with connection_transaction(store.engine, write=False) as conn:
        assert tally.counts_at(conn, late) is not None
        assert tally.counts_at(conn, late - tally.FOLD_MARGIN_S * S - M) is None


@pytest.mark.postgres
def test_folds_beside_concurrent_writers_lose_no_step(pg_url: str) -> None:
    """Writers recording runs in threads of their own while two folders fold
    again and again (PostgreSQL: concurrent transactions): every step is
    counted once."""
    store = SqlScheduleStore.open(pg_url)
    try:
        specs = [
            PeriodicSpec(task="t", configuration=str(i), scheduling_period=M) for i in range(40)
        ]
        store.upsert_runtime(specs, T0)
        stop = threading.Event()
        failures: list[BaseException] = []

        def write(worker: int) -> None:
            try:
                for k in range(25):  # each writer its own ten schedules: no run races another
                    name = specs[worker * 10 + k % 10].name
                    run_id = f"w{worker}-{k}"
                    at = T0 + (k % 7) * S * 11
                    start(store, name, run_id, token=store.token_floor(name) + 1, at=at)
                    store.record_run_end(run_id=run_id, outcome="success", ended_at=at + S)
            except BaseException as exc:  # reported below
                failures.append(exc)

        def fold() -> None:
            while not stop.is_set():
                store.fold_condition_tally(T0 + 20 * M)

        writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        folders = [threading.Thread(target=fold) for _ in range(2)]
        for thread in writers + folders:
            thread.start()
        for thread in writers:
            thread.join(60)
        stop.set()
        for thread in folders:
            thread.join(60)
        assert failures == []
        for at in (T0 + 20 * M, T0 + 21 * M, T0 + 22 * M + 5 * S, T0 + 60 * M):
            assert store.condition_counts(at, Selection()) == by_rows(store, at), at
            with connection_transaction(store.engine, write=False) as conn:
                assert tally.counts_at(conn, utc(at, "now")) is not None
    finally:
        store.close()


def test_the_migration_counts_the_rows_already_stored(database_url: str) -> None:
    """A store written before the tally gets it filled from its rows."""
    store = SqlScheduleStore.open(database_url)
    try:
        specs = [
            PeriodicSpec(task="t", configuration=str(i), scheduling_period=(i + 1) * 10 * M)
            for i in range(12)
        ]
        store.upsert_runtime(specs, T0)
        for i in range(0, 12, 3):
            start(store, specs[i].name, f"r{i}", token=1, at=T0 + i * M)
            store.record_run_end(run_id=f"r{i}", outcome="failure", ended_at=T0 + i * M + M)
    finally:
        store.close()
    engine = make_engine(database_url)  # as it was before migration 0017
    with engine.begin() as conn:
        tally.drop_triggers(conn)
        conn.exec_driver_sql("DROP TABLE dgs_condition_deltas")
        conn.exec_driver_sql("DROP TABLE dgs_condition_tally")
        for key in ("", "pool_", "task_"):  # migrations 0018's and 0019's
            conn.exec_driver_sql(f"DROP INDEX ix_dgs_schedules_{key}running_warning")
            conn.exec_driver_sql(f"DROP INDEX ix_dgs_schedules_{key}kept_warning")
        conn.exec_driver_sql("UPDATE dgs_alembic_version SET version_num = '0016_margin_bucket'")
    engine.dispose()
    store = SqlScheduleStore.open(database_url)  # migrates to the head again
    try:
        assert deltas(store) == 0
        for minutes in (0, 15, 45, 90, 200):
            at = T0 + minutes * M
            with connection_transaction(store.engine, write=False) as conn:
                kept = tally.counts_at(conn, utc(at, "now"))
            assert kept is not None
            got = {(Level(lv).name, why): n for (lv, why), n in kept.items()}
            assert got == by_rows(store, at), minutes
    finally:
        store.close()


def test_beats_folder_folds_every_interval_and_logs_a_failure(
    sqlite_store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    sqlite_store.upsert_runtime([PeriodicSpec(task="t", scheduling_period=M)], T0)
    assert deltas(sqlite_store) > 0
    folder = TallyFolder(sqlite_store, FakeClock(T0), interval_s=10.0)
    folder.maybe_fold(100.0)
    assert deltas(sqlite_store) == 0
    sqlite_store.upsert_runtime([PeriodicSpec(task="u", scheduling_period=M)], T0)
    folder.maybe_fold(105.0)  # within the interval: not yet
    assert deltas(sqlite_store) > 0
    folder.maybe_fold(110.0)
    assert deltas(sqlite_store) == 0
    sqlite_store.close()  # a store that fails: logged, not raised
    sqlite_store.engine.dispose()
    with sqlite_store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE dgs_condition_deltas")
    folder.maybe_fold(120.0)
    assert "folding the condition tally failed" in caplog.text


def test_a_large_batch_of_runtime_schedules_is_folded_at_once(
    sqlite_store: SqlScheduleStore,
) -> None:
    """A bulk upsert (the ANALYZE's threshold or more) folds its steps, so
    counts do not read them one by one before beat's first fold."""
    specs = [PeriodicSpec(task="t", configuration=str(i), scheduling_period=M) for i in range(1000)]
    sqlite_store.upsert_runtime(specs, T0)
    assert deltas(sqlite_store) == 0
    sqlite_store.upsert_runtime([*specs[:1], PeriodicSpec(task="u", scheduling_period=M)], T0)
    assert deltas(sqlite_store) > 0  # a small one waits for beat's
