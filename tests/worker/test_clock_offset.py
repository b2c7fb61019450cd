"""A host's clock against Redis's: the measure, what each gap is said to do,
and how often it is logged."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest

from celery_dgs.clock_offset import (
    OffsetWatch,
    beat_offset_text,
    measured_offset,
    worker_offset_text,
)

LOG = logging.getLogger("tests.clock_offset")


def test_the_offset_is_the_midpoint_of_the_local_readings_minus_redis() -> None:
    redis_now = datetime(2030, 1, 1, tzinfo=timezone.utc)
    t = redis_now.timestamp()
    assert measured_offset(t + 59.9, redis_now, t + 60.1) == pytest.approx(60.0)
    assert measured_offset(t - 3.0, redis_now, t - 2.0) == pytest.approx(-2.5)


def test_what_a_gap_does_is_said_for_each_side() -> None:
    assert worker_offset_text(412.34, 300).startswith(
        "this worker's clock is 6m52.3s ahead of Redis's (TIME, the clock of leases and run "
        "records): Celery discards beat's dispatches as expired by this clock "
        "(dgs_dispatch_timeout 5m after beat sent them, by beat's clock), so it discards "
        "every dispatch as expired on arrival"
    )
    assert "expired by this clock (dgs_dispatch_timeout 5m after beat sent them, by beat's " in (
        worker_offset_text(60, 300)
    )
    assert ", 4m after beat sent them, not 5m; run NTP" in worker_offset_text(60, 300)
    assert worker_offset_text(-2, 300).startswith("this worker's clock is 2s behind Redis's")
    assert "keeps dispatches past their expiry" in worker_offset_text(-2, 300)
    assert beat_offset_text(-1.5).startswith(
        "beat's clock is 1.5s behind Redis's (TIME, the clock of leases and run records): it "
        "judges deadlines that much late"
    )


def test_a_notable_offset_is_logged_once_until_it_moves_or_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    watch = OffsetWatch(LOG)
    watch.measured(0.2, "small")
    assert watch.notable() is None
    assert caplog.records == []
    watch.measured(5.0, "five ahead")
    watch.measured(5.4, "still five")
    assert watch.notable() == 5.4
    watch.measured(7.0, "seven", error=True)
    watch.measured(0.1, "fixed")
    assert watch.notable() is None
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "celery-dgs: five ahead"),
        ("ERROR", "celery-dgs: seven"),
        ("INFO", "celery-dgs: the clock is within 1s of Redis's again"),
    ]
