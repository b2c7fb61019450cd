"""The status filters by pool and by a word of the task, on every backend:
their rows are the unfiltered rows (most urgent first) that match, in the
same order, paged the same, and their counts those of the same selection
read as one query over every name (a ``*`` pattern): a schedule without a
pool is in the default pool, and a word may match several tasks."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store import ScheduleStore, sql_status, sql_status_parts
from celery_dgs.store.records import StoredSchedule
from celery_dgs.store.selection import Selection

from .conftest import T0, start

H = timedelta(hours=1)
M = timedelta(minutes=1)
TASKS = ("p.scrape", "p.scrape_v2", "q.Scrape", "q.scrape.deep", "r.index")
POOLS = (None, "celery", "slow", "fast")
LATER = (T0 + 30 * M, T0 + 2 * H + M, T0 + 5 * H)


@pytest.fixture
def mixed(store: ScheduleStore) -> ScheduleStore:
    """60 schedules: each task in each pool (``None``: none given, and
    ``celery`` given as such), periods of 1 to 4 h; a third ran once, some
    of those failed."""
    specs = [
        PeriodicSpec(
            task=TASKS[i % len(TASKS)],
            configuration=f"c{i:02d}",
            scheduling_period=(1 + i % 4) * H,
            pool=POOLS[(i // len(TASKS)) % len(POOLS)],
        )
        for i in range(60)
    ]
    store.sync(specs, T0)
    for i, spec in enumerate(specs[::3]):
        start(store, spec.name, f"r{i}", token=i + 1, at=T0 + M)
        outcome = "failure" if i % 4 == 0 else "success"
        store.record_run_end(run_id=f"r{i}", outcome=outcome, ended_at=T0 + 2 * M)
    return store


def _pool(row: StoredSchedule, default: str) -> str:
    assert row.spec is not None
    return row.spec.pool or default


def _expected(store: ScheduleStore, now: datetime, selection: Selection) -> list[str]:
    """The unfiltered rows of the selected conditions that match, in order."""
    every = Selection(conditions=selection.conditions)
    return [
        row.name
        for row in store.status_rows(now, every)
        if (not selection.pools or _pool(row, selection.default_pool) in selection.pools)
        and selection.task_word in row.task
    ]


SELECTIONS = (
    Selection(pools=("celery",)),
    Selection(pools=("celery",), default_pool="other"),
    Selection(pools=("other",), default_pool="other"),
    Selection(pools=("slow", "celery")),
    Selection(pools=("fast",), conditions=("error",)),
    Selection(pools=("nowhere",)),
    Selection(task_word="scrape"),
    Selection(task_word="Scrape"),
    Selection(task_word="scrape", conditions=("ok", "warning")),
    Selection(task_word="index"),
    Selection(task_word="nothing"),
    Selection(task_word="scrape", pools=("slow",)),
    Selection(task_word="p.", pools=("celery", "fast")),
)


@pytest.mark.parametrize("selection", SELECTIONS, ids=repr)
def test_a_filter_reads_the_rows_and_counts_it_selects(
    mixed: ScheduleStore, selection: Selection
) -> None:
    levels = set()
    for now in LATER:
        expected = _expected(mixed, now, selection)
        assert [r.name for r in mixed.status_rows(now, selection)] == expected
        for offset, limit in ((0, 1), (0, 7), (5, 7), (20, 50), (100, 5)):
            page = mixed.status_rows(now, selection, limit=limit, offset=offset)
            assert [r.name for r in page] == expected[offset : offset + limit]
        counts = mixed.condition_counts(now, selection)
        assert sum(counts.values()) == len(expected)
        one_query = replace(selection, patterns=("*",))
        assert counts == mixed.condition_counts(now, one_query)
        levels |= {level for level, _ in counts}
    if not selection.conditions and len(_expected(mixed, LATER[-1], selection)) > 1:
        assert len(levels) >= 2, levels  # the fleet moves through conditions


def test_a_schedule_without_a_pool_is_in_the_default_one(mixed: ScheduleStore) -> None:
    now = T0 + 2 * H + M
    unnamed = {r.name for r in mixed.status_rows(now, Selection()) if r.spec and not r.spec.pool}
    named = {r.name for r in mixed.status_rows(now, Selection()) if r.spec and r.spec.pool}
    assert len(unnamed) == 15
    in_default = {r.name for r in mixed.status_rows(now, Selection(pools=("celery",)))}
    assert unnamed < in_default  # and those given ``celery`` as such
    assert len(in_default) == 30
    elsewhere = Selection(pools=("elsewhere",), default_pool="elsewhere")
    assert {r.name for r in mixed.status_rows(now, elsewhere)} == unnamed
    assert sum(mixed.condition_counts(now, elsewhere).values()) == 15
    assert not unnamed & {r.name for r in mixed.status_rows(now, Selection(pools=("slow",)))}
    assert named


def test_a_word_matching_several_tasks_reads_them_all_in_one_order(mixed: ScheduleStore) -> None:
    now = T0 + 5 * H
    rows = list(mixed.status_rows(now, Selection(task_word="scrape")))
    assert {r.task for r in rows} == {"p.scrape", "p.scrape_v2", "q.scrape.deep"}
    assert len(rows) == 36
    assert [r.name for r in rows] == _expected(mixed, now, Selection(task_word="scrape"))
    counts = mixed.condition_counts(now, Selection(task_word="scrape"))
    assert sum(counts.values()) == 36
    # checks are not schedules: a check's task does not make it selected
    assert all("@check:" not in r.name for r in rows)


def test_many_values_are_read_in_several_statements_merged(
    mixed: ScheduleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_status_parts, "SQLITE_ARMS", 2)  # SQLite: 3 tasks in 2 statements
    monkeypatch.setattr(sql_status, "NAMED_ROWS_PER_QUERY", 3)  # a page's rows: 3 statements
    now = T0 + 2 * H + M
    for selection in (Selection(task_word="scrape"), Selection(pools=("celery", "slow"))):
        expected = _expected(mixed, now, selection)
        assert [r.name for r in mixed.status_rows(now, selection)] == expected
        page = mixed.status_rows(now, selection, limit=7, offset=5)
        assert [r.name for r in page] == expected[5:12]


COUNTED = (
    *SELECTIONS,
    Selection(),
    Selection(conditions=("error",)),
    Selection(conditions=("warning", "ok")),
    Selection(patterns=("p.scrape@*",)),
    Selection(patterns=("c1",), conditions=("ok",)),
    Selection(names=("p.scrape@c00", "r.index@c04", "nowhere")),
)


@pytest.mark.parametrize("selection", COUNTED, ids=repr)
def test_a_bounded_count_is_the_rows_up_to_its_bound(
    mixed: ScheduleStore, selection: Selection
) -> None:
    for now in LATER:
        listed = len(list(mixed.status_rows(now, selection)))
        for at_most in (0, 1, 3, listed, listed + 1, 1_000):
            assert mixed.count_selected(now, selection, at_most) == min(listed, at_most), at_most
