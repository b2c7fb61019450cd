"""Beat's publisher on a Redis broker whose transport batches publishes (kombu's
``Producer.batch``), against real Redis servers.

A message sent in a pipeline is the one ``send_task`` sends alone, at the same
key (priority queues included), one round trip per chunk; Celery's publish
signals fire per message. A pipeline that fails part-way reports its chunk and
every order after it as not published, and beat takes back their dispatch
records and re-indexes the schedules, while the orders of the chunks before it
stay dispatched.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from celery.signals import after_task_publish, before_task_publish
from kombu import Producer

from celery_dgs.beat.publishing import CeleryPublisher, batches_publishes
from celery_dgs.beat.types import DispatchOrder
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.embedded import RedisServerProcess
from celery_dgs.keys import KeySpace
from celery_dgs.leases.types import AcquireStatus
from celery_dgs.registry import WorkerInfo
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, open_store
from tests.faults.proxy import TcpProxy
from tests.support.beat import beat_engine

pytestmark = pytest.mark.skipif(
    not hasattr(Producer, "batch"), reason="kombu < 5.7 publishes one message at a time"
)


def make_app(broker: str, **conf: Any) -> Celery:
    app = Celery(f"batch-{uuid.uuid4().hex[:6]}", broker=broker, set_as_current=False)
    app.conf.update(conf)
    return app


@pytest.fixture
def app(redis_url: str) -> Iterator[Celery]:
    app = make_app(redis_url)
    yield app
    app.close()


def order(worker: str, i: int, dispatch_id: str | None = None) -> DispatchOrder:
    return DispatchOrder(
        schedule=f"t.x@s{i}",
        task="t.x",
        args=(i, f"s{i}"),
        kwargs={"tag": f"t{i}", "nested": {"n": i}},
        dispatch_id=dispatch_id or uuid.uuid4().hex,
        worker=worker,
        queue=None,
        expires_s=60,
        should_start_by=0.0,
    )


def queued(probe: redis.Redis, key: str) -> list[dict[str, Any]]:
    """The messages in a Redis list, oldest first (kombu pushes at the head)."""
    return [json.loads(raw) for raw in reversed(probe.lrange(key, 0, -1))]


def comparable(message: dict[str, Any]) -> dict[str, Any]:
    """A message without what differs between two publishes of one order: the
    delivery tag, the expiry's absolute time, the queue (routing key)."""
    out = copy.deepcopy(message)
    del out["properties"]["delivery_tag"], out["headers"]["expires"]
    del out["properties"]["delivery_info"]["routing_key"]
    return out


