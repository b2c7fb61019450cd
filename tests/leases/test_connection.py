"""Connecting: password URLs, rediss:// with certificate checks, a restarted server,
the key prefix, and one round trip per operation."""

from __future__ import annotations

import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from celery_dgs.connection import redis_from_url
from celery_dgs.dispatches import DispatchRecord, DispatchRecords
from celery_dgs.embedded import RedisServerProcess, find_server_binary, free_port
from celery_dgs.errors import LeaseError, SettingsError
from celery_dgs.failures import explain_failure
from celery_dgs.keys import KeySpace
from celery_dgs.leases import AcquireStatus, RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.runtime import Runtime
from celery_dgs.settings import DgsSettings
from tests.conftest import IN_CI
from tests.leases.helpers import running_names, wait_for
from tests.leases.tls import TlsProxy, make_certificate, tls_server_binary

WORKER = WorkerInfo(name="celery@h", node="h", queues=("q",), slots=2, pool="solo", pid=1)


def exercise(client: redis.Redis, keys: KeySpace) -> None:
    """Touch every kind of key through the public API."""
    leases = RedisLeases(client, keys, ping_timeout=0.3, steal_delay=0.3)
    dispatches = DispatchRecords(client, keys)
    registry = WorkerRegistry(client, keys, ttl=5)
    dispatches.add_many([DispatchRecord(schedule="s", dispatch_id="d", worker="celery@h")], ttl=5)
    dispatches.add_many([DispatchRecord(schedule="t", dispatch_id="e", worker="celery@h")], ttl=5)
    assert leases.acquire(
        "s", owner_node="h", owner_name="celery@h", owner_tag="A", dispatch_id="d"
    ).granted
    assert leases.ping("s", "A", progress=0.5).owner
    assert leases.acquire("u", owner_node="h", owner_name="celery@h", owner_tag="B").granted
    leases.request_cancel("u", owner_tag="B")
    leases.beat_view()
    registry.register(WORKER)
    registry.heartbeat(WORKER.name)
    assert [w.name for w in registry.live_workers()] == [WORKER.name]
    assert running_names(leases) == {"s", "u"}
    assert {lease.schedule for lease in leases.all()} == {"s", "u"}


def test_password_url(tmp_path: Path) -> None:
    with RedisServerProcess(password="s3cret-pw", data_dir=tmp_path) as server:
        assert ":s3cret-pw@" in server.url
        client = redis_from_url(server.url)
        exercise(client, KeySpace())
        client.close()
        wrong = redis_from_url(server.url.replace("s3cret-pw", "nope"))
        with pytest.raises(LeaseError, match="acquire"):
            RedisLeases(wrong, KeySpace(), ping_timeout=1, steal_delay=1).acquire(
                "s", owner_node="n", owner_name="w", owner_tag="A"
            )
        wrong.close()


