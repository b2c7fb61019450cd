"""``dgs_redis_cluster_hash_tag``: the setting reaches every client built from the
settings, every key lands in one Redis Cluster slot, and a lease round trip
works with it on a single server (tests/cluster/ runs it on a real cluster)."""

from __future__ import annotations

import re

import pytest
import redis
from celery import Celery
from redis.crc import key_slot

from celery_dgs import DGS
from celery_dgs.dispatches import DispatchRecord
from celery_dgs.errors import SettingsError
from celery_dgs.keys import KeySpace
from celery_dgs.leases import PingStatus
from celery_dgs.runtime import Runtime, runtime_for
from celery_dgs.settings import DgsSettings
from tests.leases.helpers import running_names
from tests.leases.test_connection import WORKER


def tagged_settings(redis_url: str, sqlite_url: str, prefix: str = "app") -> DgsSettings:
    return DgsSettings.from_conf(
        {
            "dgs_redis_url": redis_url,
            "dgs_database_url": sqlite_url,
            "dgs_key_prefix": prefix,
            "dgs_redis_cluster_hash_tag": True,
            "dgs_ping_interval": 1,
            "dgs_ping_timeout": 5,
        }
    )


def test_the_setting_is_off_by_default_and_checked() -> None:
    assert DgsSettings().keyspace() == KeySpace("dgs")
    on = DgsSettings(key_prefix="myapp", redis_cluster_hash_tag=True).keyspace()
    assert on == KeySpace("myapp", hash_tag=True)
    assert on.lease("s") == "{myapp}:lease:s"
    with pytest.raises(SettingsError, match="dgs_redis_cluster_hash_tag must be True or False"):
        DgsSettings(redis_cluster_hash_tag="yes")  # type: ignore[arg-type]
    braces = re.escape("dgs_key_prefix '{x}' must not contain braces")
    with pytest.raises(SettingsError, match=braces):
        DgsSettings(key_prefix="{x}", redis_cluster_hash_tag=True)


def test_a_lease_round_trip_through_the_runtime_stays_in_one_slot(
    redis_url: str, sqlite_url: str, redis_client: redis.Redis
) -> None:
    rt = Runtime(tagged_settings(redis_url, sqlite_url))
    assert rt.keys == KeySpace("app", hash_tag=True)
    rt.dispatches.add_many(
        [DispatchRecord(schedule="s", dispatch_id="d", worker=WORKER.name)], ttl=5
    )
    granted = rt.leases.acquire(
        "s", owner_node="h", owner_name=WORKER.name, owner_tag="A", dispatch_id="d"
    )
    assert granted.granted
    assert granted.token == 1
    assert rt.leases.ping("s", "A", progress=0.5).status is PingStatus.OK
    assert rt.leases.request_cancel("s", owner_tag="A").requested
    rt.registry.register(WORKER)
    assert running_names(rt.leases) == {"s"}
    assert rt.leases.beat_view().takeable == set()
    written = {k.decode() for k in redis_client.scan_iter(count=1000)}
    assert {
        "{app}:lease:s",
        "{app}:token:s",
        "{app}:leases",
        "{app}:epoch",
        "{app}:workers",
        f"{{app}}:worker:{WORKER.name}",
    } <= written
    assert {key_slot(k.encode()) for k in written} == {key_slot(b"app")}
    assert rt.leases.release("s", "A")
    assert rt.leases.get("s") is None
    rt.close()


def test_dgs_app_runtime_uses_the_setting(redis_url: str, sqlite_url: str) -> None:
    app = Celery("tagged", broker=redis_url, set_as_current=False)
    app.conf.update(
        dgs_database_url=sqlite_url, dgs_key_prefix="app", dgs_redis_cluster_hash_tag=True
    )
    dgs = DGS(app, install_worker_hooks=False)
    rt = runtime_for(app, dgs.settings)
    assert rt.keys.lease("s") == "{app}:lease:s"
    app.close()
