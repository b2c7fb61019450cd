"""Fixtures for the ``celery dgs`` CLI tests: a Celery app on a real SQLite
file and the session's real Redis-compatible server, its store with crafted
run histories, and a CliRunner that invokes ``dgs`` as Celery does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import redis
from celery import Celery
from celery.bin.base import CLIContext
from click.testing import CliRunner, Result

from celery_dgs.cli import dgs as dgs_group
from celery_dgs.core.items import ItemCounts
from celery_dgs.core.spec import ScheduleSpec
from celery_dgs.core.spec_build import make_spec
from celery_dgs.dgs import DGS
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.store.sql import SqlScheduleStore

PREFIX = "clitest"


def spec(task: str, kind: str = "periodic", **fields: Any) -> ScheduleSpec:
    if kind == "periodic":
        fields.setdefault("scheduling_period", timedelta(hours=1))
    return make_spec(kind, task=task, **fields)


@dataclass
class World:
    """One test's app, store and leases, and helpers to craft history."""

    app: Celery
    store: SqlScheduleStore
    leases: RedisLeases
    runner: CliRunner

    def invoke(self, *args: str, color: bool = False) -> Result:
        obj = CLIContext(app=self.app, no_color=not color, workdir=None)
        return self.runner.invoke(dgs_group, list(args), obj=obj, color=color)

    def sync(self, *specs: ScheduleSpec, at: datetime) -> None:
        self.store.sync(list(specs), at)

    def record(
        self,
        name: str,
        outcome: str,
        started: datetime,
        seconds: float = 1.0,
        *,
        node: str = "node1",
        error: str | None = None,
        items: ItemCounts | None = None,
    ) -> str:
        run_id = uuid.uuid4().hex
        token = (self.store.get(name).current_token or 0) + 1
        self.store.record_run_start(
            schedule=name,
            run_id=run_id,
            dispatch_id=None,
            owner_node=node,
            owner_name=f"w1@{node}",
            owner_tag=run_id,
            token=token,
            started_at=started,
        )
        if outcome != "running":
            self.store.record_run_end(
                run_id=run_id,
                outcome=outcome,
                ended_at=started + timedelta(seconds=seconds),
                error=error,
                items=items,
            )
        return run_id

    def dead_owners_run(self, name: str) -> None:
        """``name`` (cooldown 10 min) ran well 2 minutes ago, was asked to run
        again 30 s ago, and that run's owner died: its lease silent for 20 s
        with a steal marked 9 s ago (takeable), the cooldown until 9 min from now."""
        t = now()
        self.sync(spec(name, cooldown_duration=timedelta(minutes=10)), at=t - timedelta(hours=2))
        self.record(name, "success", t - timedelta(minutes=2), 60.0)
        self.record(name, "running", t - timedelta(seconds=30))
        self.hold_lease(name)
        key = KeySpace(PREFIX).lease(name)
        client = self.leases.client
        ms = int(client.hget(key, "last_ping_at") or 0)
        client.hset(key, mapping={"last_ping_at": ms - 20_000, "steal_start_at": ms - 9_000})

    def hold_lease(self, name: str, *, node: str = "node1", progress: float | None = None) -> int:
        result = self.leases.acquire(
            name, owner_node=node, owner_name=f"w1@{node}", owner_tag=f"tag-{name}"
        )
        assert result.granted
        assert result.token is not None
        if progress is not None:
            self.leases.ping(name, f"tag-{name}", progress)
        return result.token


def now() -> datetime:
    return datetime.now(timezone.utc)


def make_app(sqlite_url: str, redis_url: str) -> Celery:
    """A project app (as a new process would build it) on the test's store and Redis."""
    app = Celery("clitest", broker=redis_url, set_as_current=False)
    app.conf.update(
        dgs_database_url=sqlite_url,
        dgs_key_prefix=PREFIX,
        dgs_ping_interval=1.0,
        dgs_ping_timeout=5.0,
        dgs_steal_delay=2.0,
    )
    DGS(app, install_worker_hooks=False)
    return app


@pytest.fixture
def world(sqlite_url: str, redis_url: str, redis_client: redis.Redis) -> Iterator[World]:
    app = make_app(sqlite_url, redis_url)
    store = SqlScheduleStore.open(sqlite_url)
    leases = RedisLeases(redis_client, KeySpace(PREFIX), ping_timeout=5.0, steal_delay=2.0)
    yield World(app=app, store=store, leases=leases, runner=CliRunner())
    store.close()
    app.close()