class RoundTrips:
    """Counts the commands (a pipeline is one) sent on every Redis connection."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = redis.connection.AbstractConnection.send_packed_command

        def counting(conn: Any, command: Any, check_health: bool = True) -> None:
            self.count += 1
            real(conn, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)

    def during(self, publish: CeleryPublisher, orders: list[DispatchOrder]) -> int:
        before = self.count
        assert publish(orders) == []
        return self.count - before


def test_the_transport_batches(app: Celery) -> None:
    with app.producer_or_acquire() as producer:
        assert batches_publishes(producer), "kombu >= 5.7 batches on its Redis transport"
    memory = make_app("memory://")
    try:
        with memory.producer_or_acquire() as producer:
            assert not batches_publishes(producer)
        assert CeleryPublisher(memory)([order("celery@m", 1)]) == []  # one by one
    finally:
        memory.close()


def test_a_batched_message_is_the_one_send_task_sends_alone(
    app: Celery, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = uuid.uuid4().hex[:6]
    batched_worker, each_worker = f"celery@b-{tag}", f"celery@e-{tag}"
    ids = [uuid.uuid4().hex for _ in range(5)]
    batched, each = CeleryPublisher(app, chunk_size=2), CeleryPublisher(app, batched=False)
    trips = RoundTrips(monkeypatch)
    # Warm: the producer's connection, the queue's declaration.
    assert batched([order(batched_worker, 99)]) == each([order(each_worker, 99)]) == []
    assert trips.during(batched, [order(batched_worker, i, ids[i]) for i in range(5)]) == 3
    assert trips.during(each, [order(each_worker, i, ids[i]) for i in range(5)]) == 5
    probe = redis.Redis.from_url(redis_url)
    try:
        got = queued(probe, f"{batched_worker}.dq2")[1:]
        expected = queued(probe, f"{each_worker}.dq2")[1:]
    finally:
        probe.close()
    assert [comparable(m) for m in got] == [comparable(m) for m in expected]
    assert [m["headers"]["id"] for m in got] == ids
    assert [m["headers"]["dgs_dispatch_id"] for m in got] == ids
    assert [m["headers"]["dgs_schedule"] for m in got] == [f"t.x@s{i}" for i in range(5)]
    assert {m["properties"]["delivery_info"]["routing_key"] for m in got} == {
        f"{batched_worker}.dq2"
    }


def test_a_routed_priority_lands_in_the_same_priority_list(redis_url: str) -> None:
    app = make_app(redis_url, task_routes={"t.x": {"priority": 5}})
    tag = uuid.uuid4().hex[:6]
    workers = [f"celery@b-{tag}", f"celery@e-{tag}"]
    probe = redis.Redis.from_url(redis_url)
    try:
        assert CeleryPublisher(app)([order(workers[0], 1)]) == []
        assert CeleryPublisher(app, batched=False)([order(workers[1], 1)]) == []
        for worker in workers:  # kombu's priority step 3: "<queue>\x06\x163"
            assert probe.llen(f"{worker}.dq2") == 0
            (message,) = queued(probe, f"{worker}.dq2\x06\x163")
            assert message["properties"]["priority"] == 5
    finally:
        probe.close()
        app.close()


def test_publish_signals_fire_per_message_and_a_header_added_before_is_sent(
    app: Celery, redis_url: str
) -> None:
    worker = f"celery@sig-{uuid.uuid4().hex[:6]}"
    after: list[str] = []

    def stamp(headers: dict[str, Any], **_: Any) -> None:
        headers["trace"] = f"trace-{headers['dgs_schedule']}"

    def published(headers: dict[str, Any], **_: Any) -> None:
        after.append(headers["trace"])

    before_task_publish.connect(stamp, weak=False)
    after_task_publish.connect(published, weak=False)
    probe = redis.Redis.from_url(redis_url)
    try:
        assert CeleryPublisher(app, chunk_size=2)([order(worker, i) for i in range(3)]) == []
        traces = [m["headers"]["trace"] for m in queued(probe, f"{worker}.dq2")]
    finally:
        before_task_publish.disconnect(stamp)
        after_task_publish.disconnect(published)
        probe.close()
    assert traces == after == [f"trace-t.x@s{i}" for i in range(3)]


def test_a_pipeline_failing_with_an_error_reply_reports_its_chunk_and_the_rest(
    app: Celery, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The second pipeline carries a message for a worker whose queue key came
    to hold a string (after its queue was declared): Redis runs the other LPUSH
    of that pipeline and refuses this one. Both orders of the chunk, and the one
    after it (never sent), come back: the outcome of a failed pipeline is not
    known per message."""
    tag = uuid.uuid4().hex[:6]
    good, broken = f"celery@g-{tag}", f"celery@x-{tag}"
    publish = CeleryPublisher(app, chunk_size=2)
    probe = redis.Redis.from_url(redis_url)
    assert publish([order(broken, 9)]) == []  # declared (kombu declares a queue once)
    probe.set(f"{broken}.dq2", "not a list")
    orders = [order(good, 0), order(good, 1), order(good, 2), order(broken, 3), order(good, 4)]
    try:
        failed = publish(orders)
        landed = [m["headers"]["id"] for m in queued(probe, f"{good}.dq2")]
    finally:
        probe.delete(f"{broken}.dq2", f"{good}.dq2")
        probe.close()
    assert failed == orders[2:]
    assert landed == [o.dispatch_id for o in orders[:3]]  # the third is in the broker anyway
    assert "3 dispatch(es) not published (or not known to be)" in caplog.text


