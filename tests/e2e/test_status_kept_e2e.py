"""End to end: ``celery dgs status`` reads the conditions the store keeps, and
they follow the real runs of a live beat and worker (real Redis server,
SQLite store, the real ``celery -A tests.e2e.proj dgs status`` command)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from celery_dgs.core.kept_condition import kept_times
from celery_dgs.core.spec_build import make_spec
from tests.e2e.harness import Cluster, wait_for
from tests.e2e.test_cli_e2e import dgs, status

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def head(cluster: Cluster, *args: str) -> str:
    return dgs(cluster, "status", *args).stdout.splitlines()[0]


def test_status_shows_the_kept_condition_change_with_the_runs(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(["p10", "cli_fail"])
    store = cluster.store()
    p10 = make_spec(
        "periodic",
        task="e2e.p10",
        scheduling_period=timedelta(seconds=100),
        cooldown_duration=timedelta(seconds=60),
    )
    store.sync([p10], datetime.now(timezone.utc) - timedelta(hours=1))
    assert dgs(cluster, "sync").returncode == 0

    code, rows = status(cluster, "e2e.p10")
    assert code == 1
    assert (rows["e2e.p10"]["condition"], rows["e2e.p10"]["reason"]) == (
        "ERROR",
        "never_succeeded",
    )
    assert "1 schedule (1 ERROR, 0 WARNING, 0 OK)" in head(cluster, "e2e.p10")

    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(lambda: store.get("e2e.p10").stats.last_good_end_at, 60, "p10 to succeed")
    wait_for(lambda: store.get("e2e.cli_fail").stats.failure_count, 60, "cli_fail to fail")

    # The run's end wrote p10's kept condition: OK until its new deadline.
    code, rows = status(cluster, "e2e.p10")
    assert code == 0
    row = rows["e2e.p10"]
    assert (row["condition"], row["reason"]) == ("OK", "ok")
    stored = store.get("e2e.p10")
    kept = store.kept_times("e2e.p10")
    assert kept == kept_times(stored.spec, stored.stats, datetime.now(timezone.utc))
    assert kept.condition.error_at == datetime.fromisoformat(row["error_at"])
    assert "1 schedule (0 ERROR, 0 WARNING, 1 OK)" in head(cluster, "e2e.p10")

    # The failing one is counted and listed in ERROR, filtered in the store.
    code, errors = status(cluster, "--condition", "ERROR")
    assert code == 1
    assert list(errors) == ["e2e.cli_fail"]
    assert errors["e2e.cli_fail"]["failure_count"] >= 1
    assert "2 schedules (1 ERROR, 0 WARNING, 1 OK)" in head(cluster)
