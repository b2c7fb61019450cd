"""celery-dgs behind a real Redis Sentinel deployment (a primary, two replicas,
three sentinels): a ``sentinel://`` dgs_redis_url with dgs_redis_master_name
reaches the primary the sentinels name; every script runs there and every key
stays under the prefix. After a fail-over the same client follows the new
primary, and the acquire script sees the new server's ``run_id``: a schedule
whose Redis counter is below the store's floor waits out the restart grace."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from celery_dgs.dgs import DGS
from celery_dgs.embedded import free_port
from celery_dgs.errors import LeaseError
from celery_dgs.leases import AcquireStatus, PingStatus
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.runtime import Runtime
from celery_dgs.settings import DgsSettings
from celery_dgs.worker.startup import StartRefused, check_before_start
from tests.leases.helpers import wait_for
from tests.leases.test_connection import exercise
from tests.support.redis_sentinel import MASTER_NAME, RedisSentinelProcesses

pytestmark = [pytest.mark.redis_ha, pytest.mark.timeout(60)]


def sentinel_settings(url: str, sqlite_url: str, **more: object) -> DgsSettings:
    return DgsSettings.from_conf(
        {
            "dgs_redis_url": url,
            "dgs_redis_master_name": MASTER_NAME,
            "dgs_database_url": sqlite_url,
            "dgs_key_prefix": "app",
            "dgs_ping_interval": 1,
            "dgs_ping_timeout": 3,
            "dgs_steal_delay": 2,
            **more,
        }
    )


def server_client(deployment: RedisSentinelProcesses, address: tuple[str, int]) -> redis.Redis:
    server = deployment.server_at(address)
    return redis.Redis(server.host, server.port, password=deployment.password)


def test_every_script_and_key_goes_to_the_primary_under_the_prefix(
    redis_sentinel: RedisSentinelProcesses, sqlite_url: str
) -> None:
    rt = Runtime(sentinel_settings(redis_sentinel.url, sqlite_url))
    exercise(rt.redis, rt.keys)
    primary = server_client(redis_sentinel, redis_sentinel.primary_addr())
    keys = {k.decode() for k in primary.scan_iter(count=1000)}
    assert keys
    assert all(k.startswith("app:") for k in keys), keys
    assert primary.info("server")["run_id"] == rt.redis.info("server")["run_id"]
    primary.close()
    rt.close()


def test_after_a_failover_the_client_follows_and_the_restart_grace_applies(
    redis_sentinel: RedisSentinelProcesses, sqlite_url: str
) -> None:
    """Before the fail-over a floor above the counter is granted at once (the
    server's epoch began long ago); after it, the promoted replica (another
    run_id, the same data) answers RECOVERING until the grace ends, while the
    owner whose lease was replicated keeps pinging it through the same client."""
    rt = Runtime(sentinel_settings(redis_sentinel.url, sqlite_url))
    leases = RedisLeases(rt.redis, rt.keys, ping_timeout=3, steal_delay=2, restart_grace=1.0)
    owner = {"owner_node": "h", "owner_name": "celery@h"}
    held = leases.acquire("held", owner_tag="A", **owner)  # the server's epoch starts
    assert held.granted
    before = rt.redis.info("server")["run_id"]
    time.sleep(1.1)  # the epoch's grace is over
    grant = leases.acquire("floor", owner_tag="C", min_token=20, **owner)
    assert grant.granted, grant
    assert grant.token == 21
    assert leases.release("floor", "C")
    rt.redis.execute_command("WAIT", 1, 2000)  # the replica has every write so far

    old = redis_sentinel.primary_addr()
    redis_sentinel.failover()
    new = redis_sentinel.wait_primary_change(old)
    primary = server_client(redis_sentinel, new)
    promoted = primary.info("server")["run_id"]
    assert promoted != before

    def pinged_on_the_new_primary() -> bool:
        try:  # the old primary refuses writes once its replica stops acknowledging
            status = leases.ping("held", "A").status
        except LeaseError:
            return False
        return status is PingStatus.OK and rt.redis.info("server")["run_id"] == promoted

    t0 = time.monotonic()
    wait_for(pinged_on_the_new_primary, timeout=10, step=0.05)
    print(f"the client followed the new primary {time.monotonic() - t0:.2f}s after it was named")
    waiting = leases.acquire("floor", owner_tag="D", min_token=30, **owner)
    assert waiting.status is AcquireStatus.RECOVERING, waiting
    assert waiting.grace_ends_at is not None
    assert (waiting.grace_ends_at - waiting.now).total_seconds() <= 1.0
    time.sleep((waiting.grace_ends_at - waiting.now).total_seconds() + 0.05)
    late = leases.acquire("floor", owner_tag="D", min_token=30, **owner)
    assert late.granted
    assert late.token == 31
    assert primary.hget("app:lease:floor", "owner_tag") == b"D"
    primary.close()
    rt.close()


def test_unreachable_sentinels_are_one_line_and_an_unknown_name_refuses_the_start(
    redis_sentinel: RedisSentinelProcesses,
    sqlite_url: str,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Sentinels that do not answer may come back: a warning, the worker
    starts. Sentinels that answer but monitor no primary of the name are a
    setting no retry fixes: the worker refuses to start, one line."""
    nowhere = f"sentinel://127.0.0.1:{free_port()};sentinel://127.0.0.1:{free_port()}"

    def app_for(url: str, name: str) -> tuple[Any, DGS]:
        app: Any = Celery("sentinel-startup", broker=redis_url, set_as_current=False)
        app.conf.update(dgs_redis_url=url, dgs_redis_master_name=name, dgs_database_url=sqlite_url)
        return app, DGS(app, install_worker_hooks=False)

    app, dgs = app_for(nowhere, MASTER_NAME)
    with caplog.at_level(logging.WARNING, logger="celery_dgs"):
        check_before_start(app, dgs).close()
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    app.close()
    assert (
        f"Redis at {nowhere} (dgs_redis_url) is unreachable (MasterNotFoundError: no "
        f"Redis primary '{MASTER_NAME}' found: none of the 2 sentinels answered" in line
    )
    assert "\n" not in line
    app, dgs = app_for(redis_sentinel.url, "other")
    with pytest.raises(StartRefused) as refused:
        check_before_start(app, dgs)
    app.close()
    assert str(refused.value).endswith(
        "(dgs_redis_url): no Redis primary 'other' found: the sentinels that answered "
        f"monitor no primary of that name (they monitor {MASTER_NAME}): check "
        "dgs_redis_master_name"
    )
    assert "\n" not in str(refused.value)


def test_the_primary_s_password_and_the_sentinels_password_are_apart(
    tmp_path: Path, sqlite_url: str
) -> None:
    """The first URL part carries the data servers' password; the sentinels'
    own goes in dgs_redis_sentinel_kwargs. Without it, the search for the
    primary says that the sentinels refused the credentials."""
    deployment = RedisSentinelProcesses(
        tmp_path / "auth", password="primary-pw", sentinel_password="sentinel-pw"
    ).start()
    try:
        assert deployment.url.startswith("sentinel://:primary-pw@")
        rt = Runtime(
            sentinel_settings(
                deployment.url, sqlite_url, dgs_redis_sentinel_kwargs={"password": "sentinel-pw"}
            )
        )
        exercise(rt.redis, rt.keys)
        rt.close()
        rt = Runtime(sentinel_settings(deployment.url, sqlite_url))
        with pytest.raises(LeaseError) as raised:
            rt.leases.acquire("s", owner_node="h", owner_name="celery@h", owner_tag="A")
        rt.close()
        text = str(raised.value)
        assert "sentinels refused the credentials" in text, text
        assert "dgs_redis_sentinel_kwargs" in text
        assert "primary-pw" not in text
        assert "sentinel-pw" not in text
    finally:
        deployment.stop()
