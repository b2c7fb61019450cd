"""The proxy the partition and latency scenarios rely on, against a real server."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tests.faults.proxy import TcpProxy


def test_blackhole_holds_traffic_until_heal(proxy: TcpProxy) -> None:
    client = redis.Redis.from_url(proxy.url(), socket_timeout=0.5)
    assert client.ping()
    proxy.blackhole()
    with pytest.raises(redis.TimeoutError):
        client.ping()
    slow = redis.Redis.from_url(proxy.url(), socket_timeout=5)
    began = time.monotonic()
    threading.Timer(0.5, proxy.heal).start()
    assert slow.set("k", "v"), "a command sent into the blackhole is delivered at the heal"
    assert time.monotonic() - began >= 0.45
    assert client.get("k") == b"v"


def test_delay_applies_each_way(proxy: TcpProxy) -> None:
    client = redis.Redis.from_url(proxy.url(), socket_timeout=2)
    assert client.ping()
    proxy.set_delay(0.3)
    began = time.monotonic()
    assert client.ping()
    assert 0.55 <= time.monotonic() - began < 1.5
    proxy.heal()


def test_cut_resets_open_connections(proxy: TcpProxy) -> None:
    client = redis.Redis.from_url(proxy.url(), socket_timeout=2)
    assert client.ping()
    conn = client.connection_pool.get_connection()
    proxy.cut()
    with pytest.raises((redis.ConnectionError, OSError)):
        conn.send_command("PING") or conn.read_response()  # type: ignore[func-returns-value]
