"""celery-dgs on a real Redis Cluster (three primaries): ``dgs_redis_cluster``
builds redis-py's cluster client; with ``dgs_redis_cluster_hash_tag`` every key,
script and pipeline of the leases, the registry, the dispatch records and the
beat leader lands in one slot and works. Without the hash tag the first
multi-key call fails with one line naming the setting to turn on."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from celery_dgs.connection import redis_from_url
from celery_dgs.dispatches import ADD_CHUNK, DispatchRecord
from celery_dgs.errors import LeaseError, SettingsError
from celery_dgs.keys import KeySpace
from celery_dgs.leases import AcquireStatus, PingStatus
from celery_dgs.leases.leader import LeaderFence, RedisLeader
from celery_dgs.runtime import Runtime
from celery_dgs.settings import DgsSettings
from celery_dgs.worker.shutdown import give_back_dispatches
from tests.leases.helpers import wait_for
from tests.leases.test_connection import WORKER
from tests.support.redis_cluster import RedisClusterProcesses

pytestmark = pytest.mark.redis_ha


def cluster_settings(url: str, sqlite_url: str, **more: object) -> DgsSettings:
    return DgsSettings.from_conf(
        {
            "dgs_redis_url": url,
            "dgs_database_url": sqlite_url,
            "dgs_key_prefix": "app",
            "dgs_redis_cluster": True,
            "dgs_redis_cluster_hash_tag": True,
            "dgs_ping_interval": 1,
            "dgs_ping_timeout": 5,
            **more,
        }
    )


def keys_by_node(cluster: RedisClusterProcesses) -> dict[int, set[str]]:
    found = {}
    for node in cluster.nodes:
        client = redis.Redis.from_url(node.url)
        found[node.port] = {k.decode() for k in client.scan_iter(count=1000)}
        client.close()
    return found


def test_the_cluster_setting_needs_the_hash_tag_and_its_own_url(sqlite_url: str) -> None:
    with pytest.raises(SettingsError, match="dgs_redis_cluster must be True or False"):
        DgsSettings(redis_cluster="yes")  # type: ignore[arg-type]
    with pytest.raises(SettingsError, match=r"needs dgs_redis_cluster_hash_tag = True.*CROSSSLOT"):
        DgsSettings(redis_url="redis://h:1", redis_cluster=True)
    with pytest.raises(SettingsError, match=r"needs dgs_redis_url .*broker cannot be a Redis"):
        DgsSettings(redis_cluster=True, redis_cluster_hash_tag=True)
    on = DgsSettings(redis_url="redis://h:1", redis_cluster=True, redis_cluster_hash_tag=True)
    assert on.resolved_redis_url("redis://broker:6379/0") == "redis://h:1"
    with pytest.raises(SettingsError, match="redis:// or rediss:// node URL"):
        redis_from_url("unix:///tmp/redis.sock", cluster=True)


def test_a_lease_round_trip_through_the_runtime_on_the_cluster(
    redis_cluster: RedisClusterProcesses, cluster_url: str, sqlite_url: str
) -> None:
    rt = Runtime(cluster_settings(cluster_url, sqlite_url))
    assert isinstance(rt.redis, RedisCluster)
    assert len(rt.redis.get_primaries()) == 3
    assert rt.keys == KeySpace("app", hash_tag=True)
    leader = RedisLeader(rt.redis, rt.keys, timeout=5)
    elected = leader.elect(owner_tag="B", owner_node="h", owner_pid=1)
    assert elected.leading
    assert elected.token is not None
    fence = LeaderFence(owner_tag="B", token=elected.token)
    # more than ADD_CHUNK records: a pipeline of EVALs, one per chunk
    many = [
        DispatchRecord(schedule=f"m{i}", dispatch_id="d", worker="other@h")
        for i in range(ADD_CHUNK + 1)
    ]
    assert rt.dispatches.add_many(many, ttl=0.001, fence=fence) is not None
    # the sweep builds the record keys from their prefix inside the script
    expired = wait_for(lambda: rt.dispatches.expired(), timeout=5)
    assert len(expired) == ADD_CHUNK + 1
    assert all(rt.dispatches.take_back(r.schedule, "d") for r in expired[:3])
    # one record: one script call
    assert (
        rt.dispatches.add_many(
            [DispatchRecord(schedule="s", dispatch_id="d", worker=WORKER.name)], ttl=5, fence=fence
        )
        is not None
    )
    rt.registry.register(WORKER)  # a MULTI/EXEC pipeline
    assert [w.name for w in rt.registry.live_workers()] == [WORKER.name]
    assert rt.dispatches.current("s") is not None
    granted = rt.leases.acquire(
        "s", owner_node="h", owner_name=WORKER.name, owner_tag="A", dispatch_id="d"
    )
    assert granted.granted
    assert granted.token == 1
    assert "s" not in rt.dispatches.pending_names(), "the acquire consumed the record"
    # a leaving worker's give-back: a pipeline of HGETALLs, then take-backs
    rt.dispatches.add_many(
        [DispatchRecord(schedule="g", dispatch_id="d", worker=WORKER.name)], ttl=5, fence=fence
    )
    assert give_back_dispatches(rt.dispatches, WORKER.name) == ["g"]
    assert rt.leases.ping("s", "A", progress=0.5).status is PingStatus.OK
    assert rt.leases.request_cancel("s", owner_tag="A").requested
    view = rt.leases.beat_view()
    assert view.takeable == set()
    assert {i.schedule for i in rt.leases.scan().leases} == {"s"}  # a pipeline of HGETALLs
    assert set(rt.leases.get_many(["s", "t"])) == {"s", "t"}
    assert rt.registry.heartbeat(WORKER.name)
    # every key in the slot of the tag, all of them on the one node serving it
    by_node = keys_by_node(redis_cluster)
    written = set().union(*by_node.values())
    assert {
        "{app}:lease:s",
        "{app}:token:s",
        "{app}:leases",
        "{app}:workers",
        f"{{app}}:worker:{WORKER.name}",
    } <= written
    assert {key_slot(k.encode()) for k in written} == {key_slot(b"app")}
    assert sorted(len(keys) > 0 for keys in by_node.values()) == [False, False, True]
    assert rt.leases.release("s", "A")
    assert rt.leases.get("s") is None
    assert rt.registry.deregister(WORKER.name)
    assert leader.resign("B")
    rt.close()


def test_without_the_hash_tag_the_first_multi_key_call_names_the_setting(
    cluster_url: str, sqlite_url: str
) -> None:
    """A plain client on a cluster node: the lease script's keys hash to several
    slots, the node answers CROSSSLOT, and the error says what to set."""
    settings = DgsSettings.from_conf({"dgs_redis_url": cluster_url, "dgs_database_url": sqlite_url})
    rt = Runtime(settings)
    with pytest.raises(LeaseError) as caught:
        rt.leases.acquire("s", owner_node="h", owner_name="w", owner_tag="A")
    message = str(caught.value)
    print(message)
    assert message.startswith("acquire.lua failed: CROSSSLOT: its keys ['dgs:lease:s', ")
    assert "hash to different Redis Cluster slots" in message
    assert "set dgs_redis_cluster_hash_tag = True (with dgs_redis_cluster = True)" in message
    assert isinstance(caught.value.__cause__, redis.exceptions.ClusterCrossSlotError)
    rt.close()


def test_the_cluster_client_refuses_keys_of_several_slots_with_the_same_advice(
    cluster_url: str,
) -> None:
    """The cluster client itself refuses a script whose keys span slots (it never
    reaches a node); the error names the setting too."""
    from celery_dgs.leases.redis import RedisLeases

    client = redis_from_url(cluster_url, cluster=True)
    leases = RedisLeases(client, KeySpace("dgs"), ping_timeout=5, steal_delay=5)
    with pytest.raises(LeaseError, match=r"CROSSSLOT: .*set dgs_redis_cluster_hash_tag = True"):
        leases.acquire("s", owner_node="h", owner_name="w", owner_tag="A")
    client.close()


def test_the_shard_of_the_tag_restarted_empty_holds_new_grants_for_the_restart_grace(
    redis_cluster: RedisClusterProcesses, cluster_url: str, sqlite_url: str
) -> None:
    """The primary serving the slot of ``{app}`` is SIGKILLed and comes back
    empty: the run_id in the scripts' INFO differs, so the grant that the
    durable floor says was lost is not given again before the restart grace
    (ping_timeout + steal_delay) ends."""
    rt = Runtime(cluster_settings(cluster_url, sqlite_url))
    first = rt.leases.acquire("s", owner_node="h", owner_name="w", owner_tag="A")
    assert first.token == 1
    client = rt.redis
    assert isinstance(client, RedisCluster)
    port = client.get_node_from_key("{app}:x").port
    shard = next(n for n in redis_cluster.nodes if n.port == port)
    redis_cluster.restart_node(shard)
    # the cluster client follows (a connection error first, then the same node again)
    again = wait_for(lambda: _acquire_or_none(rt, "B", min_token=1), timeout=10)
    assert again.status is AcquireStatus.RECOVERING
    assert again.grace_ends_at is not None
    grace = (again.grace_ends_at - again.now).total_seconds()
    assert 0 < grace <= rt.settings.ping_timeout + rt.settings.steal_delay
    assert rt.leases.get("s") is None, "the shard lost the lease"
    rt.close()


def _acquire_or_none(rt: Runtime, tag: str, *, min_token: int) -> object:
    try:
        return rt.leases.acquire(
            "s", owner_node="h", owner_name="w", owner_tag=tag, min_token=min_token
        )
    except LeaseError:
        return None
