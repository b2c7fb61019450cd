"""A worker whose retry settings differ from the ones beat adopted says so
(celery_dgs/worker/retry_settings.py): one warning per distinct pair, the
store's settings read at the start and again at most every ``RECHECK_S``
after failing runs, on a real SQLite store and Redis-compatible server; an
unreadable store or none recorded gives no warning. The worker processes'
logs are in tests/e2e/test_retry_warning_e2e.py."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from celery_dgs.core.timing import DEFAULT_RETRY_LADDER, RetryLadder
from celery_dgs.runtime import Runtime
from celery_dgs.settings import DgsSettings
from celery_dgs.store.kept_ladder import ladder_fingerprint
from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.worker import retry_settings
from celery_dgs.worker.retry_settings import (
    RECHECK_S,
    LadderWatch,
    check_after_failure,
    check_at_start,
    mismatch_line,
    stored_fingerprint_of,
)
from celery_dgs.worker.runs import supervised_run
from tests.worker.helpers import SPEC, Request, in_thread

MINE = RetryLadder((timedelta(seconds=60),))
BEAT = DEFAULT_RETRY_LADDER
OTHER = RetryLadder((timedelta(seconds=5), timedelta(seconds=30)), 0.5)

WARNING = (
    "celery-dgs: this worker's retry settings dgs_retry_backoff=(60,), "
    "dgs_retry_duration_fraction=1 differ from beat's dgs_retry_backoff=(300, 3600, 14400), "
    "dgs_retry_duration_fraction=1 (the store's kept settings): the failing runs it ends "
    "wait its steps, not beat's; give beat and the workers the same settings"
)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountedReads:
    """The store's fingerprint, read through ``stored_fingerprint_of``, counted."""

    def __init__(self, store: SqlScheduleStore) -> None:
        self.store, self.count = store, 0

    def __call__(self) -> str | None:
        self.count += 1
        return stored_fingerprint_of(self.store)


@pytest.fixture(autouse=True)
def no_watches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new worker process: no watch, nothing warned."""
    monkeypatch.setattr(retry_settings, "_watches", {})


@pytest.fixture
def worker_rt(redis_url: str, db_path: Path) -> Iterator[Runtime]:
    """A worker's runtime with ``dgs_retry_backoff = (60,)``, its store holding :data:`SPEC`."""
    settings = DgsSettings.from_conf(
        {
            "dgs_redis_url": redis_url,
            "dgs_database_url": f"sqlite:///{db_path}",
            "dgs_retry_backoff": [60],
        }
    )
    rt = Runtime(settings)
    rt.store.insert_if_missing(SPEC, rt.leases.now())
    yield rt
    rt.close()


def beat_adopts(rt: Runtime, ladder: tuple[timedelta, ...]) -> None:
    """Beat's start on the worker's store: it adopts ``ladder``."""
    beat = SqlScheduleStore.open(rt.settings.database_url)
    beat.adopt_retry_ladder(ladder)
    beat.close()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def fail(rt: Runtime) -> None:
    """One run of :data:`SPEC` whose body raises, ended and recorded."""

    def boom() -> None:
        raise RuntimeError("boom")

    box = in_thread(lambda: supervised_run(rt, SPEC, Request(), boom, (), {}))
    assert isinstance(box.get("raised"), RuntimeError)
    assert rt.store.runs(SPEC.name)[0].outcome == "failure"


def succeed(rt: Runtime) -> None:
    box = in_thread(lambda: supervised_run(rt, SPEC, Request(), lambda: 1, (), {}))
    assert box.get("value") == 1


def test_the_warning_names_both_settings() -> None:
    assert mismatch_line(MINE, ladder_fingerprint(BEAT)) == WARNING


