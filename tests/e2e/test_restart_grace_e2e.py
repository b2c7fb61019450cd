"""End to end: after Redis restarts without its data, ``celery dgs status``
says that the restart grace holds the schedules that ran before, and until
when; once the grace is over the schedule runs again and the line is gone
(a real Redis server of the test's own, killed and restarted; real beat and
worker; the real CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from celery_dgs.embedded import RedisServerProcess
from tests.e2e.harness import Cluster, wait_for
from tests.e2e.test_cli_e2e import dgs

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PING_TIMEOUT, STEAL_DELAY = 6.0, 3.0


def grace_of(cluster: Cluster) -> dict[str, Any] | None:
    done = dgs(cluster, "status", "--json")
    assert done.returncode in (0, 1), done.stderr
    grace: dict[str, Any] | None = json.loads(done.stdout)["redis_restart_grace"]
    return grace


def starts(cluster: Cluster) -> list[dict[str, Any]]:
    return [e for e in cluster.starts() if e["name"] == "long_run"]


def test_status_names_the_restart_grace_while_it_holds_the_schedule(
    tmp_path: Path, fresh_redis_server: RedisServerProcess
) -> None:
    cluster = Cluster(
        tmp_path,
        fresh_redis_server.url,
        ["long_run"],
        E2E_PING_TIMEOUT=str(PING_TIMEOUT),
        E2E_STEAL_DELAY=str(STEAL_DELAY),
    )
    try:
        cluster.start_worker("w1", "node1")
        cluster.start_beat()
        wait_for(lambda: starts(cluster), 30, "the first run of long_run")
        # A first use of Redis holds nothing: no grace is shown, though the
        # server is new since the first grant.
        assert grace_of(cluster) is None

        fresh_redis_server.restart(kill=True)
        grace = wait_for(lambda: grace_of(cluster), 30, "status to show the restart grace")
        assert 0 < grace["seconds_left"] <= PING_TIMEOUT + STEAL_DELAY
        text = dgs(cluster, "status").stdout
        line = next(x for x in text.splitlines() if x.startswith("Redis restart grace:"))
        assert "schedules that ran before and whose lease data it lacks get no new lease" in line
        assert "ping_timeout + steal_delay" in line
        assert not starts(cluster), "no run before the grace ends"

        wait_for(lambda: starts(cluster), 30, "the run after the grace")
        assert grace_of(cluster) is None
        assert "Redis restart grace" not in dgs(cluster, "status").stdout
    finally:
        cluster.stop_all()
