"""The status page's reads of the kept columns, on every backend: a word of
the task name as a filter, the counts by time to ERROR, and the failing
schedules most recently ended."""

from __future__ import annotations

from datetime import timedelta

from celery_dgs.core.condition import Level
from celery_dgs.core.kept_condition import condition_at
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store import ScheduleStore
from celery_dgs.store.selection import Selection

from .conftest import T0, periodic, start

H = timedelta(hours=1)
M = timedelta(minutes=1)
BOUNDS = (H, 6 * H, 24 * H)


def test_a_word_of_the_task_selects_in_the_store(store: ScheduleStore) -> None:
    store.sync(
        [periodic("app.Scrape", "1"), periodic("app.scrape", "2"), periodic("x%_y", "3")], T0
    )

    def names(word: str, **kw: object) -> list[str]:
        selection = Selection(task_word=word, **kw)  # type: ignore[arg-type]
        return sorted(s.name for s in store.status_rows(T0, selection))

    assert names("scrape") == ["app.scrape@2"]  # case-sensitive
    assert names("app.") == ["app.Scrape@1", "app.scrape@2"]
    assert names("%_") == ["x%_y@3"]  # LIKE's characters are plain ones
    assert names("_") == ["x%_y@3"]
    assert names("nothing") == []
    assert names("app", patterns=("*@1",)) == ["app.Scrape@1"]
    assert store.condition_counts(T0, Selection(task_word="app")) == {("OK", "ok"): 2}
    assert [s.name for s in store.status_rows(T0, Selection(task_word="app"), limit=1)] == [
        "app.Scrape@1"
    ]


def test_counts_by_time_to_error_follow_the_kept_rule(store: ScheduleStore) -> None:
    """Each bucket holds the schedules the kept rule (``condition_at``) puts
    there, row by row, at every moment."""
    specs = [
        PeriodicSpec(task="w", configuration=str(i), scheduling_period=(i + 1) * 2 * H)
        for i in range(10)
    ]
    store.sync(specs, T0)
    store.sync(specs[:9], T0, invalid={"w@9": "scheduling_period: bad"})  # ERROR, no moment
    for i in range(0, 8, 3):
        start(store, f"w@{i}", f"r{i}", token=1, at=T0 + i * M)
        outcome = "failure" if i % 2 else "success"
        store.record_run_end(run_id=f"r{i}", outcome=outcome, ended_at=T0 + i * M + M)
    names = [s.name for s in specs]
    for minutes in (0, 30, 119, 121, 300, 1000, 3000):
        at = T0 + minutes * M
        want = [0] * (len(BOUNDS) + 2)
        for name in names:
            kept = store.kept_times(name).condition
            level, _ = condition_at(kept, at)
            if level is Level.ERROR:
                want[0] += 1
            elif kept.error_at is not None:
                left = kept.error_at - at
                want[1 + sum(1 for bound in BOUNDS if left >= bound)] += 1
        got = store.time_to_error_counts(at, BOUNDS)
        assert got == want, minutes
        counts = store.condition_counts(at, Selection())
        assert got[0] == sum(n for (level, _), n in counts.items() if level == "ERROR")


def test_failing_schedules_latest_end_first(store: ScheduleStore) -> None:
    store.sync([periodic("f", str(i), hours=1) for i in range(5)], T0)
    for i, outcome in enumerate(["failure", "success", "failure", "failure", "success"]):
        start(store, f"f@{i}", f"r{i}", token=1, at=T0 + i * M)
        store.record_run_end(run_id=f"r{i}", outcome=outcome, ended_at=T0 + i * M + M)
    assert [s.name for s in store.failing_schedules(10)] == ["f@3", "f@2", "f@0"]
    assert [s.name for s in store.failing_schedules(2)] == ["f@3", "f@2"]
    start(store, "f@3", "r5", token=2, at=T0 + 10 * M)  # a good run ends its failures
    store.record_run_end(run_id="r5", outcome="success", ended_at=T0 + 11 * M)
    assert [s.name for s in store.failing_schedules(10)] == ["f@2", "f@0"]
    store.set_paused("f@2", True)  # paused: still active, still failing
    store.sync([periodic("f", str(i), hours=1) for i in (1, 2, 3, 4)], T0 + 12 * M)
    assert [s.name for s in store.failing_schedules(10)] == ["f@2"]  # f@0 left the declarations
