"""What beat's log says as it starts, in a real ``celery beat``: the banner
Celery prints before the scheduler loads anything does not claim 0
schedules, the load's own line gives the count, and alembic's lines do not
open the log (one celery-dgs line says the schema was upgraded)."""

from __future__ import annotations

import pytest

from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def test_beats_start_up_log(cluster_factory) -> None:
    cluster = cluster_factory(["p10", "p20"])
    cluster.start_beat()
    start = wait_for(
        lambda: (log := cluster.log_since("beat", 0)) and "leading as" in log and log,
        30,
        "beat to lead",
    )
    assert "celery-dgs deadline scheduler: loads the stored schedules after this banner" in start
    assert " 0 schedules" not in start, start
    assert "celery-dgs beat: loaded 2 schedules and 0 deferred checks" in start, start
    assert "alembic" not in start, start
    assert "celery-dgs: created the store's schema at revision " in start, start
