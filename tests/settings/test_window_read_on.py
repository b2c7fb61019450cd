"""``dgs_schedule_window_read_on``: validation, and how far a full window
reads on for the certainty rule."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.window import DEFAULT_WINDOW_READ_ON, ScheduleBounds
from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def test_default_and_accepted_values() -> None:
    assert DgsSettings().schedule_window_read_on == DEFAULT_WINDOW_READ_ON == 10.0
    assert DgsSettings().order_policy.window_read_on == 10.0
    conf = DgsSettings.from_conf({"dgs_schedule_window_read_on": 3})
    assert conf.order_policy.window_read_on == 3
    assert DgsSettings.from_conf({"dgs_schedule_window_read_on": 0}).schedule_window_read_on == 0
    assert (
        DgsSettings.from_conf({"dgs_schedule_window_read_on": None}).schedule_window_read_on is None
    )


@pytest.mark.parametrize("bad", [-1, "far", math.inf, math.nan, True])
def test_bad_values_name_the_setting(bad: object) -> None:
    with pytest.raises(SettingsError, match="dgs_schedule_window_read_on"):
        DgsSettings.from_conf({"dgs_schedule_window_read_on": bad})


def full(read_on: float | None) -> ScheduleBounds:
    bounds = ScheduleBounds(10, timedelta(hours=1), read_on)
    read = bounds.next_read(NOW, 0)
    assert read is not None
    bounds.after_read(read, [(NOW, NOW, f"s{i}") for i in range(10)])
    assert bounds.full
    return bounds


def test_the_rule_reads_on_up_to_its_share_of_the_size() -> None:
    assert full(1.0).reads_on(19)
    assert not full(1.0).reads_on(20)
    assert not full(0.0).reads_on(0), "0: the picks are not checked"
    assert full(None).reads_on(10**9)
    not_full = ScheduleBounds(10, timedelta(hours=1))
    assert not not_full.reads_on(0), "nothing read: not full, nothing to check"
    with pytest.raises(ValueError, match="read-on"):
        ScheduleBounds(10, timedelta(hours=1), -1.0)
