"""``celery dgs status`` shows which beat leads (node/pid, since, token) and
whether its lease has expired; read from the real Redis leader lease."""

from __future__ import annotations

import json
import time

from celery_dgs.keys import KeySpace
from celery_dgs.leases.leader import RedisLeader
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


def test_status_flags_an_expired_leader(world: World) -> None:
    world.app.conf.dgs_beat_leader_timeout = 0.3
    leader = RedisLeader(world.leases.client, KeySpace(PREFIX), timeout=0.3)
    leader.elect(owner_tag="tag-1", owner_node="beathost", owner_pid=1)
    time.sleep(0.5)
    line = world.invoke("status").stdout.splitlines()[-1]
    assert "EXPIRED" in line, line
    assert json.loads(world.invoke("status", "--json").stdout)["beat_leader"]["expired"] is True