def skip_or_fail(reason: str) -> None:
    """Skip locally; under CI (``CI=true``) fail, so CI never silently loses a TLS test."""
    if IN_CI:
        pytest.fail(f"{reason}: CI must run the rediss:// tests")
    pytest.skip(reason)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA, and the server certificate it signed, with its key."""
    try:
        return make_certificate(tmp_path)
    except FileNotFoundError:
        skip_or_fail("openssl is not installed")
        raise


def other_ca(tmp_path: Path) -> Path:
    """A CA that signed nothing the server presents."""
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    return make_certificate(other_dir)[0]


def _tls_checks(url: str, ca: Path, untrusted_ca: Path) -> None:
    client = redis_from_url(url, ssl_cert_reqs="required", ssl_ca_certs=str(ca))
    exercise(client, KeySpace())
    client.close()
    untrusted = redis_from_url(url, ssl_cert_reqs="required", ssl_ca_certs=str(untrusted_ca))
    with pytest.raises(LeaseError):
        RedisLeases(untrusted, KeySpace(), ping_timeout=1, steal_delay=1).now()
    untrusted.close()


def test_rediss_through_a_tls_endpoint(
    redis_server: RedisServerProcess,
    redis_url: str,
    certificate: tuple[Path, Path, Path],
    tmp_path: Path,
) -> None:
    """Client-side TLS (rediss://, CA checks) against a TLS endpoint in front of the server."""
    ca, cert, key = certificate
    with TlsProxy(redis_server.port, cert, key) as proxy:
        _tls_checks(f"rediss://localhost:{proxy.port}/0", ca, other_ca(tmp_path))


@pytest.fixture
def native_tls_server(certificate: tuple[Path, Path, Path], tmp_path: Path) -> Iterator[int]:
    """A server binary built with TLS (the suite's own, or Debian's redis-server)
    serving TLS only, on the port it yields."""
    binary = tls_server_binary()
    if binary is None:
        skip_or_fail(
            f"neither {find_server_binary()} nor Debian's redis-server is a server built "
            "with TLS (install it with make redis-tls)"
        )
        raise AssertionError("unreachable")
    ca, cert, key = certificate
    port = free_port()
    proc = subprocess.Popen(
        [
            str(binary),
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(ca),
            "--tls-auth-clients",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        probe = redis_from_url(f"rediss://localhost:{port}/0", ssl_ca_certs=str(ca))
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        probe.close()
        yield port
    finally:
        proc.kill()
        proc.wait(10)


def test_rediss_against_a_tls_server(
    native_tls_server: int, certificate: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The server itself speaks TLS on that port (no proxy in between)."""
    url = f"rediss://localhost:{native_tls_server}/0"
    client = redis_from_url(url, ssl_cert_reqs="required", ssl_ca_certs=str(certificate[0]))
    assert client.config_get("tls-port") == {"tls-port": str(native_tls_server)}
    assert client.config_get("port") == {"port": "0"}
    client.close()
    _tls_checks(url, certificate[0], other_ca(tmp_path))


def test_a_tls_redis_as_celery_configures_it(
    native_tls_server: int, certificate: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The broker's TLS, configured the ways Celery's docs show: in the URL
    with the ``ssl`` module's spelling (``CERT_REQUIRED``), or in
    ``broker_use_ssl`` beside a plain ``redis://`` URL (kombu then speaks
    TLS); celery-dgs's Redis, falling back to the broker's, connects both
    ways. An untrusted certificate is a configuration error naming the
    setting and the option to set; a ``ssl_cert_reqs`` neither spells is
    refused naming the setting."""
    ca = str(certificate[0])
    port = native_tls_server
    spelt = Runtime(
        DgsSettings(),
        broker_url=f"rediss://localhost:{port}/0?ssl_cert_reqs=CERT_REQUIRED&ssl_ca_certs={ca}",
    )
    assert spelt.redis.ping()
    spelt.close()
    use_ssl = Runtime(
        DgsSettings(),
        broker_url=f"redis://localhost:{port}/0",
        broker_use_ssl={"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": ca},
    )
    assert use_ssl.redis_url == f"rediss://localhost:{port}/0"
    assert use_ssl.redis.ping()
    use_ssl.close()
    with pytest.raises(SettingsError, match=r"^broker_url: the Redis URL's ssl_cert_reqs='maybe'"):
        Runtime(DgsSettings(), broker_url=f"rediss://localhost:{port}/0?ssl_cert_reqs=maybe")
    untrusted_url = f"rediss://localhost:{port}/0?ssl_ca_certs={other_ca(tmp_path)}"
    untrusted = Runtime(DgsSettings(), broker_url=untrusted_url)
    with pytest.raises(redis.ConnectionError) as caught:
        untrusted.redis.ping()
    line, refused = explain_failure(
        caught.value, redis_url=untrusted_url, redis_setting="broker_url", database_url=""
    ) or ("", False)
    assert refused, "a configuration error, not an outage"
    assert ": its TLS certificate is not trusted (ConnectionError: " in line
    assert "give the CA that signed it, e.g. ?ssl_ca_certs=/path/ca.pem in broker_url" in line
    untrusted.close()


def test_scripts_survive_a_server_restart_and_min_token_restores_the_floor(
    fresh_redis_server: RedisServerProcess,
) -> None:
    client = redis_from_url(fresh_redis_server.url)
    leases = RedisLeases(client, KeySpace(), ping_timeout=0.3, steal_delay=0.3)
    for i in range(3):
        leases.acquire("s", owner_node="n", owner_name="w", owner_tag=f"T{i}")
        leases.release("s", f"T{i}")
    fresh_redis_server.restart(kill=True)  # data and script cache are gone
    assert leases.beat_view().running == set()  # reconnects, and loads the script again
    # A schedule granted before waits out the restart grace (ping_timeout +
    # steal_delay): a lease lost with the data may still have a live owner.
    result = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="X", min_token=3)
    assert result.status is AcquireStatus.RECOVERING
    assert result.grace_ends_at is not None
    # The grace began at the restart's first call (beat_view above), not here.
    assert 0.3 < (result.grace_ends_at - result.now).total_seconds() <= 0.6 + 0.001
    # One never granted (floor 0) has no lease to lose: no wait.
    assert leases.acquire("new", owner_node="n", owner_name="w", owner_tag="Y").granted
    result = wait_for(
        lambda: (
            leases.acquire("s", owner_node="n", owner_name="w", owner_tag="X", min_token=3).granted
            and leases.get("s")
        ),
        timeout=3,
    )
    assert result.token == 4  # above the durable floor, not the restarted counter (1)
    client.close()


@pytest.mark.parametrize("keyspace", [KeySpace("myapp:dgs"), KeySpace("tagged", hash_tag=True)])
def test_every_key_is_under_the_prefix(client: redis.Redis, keyspace: KeySpace) -> None:
    client.set("someone-else", "x")
    exercise(client, keyspace)
    written = {k.decode() for k in client.scan_iter(count=1000)} - {"someone-else"}
    expected_start = "{tagged}:" if keyspace.hash_tag else "myapp:dgs:"
    assert written
    assert [k for k in written if not k.startswith(expected_start)] == []
    assert {k.decode() for k in client.scan_iter(match=keyspace.pattern())} == written


class RoundTrips:
    """Counts requests sent (a pipeline is one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = cast(
            "Callable[..., None]", redis.connection.AbstractConnection.send_packed_command
        )

        def counting(conn: Any, command: Any, check_health: bool = True) -> None:
            self.count += 1
            original(conn, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)

    def of(self, call: Callable[[], object]) -> int:
        call()  # warm: connect and load the script once
        before = self.count
        call()
        return self.count - before


def test_one_round_trip_per_operation(
    client: redis.Redis, keys: KeySpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = RoundTrips(monkeypatch)
    leases = RedisLeases(client, keys, ping_timeout=1, steal_delay=1)
    dispatches = DispatchRecords(client, keys)
    registry = WorkerRegistry(client, keys, ttl=5)

    def acquire() -> None:
        leases.acquire("s", owner_node="n", owner_name="w", owner_tag="A")

    batch = [DispatchRecord(schedule=f"s{i}", dispatch_id="d", worker="w") for i in range(2500)]
    one_trip: dict[str, Callable[[], object]] = {
        "acquire": acquire,
        "ping": lambda: leases.ping("s", "A"),
        "request_cancel": lambda: leases.request_cancel("s", owner_tag="A"),
        "release": lambda: leases.release("s", "A"),
        "yield_lease": lambda: leases.yield_lease("s", "A"),
        "beat_view": leases.beat_view,
        "get": lambda: leases.get("s"),
        "get_many(500)": lambda: leases.get_many([f"s{i}" for i in range(500)]),
        "now": leases.now,
        "add_many(2500)": lambda: dispatches.add_many(batch, ttl=5),
        "current": lambda: dispatches.current("s1"),
        "pending_count": dispatches.pending_count,
        "pending_names": dispatches.pending_names,
        "expired": dispatches.expired,
        "take_back": lambda: dispatches.take_back("s1", "d"),
        "register": lambda: registry.register(WORKER),
        "heartbeat": lambda: registry.heartbeat(WORKER.name),
        "live_workers": registry.live_workers,
        "total_slots": registry.total_slots,
        "deregister": lambda: registry.deregister(WORKER.name),
    }
    acquire()
    assert {name: trips.of(call) for name, call in one_trip.items()} == dict.fromkeys(one_trip, 1)
    acquire()
    assert trips.of(leases.all) == 2  # ZRANGE, then one pipeline of HGETALLs
