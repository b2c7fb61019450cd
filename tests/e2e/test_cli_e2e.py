"""End to end: the real ``celery -A tests.e2e.proj dgs ...`` commands against a
live beat and worker (real Redis server, SQLite store)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from celery_dgs.core.spec_build import make_spec
from tests.e2e.harness import ROOT, Cluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SCHEDULES = ["p10", "p20", "p30", "p40", "cli_long", "cli_fail"]


def celery_command() -> list[str]:
    """The installed ``celery`` script next to this interpreter (its entry point
    loads the ``dgs`` plugin), else ``python -m celery``."""
    script = Path(sys.executable).with_name("celery")
    return [str(script)] if script.exists() else [sys.executable, "-m", "celery"]


def dgs(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*celery_command(), "-A", cluster.app_module, "dgs", *args],
        cwd=ROOT,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def status(cluster: Cluster, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    done = dgs(cluster, "status", "--json", *args)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, {row["name"]: row for row in json.loads(done.stdout)["schedules"]}


def test_cli_against_a_live_beat_and_worker(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(SCHEDULES)
    store = cluster.store()
    # e2e.p10 was stored an hour ago and never ran: ERROR (period 100 s).
    p10 = make_spec(
        "periodic",
        task="e2e.p10",
        scheduling_period=timedelta(seconds=100),
        cooldown_duration=timedelta(seconds=60),
    )
    store.sync([p10], datetime.now(timezone.utc) - timedelta(hours=1))

    check = dgs(cluster, "check")
    assert check.returncode == 0, check.stderr
    # Advice, not errors: the test project's periods (1-300 s) are shorter than the
    # default 5-minute retry backoff, and it keeps seed 000's eager re-runs.
    assert check.stdout.splitlines()[-1] == "6 valid, 0 invalid, 6 warnings, 1 deferred check task"
    assert "WARNING schedule 'e2e.p10', field 'period': the retry backoff" in (check.stderr)
    synced = dgs(cluster, "sync")
    assert synced.returncode == 0, synced.stderr
    assert "  inserted:    e2e.cli_fail, e2e.cli_long, e2e.p20, e2e.p30, e2e.p40" in (
        synced.stdout.splitlines()
    )
    paused = dgs(cluster, "pause", "e2e.p40")
    assert paused.stdout.startswith("paused e2e.p40 (was not running)"), paused.stderr

    code, rows = status(cluster)
    assert code == 1, "the health check fails while a schedule is in ERROR"
    assert (rows["e2e.p10"]["condition"], rows["e2e.p10"]["reason"]) == (
        "ERROR",
        "never_succeeded",
    )

    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(lambda: {"e2e.p10", "e2e.p20", "e2e.p30"} <= succeeded(store), 60, "p10..p30")
    wait_for(lambda: store.get("e2e.cli_fail").stats.failure_count, 30, "cli_fail to fail")
    wait_for(lambda: store.get("e2e.cli_long").stats.last_start_at, 30, "cli_long to start")

    # The schedules turned OK after their runs; cli_fail keeps the health check red.
    code, rows = status(cluster)
    assert code == 1
    for name in ("e2e.p10", "e2e.p20", "e2e.p30"):
        assert rows[name]["condition"] == "OK", rows[name]
        assert rows[name]["last_good_start_at"] is not None
        assert rows[name]["average_duration_s"] > 0.5
    assert rows["e2e.cli_fail"]["condition"] == "ERROR"
    assert rows["e2e.cli_fail"]["failure_count"] == 1
    assert rows["e2e.cli_long"]["running"]["owner_name"] == "w1@node1"
    assert rows["e2e.p40"]["paused"] is True
    assert rows["e2e.p40"]["last_start_at"] is None
    code, only_p = status(cluster, "e2e.p*")
    assert code == 0
    assert sorted(only_p) == ["e2e.p10", "e2e.p20", "e2e.p30", "e2e.p40"]
    table = dgs(cluster, "status")
    assert table.returncode == 1
    assert "never_succeeded" in table.stdout

    leases = json.loads(dgs(cluster, "leases", "--json").stdout)["leases"]
    assert [lease["schedule"] for lease in leases] == ["e2e.cli_long"]
    lease = leases[0]
    assert (lease["owner_name"], lease["owner_node"]) == ("w1@node1", "node1")
    assert lease["steal_state"] == "none"
    assert lease["ping_age_s"] < 1.5
    assert lease["token"] >= 1
    assert lease["cancel_requested"] is False
    assert "e2e.cli_long  w1@node1  node1" in dgs(cluster, "leases").stdout

    # p40 was due all along (never run, period 400 s < cli_long's 1 h) but paused:
    # beat ran cli_long instead. Resumed now, it waits for the busy slot; e2e.p20,
    # in its cooldown, is asked for: it must run first once the slot frees.
    assert not [e for e in cluster.starts() if e["name"] == "p40"]
    assert dgs(cluster, "resume", "e2e.p40").stdout.startswith("resumed e2e.p40")
    requested = dgs(cluster, "run", "e2e.p20")
    assert requested.stdout.startswith("requested a run of e2e.p20"), requested.stderr
    runs = dgs(cluster, "runs", "e2e.cli_long")
    assert runs.returncode == 0
    assert "running" in runs.stdout.splitlines()[2]
    starts_before = len(cluster.starts())
    cancelled = dgs(cluster, "cancel", "e2e.cli_long")
    assert cancelled.stdout.startswith(
        f"requested cancel of e2e.cli_long's run {lease['owner_tag']} on w1@node1 "
        f"(token {lease['token']})"
    ), cancelled.stderr

    wait_for(lambda: len(cluster.starts()) >= starts_before + 2, 30, "two runs after cancel")
    assert [e["name"] for e in cluster.starts()[starts_before : starts_before + 2]] == [
        "p20",
        "p40",
    ]
    history = json.loads(dgs(cluster, "runs", "e2e.cli_long", "--json").stdout)["runs"]
    run = next(r for r in history if r["token"] == lease["token"])
    assert run["outcome"] == "cancelled", history
    assert run["owner_name"] == "w1@node1"
    assert run["duration_s"] < 60
    assert (
        dgs(cluster, "cancel", "e2e.p30").stdout == "e2e.p30 has no live run; nothing to cancel\n"
    )
    unknown = dgs(cluster, "pause", "e2e.nope")
    assert unknown.returncode == 2
    assert "no schedule named 'e2e.nope'" in unknown.stderr
    store.close()


def succeeded(store: Any) -> set[str]:
    return {s.name for s in store.list_schedules() if s.stats.last_good_start_at is not None}