def test_a_watch_reads_at_most_every_interval_and_warns_once_per_pair(
    sqlite_store: SqlScheduleStore,
) -> None:
    clock, reads = Clock(), CountedReads(sqlite_store)
    watch = LadderWatch(MINE, monotonic=clock, every_s=120)
    assert watch.check(reads) is None  # beat never adopted any settings here
    sqlite_store.adopt_retry_ladder(BEAT)
    clock.now += 119
    assert (watch.check(reads), reads.count) == (None, 1)  # not read again yet
    assert watch.check(reads, force=True) == WARNING
    assert reads.count == 2
    clock.now += 120
    assert watch.check(reads) is None  # the same pair again: warned already
    assert reads.count == 3
    sqlite_store.adopt_retry_ladder(OTHER)  # beat restarted with other settings
    clock.now += 120
    assert watch.check(reads) == mismatch_line(MINE, ladder_fingerprint(OTHER))
    assert "beat's dgs_retry_backoff=(5, 30), dgs_retry_duration_fraction=0.5" in (
        mismatch_line(MINE, ladder_fingerprint(OTHER))
    )
    sqlite_store.adopt_retry_ladder(MINE)
    clock.now += 120
    assert watch.check(reads) is None
    sqlite_store.adopt_retry_ladder(BEAT)
    clock.now += 120
    assert watch.check(reads) is None  # that pair was warned about
    assert reads.count == 6


def test_the_same_settings_give_no_warning(sqlite_store: SqlScheduleStore) -> None:
    sqlite_store.adopt_retry_ladder(MINE)
    watch = LadderWatch(MINE, monotonic=Clock())
    assert watch.check(CountedReads(sqlite_store), force=True) is None


def test_an_unreadable_store_is_a_debug_line_and_waits_the_interval(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG, logger="celery_dgs")
    clock, calls = Clock(), []
    bare = f"sqlite:///{tmp_path / 'bare.sqlite3'}"  # never migrated: no dgs_kept_settings

    def read() -> str | None:
        calls.append(clock.now)
        return retry_settings.read_fingerprint_at(bare)

    watch = LadderWatch(MINE, monotonic=clock, every_s=120)
    assert watch.check(read) is None
    assert watch.check(read) is None
    assert len(calls) == 1
    assert warnings(caplog) == []
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("celery-dgs: the store's retry settings could not be read")
    assert "dgs_kept_settings" in line


def test_a_check_in_progress_is_not_waited_for(sqlite_store: SqlScheduleStore) -> None:
    sqlite_store.adopt_retry_ladder(BEAT)
    watch = LadderWatch(MINE, monotonic=Clock())
    inner: list[str | None] = []

    def read() -> str | None:
        inner.append(watch.check(lambda: ladder_fingerprint(BEAT), force=True))
        return ladder_fingerprint(BEAT)

    assert watch.check(read, force=True) == WARNING
    assert inner == [None]


def test_the_worker_warns_at_start_once_then_after_failing_runs_when_beat_changed(
    worker_rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="celery_dgs")
    clock = Clock()
    key = (worker_rt.settings.database_url, ladder_fingerprint(MINE))
    retry_settings._watches[key] = LadderWatch(MINE, monotonic=clock)
    beat_adopts(worker_rt, BEAT)
    check_at_start(worker_rt.settings)
    assert warnings(caplog) == [WARNING]
    fail(worker_rt)
    fail(worker_rt)
    assert warnings(caplog) == [WARNING]
    beat_adopts(worker_rt, OTHER)
    fail(worker_rt)  # read again after RECHECK_S only
    assert warnings(caplog) == [WARNING]
    clock.now += RECHECK_S
    succeed(worker_rt)  # a good run's end does not read the store's settings
    assert warnings(caplog) == [WARNING]
    fail(worker_rt)
    assert warnings(caplog) == [WARNING, mismatch_line(MINE, ladder_fingerprint(OTHER))]
    assert worker_rt.store.retry_ladder == MINE  # it keeps writing with its own


def test_no_warning_when_beat_recorded_no_settings_or_the_store_is_not_migrated(
    worker_rt: Runtime, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO, logger="celery_dgs")
    check_at_start(worker_rt.settings)
    fail(worker_rt)
    bare = f"sqlite:///{tmp_path / 'bare.sqlite3'}"
    check_at_start(dataclasses.replace(worker_rt.settings, database_url=bare))
    assert warnings(caplog) == []


def test_a_failing_run_of_a_worker_with_beats_settings_gives_no_warning(
    worker_rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="celery_dgs")
    beat_adopts(worker_rt, MINE)
    check_at_start(worker_rt.settings)
    fail(worker_rt)
    check_after_failure(worker_rt)
    assert warnings(caplog) == []
