"""SheddingIndex (dgs_overload_policy = "shed") against plain deadline order (pure)."""

from __future__ import annotations

import pytest

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.overload import RUN_REQUEST_PRIORITY_S, SheddingIndex, make_index
from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings


def fill(index: DeadlineIndex) -> None:
    index.upsert("late", 0, 90)  # should_start_by passed at now = 100
    index.upsert("due_soon", 0, 150)  # on time, due within the horizon (100 s)
    index.upsert("early", 0, 5000)  # on time, far ahead: an early run
    index.upsert("request", 100, 100 - RUN_REQUEST_PRIORITY_S)  # operator run request


def drain(index: DeadlineIndex, now: float) -> list[str]:
    out = []
    while (name := index.pop(now)) is not None:
        out.append(name)
    return out


def test_greedy_serves_the_lowest_should_start_by_first() -> None:
    index = make_index("greedy")
    fill(index)
    assert drain(index, 100) == ["request", "late", "due_soon", "early"]


def test_shed_serves_on_time_due_soon_then_late_then_early() -> None:
    index = SheddingIndex(horizon_s=100)
    fill(index)
    assert drain(index, 100) == ["request", "due_soon", "late", "early"]


def test_shed_pop_placeable_skips_without_losing_entries() -> None:
    index = SheddingIndex(horizon_s=100)
    fill(index)
    assert index.pop_placeable(100, lambda n: n == "late") == "late"
    assert sorted(index) == ["due_soon", "early", "request"]
    assert index.ready_count(100) == 3
    assert drain(index, 100) == ["request", "due_soon", "early"]


def test_a_late_entry_upserted_again_is_judged_by_its_new_times() -> None:
    index = SheddingIndex(horizon_s=100)
    index.upsert("a", 0, 90)
    index.upsert("b", 0, 120)
    assert index.peek(100) == "b"  # a is late
    assert index.late_count(100) == 1
    index.upsert("a", 0, 110)  # a ran: on time again
    assert drain(index, 100) == ["a", "b"]


def test_setting_validation() -> None:
    assert DgsSettings(overload_policy="shed").overload_policy == "shed"
    with pytest.raises(SettingsError, match="dgs_overload_policy"):
        DgsSettings(overload_policy="drop")
    with pytest.raises(ValueError, match="overload policy"):
        make_index("drop")
