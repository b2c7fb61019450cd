"""What beat's fewest_errors order makes wait, in Redis (celery_dgs/overload_board.py),
on a real server, and the line ``status`` prints of it."""

from __future__ import annotations

import logging
import math

import pytest
import redis

from celery_dgs.core.fewest_errors import Waiting
from celery_dgs.keys import KeySpace
from celery_dgs.ops.leader import overload_text
from celery_dgs.overload_board import OverloadBoard, OverloadReport

REPORT = OverloadReport(
    overloaded=True,
    waiting_count=7,
    waiting=(Waiting("dear", 0.11, 1_800_000_000.0), Waiting("never", 0.5, math.inf)),
    pools=("prio",),
)


def test_the_leader_writes_the_report_and_status_reads_it(
    client: redis.Redis, keys: KeySpace
) -> None:
    board = OverloadBoard(client, keys)
    assert board.read() is None
    board.write(REPORT)
    assert board.read() == REPORT
    assert 0 < client.pttl(keys.beat_overload()) <= 15_000


def test_a_malformed_report_is_none_with_a_warning(
    client: redis.Redis, keys: KeySpace, caplog: pytest.LogCaptureFixture
) -> None:
    client.set(keys.beat_overload(), '{"overloaded": true}')
    with caplog.at_level(logging.WARNING):
        assert OverloadBoard(client, keys).read() is None
    assert "malformed" in caplog.text


def test_status_names_the_schedules_that_wait_and_when_the_floor_serves_them() -> None:
    text = overload_text(REPORT, shown=1)
    assert text is not None
    assert "overload: pool prio's demand exceeds its live slots" in text
    assert "fewest_errors makes 7 schedule(s) in ERROR wait" in text
    assert "dear (0.11 s per slot-second, served by 08:00:00 UTC)" in text
    assert "and 6 more" in text
    assert overload_text(None) is None
    assert overload_text(OverloadReport(False, 0)) is None
    shared = OverloadReport(True, 0, pools=("a", "b"))
    assert overload_text(shared) == (
        "overload: the demand of pools a, b exceeds their live slots; "
        "fewest_errors has no schedule in ERROR waiting"
    )


def test_a_report_without_pools_reads_as_the_whole_fleets(
    client: redis.Redis, keys: KeySpace
) -> None:
    """A report written without ``pools`` (by an earlier beat) reads with none."""
    client.set(keys.beat_overload(), '{"overloaded": true, "waiting_count": 0, "waiting": []}')
    report = OverloadBoard(client, keys).read()
    assert report == OverloadReport(True, 0)
    assert overload_text(report) == (
        "overload: the demand exceeds the live slots; "
        "fewest_errors has no schedule in ERROR waiting"
    )
