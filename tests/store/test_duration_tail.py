"""The run-time tail (``ScheduleStats.duration_tail``): every store records it
with a good run's end, by the core's rule, and reads it back on every path; a
hand-edited value is reported with the schedule and the field and read as
unknown."""

from __future__ import annotations

import logging
import math
from datetime import timedelta

import pytest
from sqlalchemy import text

from celery_dgs.core.stats import TAIL_INITIAL_RATIO, TAIL_QUANTILE, TAIL_STEP
from celery_dgs.store import ScheduleStore, SqlScheduleStore

from .conftest import T0, periodic, start

S = timedelta(seconds=1)
UP, DOWN = math.exp(TAIL_STEP * TAIL_QUANTILE), math.exp(-TAIL_STEP * (1 - TAIL_QUANTILE))


def run(store: ScheduleStore, name: str, i: int, seconds: float, outcome: str = "success") -> None:
    at = T0 + timedelta(hours=i)
    start(store, name, f"r{i}", token=i + 1, at=at)
    store.record_run_end(run_id=f"r{i}", outcome=outcome, ended_at=at + seconds * S)


def test_good_runs_move_the_tail_and_every_read_path_returns_it(store: ScheduleStore) -> None:
    store.sync([periodic("a")], T0)
    run(store, "a", 0, 10)
    assert store.get("a").stats.duration_tail is None  # no average before the first run
    run(store, "a", 1, 20)  # 20 / 10 = 2.0: not above 2.0, one step down
    assert store.get("a").stats.duration_tail == pytest.approx(TAIL_INITIAL_RATIO * DOWN)
    run(store, "a", 2, 50)  # 50 / 13.7 = 3.65: above it, one step up
    expected = TAIL_INITIAL_RATIO * DOWN * UP
    got = store.get("a").stats
    assert got.duration_tail == pytest.approx(expected)
    run(store, "a", 3, 5, outcome="failure")  # only good runs move it
    run(store, "a", 4, 5, outcome="stolen")
    got = store.get("a").stats
    assert got.duration_tail == pytest.approx(expected)
    [changed] = [s for s in store.changes_since(0)[0] if s.name == "a"]  # the loader's path
    assert changed.stats == got
    [loaded] = [s for s in store.load_active()[0] if s.name == "a"]
    assert loaded.stats == got


def test_a_hand_edited_tail_is_reported_and_read_as_unknown(
    sql_store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    store = sql_store
    store.sync([periodic("t.good"), periodic("t.bad")], T0)
    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(text("UPDATE dgs_schedules SET duration_tail = -3.5 WHERE name = 't.bad'"))
    with caplog.at_level(logging.ERROR, logger="celery_dgs.store"):
        got = store.get("t.bad")
        [loaded] = [s for s in store.load_active()[0] if s.name == "t.bad"]
    assert got.spec is not None  # still served: the margin falls back to the deviations
    assert got.stats.duration_tail is None
    assert loaded.stats.duration_tail is None
    assert loaded.spec is not None
    assert "'t.bad': duration_tail: expected a number above 0, got -3.5" in caplog.text
    run(store, "t.bad", 0, 10)
    run(store, "t.bad", 1, 10)  # recording good runs stores a valid value again
    assert store.get("t.bad").stats.duration_tail == pytest.approx(TAIL_INITIAL_RATIO * DOWN)
