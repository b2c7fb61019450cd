"""``celery dgs leases`` and ``celery dgs runs``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from celery_dgs.leases.types import LeaseInfo
from celery_dgs.status import steal_state
from tests.cli.conftest import World, now, spec


def test_leases_table_and_json(world: World) -> None:
    world.sync(spec("t.a"), spec("t.b"), at=now())
    token = world.hold_lease("t.a", progress=0.25)
    world.leases.request_cancel("t.a", owner_tag="tag-t.a")
    # t.b's owner last pinged 10 s ago (ping_timeout 5 s): stale, then a steal is marked.
    past = int((now() - timedelta(seconds=10)).timestamp() * 1000)
    world.leases._clock_ms = lambda: past
    world.hold_lease("t.b", node="node2")
    world.leases._clock_ms = None
    table = world.invoke("leases")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].endswith("2 live runs")
    assert lines[1].split() == [
        "SCHEDULE",
        "OWNER",
        "NODE",
        "STARTED",
        "PING",
        "AGE",
        "STEAL",
        "TOKEN",
        "PROGRESS",
        "CANCEL",
    ]
    b, a = lines[2].split(), lines[3].split()  # oldest first
    assert b[:3] == ["t.b", "w1@node2", "node2"]
    assert "stale" in b
    assert a[:3] == ["t.a", "w1@node1", "node1"]
    assert "25%" in a
    assert a[-1] == "requested"
    doc = json.loads(world.invoke("leases", "--json").stdout)
    assert list(doc) == ["now", "leases", "malformed"]
    lease = doc["leases"][1]
    assert list(lease) == [
        "schedule",
        "owner_name",
        "owner_node",
        "owner_tag",
        "started_at",
        "running_s",
        "last_ping_at",
        "ping_age_s",
        "steal_state",
        "steal_start_at",
        "token",
        "progress",
        "cancel_requested",
        "dispatch_id",
    ]
    assert (lease["schedule"], lease["token"], lease["progress"]) == ("t.a", token, 0.25)
    assert lease["cancel_requested"] is True
    assert lease["steal_state"] == "none"
    assert lease["ping_age_s"] < 5
    stale = doc["leases"][0]
    assert stale["steal_state"] == "stale"
    assert 9 < stale["ping_age_s"] < 30
    world.leases.beat_view()  # beat's round marks the steal
    after = json.loads(world.invoke("leases", "--json").stdout)["leases"][0]
    assert after["steal_state"] == "pending"
    assert after["steal_start_at"] is not None


def test_no_leases(world: World) -> None:
    result = world.invoke("leases")
    assert result.exit_code == 0
    assert "0 live runs" in result.stdout
    assert json.loads(world.invoke("leases", "--json").stdout)["leases"] == []


def test_steal_states_at_their_boundaries() -> None:
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    lease = LeaseInfo(
        schedule="s",
        owner_node="n",
        owner_name="w@n",
        owner_tag="x",
        started_at=t,
        last_ping_at=t,
        steal_start_at=None,
        token=1,
        progress=None,
        cancel_requested=False,
        dispatch_id=None,
    )

    def state(lease: LeaseInfo, after: float) -> str:
        at = t + timedelta(seconds=after)
        return steal_state(lease, at, ping_timeout=5, steal_delay=2)

    assert state(lease, 5) == "none"
    assert state(lease, 5.001) == "stale"
    marked = LeaseInfo(**{**lease.__dict__, "steal_start_at": t + timedelta(seconds=6)})
    assert state(marked, 8) == "pending"
    assert state(marked, 8.001) == "takeable"


def test_runs_table_json_and_limit(world: World) -> None:
    t = now()
    world.sync(spec("t.a"), at=t - timedelta(hours=1))
    world.record("t.a", "success", t - timedelta(minutes=30), 12.5)
    world.record(
        "t.a",
        "failure",
        t - timedelta(minutes=20),
        3,
        node="node2",
        error="RuntimeError: boom\n  at line 3",
    )
    world.record("t.a", "running", t - timedelta(seconds=5))
    table = world.invoke("runs", "t.a")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0] == "runs of t.a, newest first (3 shown)"
    assert lines[1].split() == [
        "STARTED",
        "OUTCOME",
        "OWNER",
        "NODE",
        "DURATION",
        "TOKEN",
        "ITEMS",
        "ERROR",
    ]
    assert [line.split()[2] for line in lines[2:]] == ["running", "failure", "success"]
    assert "w1@node2" in lines[3]
    assert "RuntimeError: boom" in lines[3]
    assert "line 3" not in lines[3]
    assert "12s" in lines[4]
    doc = json.loads(world.invoke("runs", "t.a", "--json", "--limit", "2").stdout)
    assert doc["schedule"] == "t.a"
    assert len(doc["runs"]) == 2
    failure = doc["runs"][1]
    assert failure["outcome"] == "failure"
    assert failure["duration_s"] == 3.0
    assert failure["error"] == "RuntimeError: boom\n  at line 3"
    assert failure["owner_node"] == "node2"
    assert failure["token"] == 2
    assert datetime.fromisoformat(failure["started_at"]).utcoffset() == timedelta(0)
    assert doc["runs"][0]["ended_at"] is None
    assert doc["runs"][0]["duration_s"] is None


def test_runs_of_an_unknown_schedule_is_a_usage_error(world: World) -> None:
    world.sync(spec("proj.scrape"), at=now())
    result = world.invoke("runs", "proj.scrap")
    assert result.exit_code == 2
    assert "no schedule named 'proj.scrap'; did you mean proj.scrape?" in result.output
    assert world.invoke("runs", "t.a", "--limit", "0").exit_code == 2


def test_a_run_found_gone_says_it_ran_at_most_until_the_take_over(world: World) -> None:
    """A lost or stolen run's recorded end is when it was found gone: its
    body may have died long before, so its duration is a bound."""
    t = now()
    world.sync(spec("t.a"), at=t - timedelta(hours=1))
    world.record("t.a", "stolen", t - timedelta(minutes=10), 152)
    world.record("t.a", "success", t - timedelta(minutes=5), 12)
    lines = world.invoke("runs", "t.a").stdout.splitlines()
    assert "≤2m32s" in lines[3], lines[3]
    assert "≤" not in lines[2], "a run that ended is measured"