@pytest.fixture
def broker() -> Iterator[RedisServerProcess]:
    server = RedisServerProcess().start()
    yield server
    server.cleanup()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = open_store(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", 1, 2, 3, 4, 5)
    yield s
    s.close()


def proxied(server: RedisServerProcess) -> TcpProxy:
    host, port = server.url.split("//")[1].split("/")[0].split(":")
    return TcpProxy(host, int(port))


def test_a_connection_revived_mid_round_ends_the_round_in_one_line(
    broker: RedisServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker stops answering while the round's second message is sent and
    answers again 2.5 s later; the third message, for a worker whose queue is
    not declared yet, waits for it through kombu's retries, which give the
    producer a new channel. kombu refuses the batch from then on: the round
    stops with one log line, and every order is either in the broker or
    reported as not published."""
    proxy = proxied(broker)
    app = make_app(
        proxy.url(),
        broker_transport_options={"socket_timeout": 1, "socket_connect_timeout": 1},
        task_publish_retry_policy={"max_retries": 20, "interval_start": 0, "interval_step": 0.2},
    )
    tag = uuid.uuid4().hex[:6]
    known, new = f"celery@k-{tag}", f"celery@n-{tag}"
    publish = CeleryPublisher(app)
    assert publish([order(known, 0)]) == []
    messages = 0

    def stall(**_: Any) -> None:
        nonlocal messages
        messages += 1
        if messages == 2:
            proxy.blackhole()
            proxy.cut()
            threading.Timer(2.5, proxy.heal).start()

    orders = [order(known, 1), order(known, 2), order(new, 3), order(known, 4), order(known, 5)]
    before_task_publish.connect(stall, weak=False)
    direct = redis.Redis.from_url(broker.url)
    try:
        with caplog.at_level(logging.INFO, logger="celery_dgs"):
            failed = publish(orders)
        landed = {m["headers"]["id"] for m in queued(direct, f"{known}.dq2")[1:]}
        landed |= {m["headers"]["id"] for m in queued(direct, f"{new}.dq2")}
    finally:
        before_task_publish.disconnect(stall)
        app.close()
        proxy.close()
        direct.close()
    assert failed, "the producer kept its channel: nothing was revived"
    assert landed.isdisjoint(o.dispatch_id for o in failed)
    assert landed | {o.dispatch_id for o in failed} == {o.dispatch_id for o in orders}
    records = [r for r in caplog.records if r.name.startswith("celery_dgs")]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert f"{len(failed)} dispatch(es) not published (or not known to be)" in (
        records[0].getMessage()
    )


def test_a_broker_lost_mid_round_takes_back_the_unsent_and_keeps_the_sent(
    client: redis.Redis,
    store: SqlScheduleStore,
    broker: RedisServerProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Five schedules due, five free slots, pipelines of two messages; the
    broker's connection is cut, and the network holds what is sent to it from
    then on, while the second pipeline is being filled. The first two
    dispatches stay pending; the other three's records are taken back and their
    schedules are back in the index, and the next round sends them."""
    keys, worker = KeySpace(f"bp{uuid.uuid4().hex[:6]}"), "celery@w1"
    proxy = proxied(broker)
    app = make_app(
        proxy.url(),
        broker_connection_timeout=1,
        broker_connection_max_retries=1,
        broker_transport_options={"socket_timeout": 1, "socket_connect_timeout": 1},
        task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.1},
    )
    messages = 0

    def lose_the_broker(**_: Any) -> None:
        nonlocal messages
        messages += 1
        if messages == 3:
            proxy.blackhole()
            proxy.cut()

    publisher = CeleryPublisher(app, chunk_size=2)
    unsent: list[DispatchOrder] = []

    def publish(orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        failed = publisher(orders)
        unsent.extend(failed)
        return failed

    engine = beat_engine(
        store,
        client,
        keys,
        settings=DgsSettings(store_poll_interval=1000),
        publish=publish,
        monotonic=Mono(),
    )
    engine.registry.register(
        WorkerInfo(name=worker, node="w1", queues=("celery",), slots=5, pool="prefork", pid=1)
    )
    engine.load()
    before_task_publish.connect(lose_the_broker, weak=False)
    direct = redis.Redis.from_url(broker.url)
    try:
        with caplog.at_level(logging.WARNING, logger="celery_dgs"):
            engine.tick()
        before_task_publish.disconnect(lose_the_broker)
        sent = set(engine.state.pending)
        queue = [m["headers"] for m in queued(direct, f"{worker}.dq2")]
        names = {f"t.p{h}" for h in (1, 2, 3, 4, 5)}
        assert len(sent) == 2
        assert {h["dgs_schedule"] for h in queue} == sent
        assert {h["dgs_dispatch_id"] for h in queue} == {
            engine.state.pending[n].dispatch_id for n in sent
        }
        assert set(DispatchRecords(client, keys).pending_names()) == sent
        for name in names - sent:
            assert name in engine.ranking.index, name
            assert name not in engine.state.parked, name
        assert "is unreachable" in caplog.text
        assert "3 dispatch(es) not published" in caplog.text
        # Had a message of a taken-back dispatch reached the broker, it would be refused.
        assert {o.schedule for o in unsent} == names - sent
        for o in unsent:
            refused = engine.leases.acquire(
                o.schedule,
                owner_node="w1",
                owner_name=worker,
                owner_tag="x",
                dispatch_id=o.dispatch_id,
            )
            assert refused.status is AcquireStatus.STALE_DISPATCH
        # The network heals: the next round, on the same producer pool, sends the rest.
        proxy.heal()
        engine.tick()
        assert set(engine.state.pending) == names
        delivered = [m["headers"]["dgs_schedule"] for m in queued(direct, f"{worker}.dq2")]
        assert sorted(delivered) == sorted(names)
    finally:
        before_task_publish.disconnect(lose_the_broker)
        app.close()
        proxy.close()
        direct.close()
