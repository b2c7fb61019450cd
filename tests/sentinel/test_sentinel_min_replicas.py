"""docs/guarantees.md requires ``min-replicas-to-write 1`` on a Sentinel
deployment. The worker's start-up check, beat's start-up and ``celery dgs
check`` read the primary's setting on a real deployment and warn when it is 0,
or when it cannot be read (``CONFIG`` renamed away or refused by an ACL)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from celery.bin.base import CLIContext
from click.testing import CliRunner

from celery_dgs.beat.scheduler import DeadlineScheduler
from celery_dgs.cli import dgs as dgs_group
from celery_dgs.dgs import DGS, get_dgs
from celery_dgs.worker.startup import check_before_start
from tests.support.redis_sentinel import MASTER_NAME, RedisSentinelProcesses
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.redis_ha, pytest.mark.timeout(90)]

ZERO = f"the Redis primary '{MASTER_NAME}' has min-replicas-to-write 0"
UNREADABLE = f"cannot read min-replicas-to-write of the Redis primary '{MASTER_NAME}'"


@pytest.fixture
def sentinel_app(
    redis_sentinel: RedisSentinelProcesses, redis_url: str, sqlite_url: str
) -> Iterator[Any]:
    """An app whose celery-dgs Redis is the deployment's primary (the broker a
    single server)."""
    app: Any = Celery("min-replicas", broker=redis_url, set_as_current=False)
    app.conf.update(
        dgs_redis_url=redis_sentinel.url,
        dgs_redis_master_name=MASTER_NAME,
        dgs_database_url=sqlite_url,
        dgs_key_prefix="minrep",
        worker_prefetch_multiplier=1,
    )
    DGS(app, install_worker_hooks=False)
    yield app
    app.close()


def primary(deployment: RedisSentinelProcesses) -> redis.Redis:
    server = deployment.server_at(deployment.primary_addr())
    return redis.Redis(server.host, server.port, decode_responses=True)


def set_min_replicas(deployment: RedisSentinelProcesses, value: int) -> None:
    client = primary(deployment)
    try:
        client.config_set("min-replicas-to-write", value)
        assert client.config_get("min-replicas-to-write") == {"min-replicas-to-write": str(value)}
    finally:
        client.close()


def worker_warnings(app: Any, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="celery_dgs"):
        check_before_start(app, get_dgs(app)).close()
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def beat_warnings(app: Any, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()
    sched = DeadlineScheduler(app, lazy=True)
    try:
        with caplog.at_level(logging.WARNING, logger="celery_dgs"):
            sched.setup_schedule()
    finally:
        sched.close()
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def check_command(app: Any) -> tuple[int, str, str]:
    obj = CLIContext(app=app, no_color=True, workdir=None)
    result = CliRunner().invoke(dgs_group, ["check"], obj=obj)
    return result.exit_code, result.stdout, result.stderr


def test_a_primary_with_min_replicas_to_write_0_is_warned_about_and_1_is_not(
    redis_sentinel: RedisSentinelProcesses, sentinel_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    set_min_replicas(redis_sentinel, 0)
    (line,) = [m for m in worker_warnings(sentinel_app, caplog) if "min-replicas" in m]
    assert line.startswith(f"celery-dgs: {ZERO}: ")
    assert "set min-replicas-to-write 1 on every data server" in line
    assert "docs/guarantees.md#redis-sentinel-fail-over" in line
    (line,) = [m for m in beat_warnings(sentinel_app, caplog) if "min-replicas" in m]
    assert line.startswith(f"celery-dgs: {ZERO}: ")
    status, out, err = check_command(sentinel_app)
    assert status == 0, out + err
    (line,) = [x for x in err.splitlines() if "min-replicas" in x]
    assert line.startswith(f"WARNING {ZERO}: ")
    assert out.splitlines()[-1] == "0 valid, 0 invalid, 1 warning"

    set_min_replicas(redis_sentinel, 1)
    assert not [m for m in worker_warnings(sentinel_app, caplog) if "min-replicas" in m]
    assert not [m for m in beat_warnings(sentinel_app, caplog) if "min-replicas" in m]
    status, out, err = check_command(sentinel_app)
    assert status == 0, out + err
    assert "min-replicas" not in err
    assert out.splitlines()[-1] == "0 valid, 0 invalid, 0 warnings"


def test_a_setting_that_cannot_be_read_is_said_so(
    redis_sentinel: RedisSentinelProcesses, sentinel_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The default user may run everything but CONFIG (an ACL, as managed Redis
    services do): the setting cannot be read, and each says so."""
    client = primary(redis_sentinel)
    try:
        client.acl_setuser("default", enabled=True, nopass=True, commands=["-config"])
        lines = [
            *[m for m in worker_warnings(sentinel_app, caplog) if "min-replicas" in m],
            *[m for m in beat_warnings(sentinel_app, caplog) if "min-replicas" in m],
        ]
        status, out, err = check_command(sentinel_app)
    finally:
        client.acl_setuser("default", enabled=True, nopass=True, commands=["+@all"])
        client.close()
    assert status == 0, out + err
    lines += [x for x in err.splitlines() if "min-replicas" in x]
    assert len(lines) == 3, lines
    for line in lines:
        assert UNREADABLE in line, line
        assert "NoPermissionError" in line, line
        assert "make sure it is at least 1 on every data server" in line
    assert lines[2].startswith(f"WARNING {UNREADABLE} (CONFIG GET failed: NoPermissionError")


def test_nothing_is_read_or_said_without_sentinel(
    redis_url: str, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A single server is no fail-over pair: its min-replicas-to-write (0 by
    default) is not read, and nothing is said."""
    app: Any = Celery("single", broker=redis_url, set_as_current=False)
    app.conf.update(dgs_database_url=sqlite_url, worker_prefetch_multiplier=1)
    DGS(app, install_worker_hooks=False)
    assert not [m for m in worker_warnings(app, caplog) if "min-replicas" in m]
    status, out, err = check_command(app)
    assert status == 0, out + err
    assert "min-replicas" not in err
    app.close()


def test_a_primary_with_fewer_than_two_replicas_is_warned_about(
    redis_sentinel: RedisSentinelProcesses, sentinel_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """With min-replicas-to-write 1 a primary needs two replicas: promoted from
    the only one, it would have none and refuse every write."""
    address = redis_sentinel.primary_addr()
    [replica] = [s for s in redis_sentinel.servers if s.port != address[1]][:1]
    detached = redis.Redis(replica.host, replica.port, decode_responses=True)
    watch = primary(redis_sentinel)
    try:
        detached.replicaof("NO", "ONE")
        wait_for(
            lambda: int(watch.info("replication")["connected_slaves"]) == 1, 10, "a replica gone"
        )
        (line,) = [m for m in worker_warnings(sentinel_app, caplog) if "replica(s)" in m]
        assert line.startswith(
            f"celery-dgs: the Redis primary '{MASTER_NAME}' has 1 replica(s) connected: with "
            "min-replicas-to-write 1 it needs at least 2"
        )
    finally:
        detached.replicaof(*address)
        wait_for(lambda: int(watch.info("replication")["connected_slaves"]) == 2, 20, "it back")
        detached.close()
        watch.close()
