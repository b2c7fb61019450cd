"""``celery dgs status --project`` warns ``projected_late`` from the live state: a real
SQLite store, the real Redis registry of workers, the real CLI."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import redis

from celery_dgs.keys import KeySpace
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from tests.cli.conftest import PREFIX, World, now, spec

M = timedelta(minutes=1)


@pytest.fixture
def queue_of_four(world: World) -> None:
    """Four schedules (period 1 h, 5-minute runs) that last succeeded 50 min ago,
    10 s apart: should_start_by = start + 60 - 5 min, so about now + 5 min. Each
    alone is OK (started now it ends 5 min before its deadline)."""
    t = now()
    world.sync(*(spec(f"q.{c}") for c in "abcd"), at=t - 3 * 60 * M)
    for i, c in enumerate("abcd"):
        world.record(f"q.{c}", "success", t - 50 * M - timedelta(seconds=10 * (3 - i)), 300.0)


def register(client: redis.Redis, slots: int) -> None:
    info = WorkerInfo(
        name="celery@w1", node="w1", queues=("celery",), slots=slots, pool="prefork", pid=1
    )
    WorkerRegistry(client, KeySpace(PREFIX), ttl=600).register(info)


def reasons(world: World) -> dict[str, tuple[str, str]]:
    result = world.invoke("status", "--json", "--project")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    return {s["name"]: (s["condition"], s["reason"]) for s in doc["schedules"]}


def test_one_slot_projects_the_third_and_fourth_late(
    world: World, queue_of_four: None, redis_client: redis.Redis
) -> None:
    # One slot: q.a starts now (should ~ +4:30), q.b at +5 min (should ~ +4:40):
    # already late; q.c at +10, q.d at +15 min: all but the first projected late.
    register(redis_client, slots=1)
    got = reasons(world)
    assert got["q.a"] == ("OK", "ok")
    for name in ("q.b", "q.c", "q.d"):
        assert got[name] == ("WARNING", "projected_late"), got
    text = world.invoke("status", "--project", "q.c").stdout
    assert "projected_late" in text


def test_enough_slots_or_no_workers_no_projection(
    world: World, queue_of_four: None, redis_client: redis.Redis
) -> None:
    assert set(reasons(world).values()) == {("OK", "ok")}  # no live worker: no projection
    register(redis_client, slots=4)
    assert set(reasons(world).values()) == {("OK", "ok")}
