"""``celery dgs status`` shows which beat leads (node/pid, since, token) and
whether its lease has expired, read from the real Redis leader lease; and
the run outcomes workers kept in Redis for beat to store."""

from __future__ import annotations

import json
import time

from celery_dgs.keys import KeySpace
from celery_dgs.leases.leader import RedisLeader
from celery_dgs.outcome_spool import OutcomeSpool, SpooledOutcome
from tests.cli.conftest import PREFIX, World, now, spec


def test_status_names_the_leading_beat(world: World) -> None:
    world.sync(spec("t.one"), at=now())
    result = world.invoke("status")
    assert result.stdout.splitlines()[-1].startswith("beat leader: none")
    leader = RedisLeader(world.leases.client, KeySpace(PREFIX), timeout=30)
    elected = leader.elect(owner_tag="tag-1", owner_node="beathost", owner_pid=4242)
    text = world.invoke("status").stdout
    line = text.splitlines()[-1]
    assert line.startswith("beat leader: beathost/4242 since ")
    assert "(token 1), renewed " in line
    assert "EXPIRED" not in line
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert doc["beat_leader"]["node"] == "beathost"
    assert doc["beat_leader"]["pid"] == 4242
    assert doc["beat_leader"]["token"] == elected.token == 1
    assert doc["beat_leader"]["expired"] is False
    assert doc["beat_leader"]["since"].endswith("+00:00")


def test_status_flags_an_expired_leader_and_fails_the_health_check(world: World) -> None:
    """A leader that died without resigning: nothing dispatches, so the health
    check fails (exit 1) though every schedule is still OK."""
    world.sync(spec("t.one"), at=now())
    world.record("t.one", "success", now())
    world.app.conf.dgs_beat_leader_timeout = 0.3
    leader = RedisLeader(world.leases.client, KeySpace(PREFIX), timeout=0.3)
    leader.elect(owner_tag="tag-1", owner_node="beathost", owner_pid=1)
    assert world.invoke("status").exit_code == 0
    time.sleep(0.5)
    result = world.invoke("status")
    assert result.exit_code == 1
    assert "(0 ERROR, 0 WARNING, 1 OK)" in result.stdout.splitlines()[0]
    line = result.stdout.splitlines()[-1]
    assert "EXPIRED" in line, line
    as_json = world.invoke("status", "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["beat_leader"]["expired"] is True


def test_status_fails_the_health_check_after_the_last_leader_resigned(world: World) -> None:
    """Before any beat led, no leader is a project being set up (exit 0);
    once one led and resigned on a clean shutdown with none taking over,
    nothing dispatches (exit 1), as with an expired lease."""
    world.sync(spec("t.one"), at=now())
    world.record("t.one", "success", now())
    before = world.invoke("status")
    assert before.exit_code == 0
    assert before.stdout.splitlines()[-1] == "beat leader: none (no beat has led on this Redis yet)"
    assert json.loads(world.invoke("status", "--json").stdout)["beat_dispatching"] is False
    leader = RedisLeader(world.leases.client, KeySpace(PREFIX), timeout=30)
    leader.elect(owner_tag="tag-1", owner_node="beathost", owner_pid=1)
    assert world.invoke("status").exit_code == 0
    assert json.loads(world.invoke("status", "--json").stdout)["beat_dispatching"] is True
    assert leader.resign("tag-1")
    result = world.invoke("status")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == (
        "beat leader: none: the last beat shut down cleanly (resigned) and no other took "
        "over; no beat is dispatching"
    )
    as_json = world.invoke("status", "--json")
    assert as_json.exit_code == 1
    doc = json.loads(as_json.stdout)
    assert doc["beat_leader"] is None
    assert doc["beat_dispatching"] is False


def test_status_counts_the_run_outcomes_kept_in_redis(world: World) -> None:
    world.sync(spec("t.one"), at=now())
    assert "kept in Redis" not in world.invoke("status").stdout
    spool = OutcomeSpool(world.leases.client, KeySpace(PREFIX))
    spool.put(SpooledOutcome(schedule="t.one", run_id="r1", outcome="success", ended_at=now()))
    text = world.invoke("status").stdout
    assert "1 run outcome kept in Redis, waiting for the store (workers could not store " in text
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert doc["outcomes_kept_in_redis"] == 1
