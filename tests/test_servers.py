"""The real-server fixtures start, answer, restart and stop real processes."""

from __future__ import annotations

import pytest
import redis
import sqlalchemy as sa

from celery_dgs.embedded import RedisServerProcess
from tests.support.processes import alive


def test_redis_server_process_restart_loses_data_and_stop_ends_pid() -> None:
    server = RedisServerProcess().start()
    try:
        client = redis.Redis.from_url(server.url)
        client.set("k", "v")
        first_pid = server.pid
        run_id_before = client.info("server")["run_id"]
        server.restart(kill=True)
        assert server.pid != first_pid
        assert first_pid is not None
        assert not alive(first_pid)
        client = redis.Redis.from_url(server.url)
        assert client.get("k") is None  # no persistence: a crash loses the data
        assert client.info("server")["run_id"] != run_id_before
        pid = server.pid
        server.stop()
        assert pid is not None
        assert not alive(pid)
    finally:
        server.cleanup()


def test_a_chosen_port_taken_before_the_start_is_replaced_and_a_given_one_is_not() -> None:
    """Another process may bind the port a server was given by ``free_port``
    before the server does (test workers opening connections): the server
    takes another; a port the caller gave stays an error."""
    import socket

    from celery_dgs.errors import EmbeddedServerError

    server = RedisServerProcess()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", server.port))
        taken.listen()
        busy = server.port
        try:
            server.start()
            assert server.port != busy
            assert redis.Redis.from_url(server.url).ping()
            server.restart()
            assert redis.Redis.from_url(server.url).ping(), "restarted on the same port"
        finally:
            server.cleanup()
        given = RedisServerProcess(port=busy)
        with pytest.raises(EmbeddedServerError, match="Address already in use"):
            given.start()
        given.cleanup()


def test_redis_server_with_password() -> None:
    with RedisServerProcess(password="s3cret") as server:
        assert ":s3cret@" in server.url
        assert redis.Redis.from_url(server.url).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=server.host, port=server.port).ping()


def test_redis_url_fixture_gives_a_clean_database(redis_client: redis.Redis) -> None:
    assert redis_client.dbsize() == 0
    redis_client.set("left-over", 1)


def test_redis_url_fixture_flushes_between_tests(redis_client: redis.Redis) -> None:
    assert redis_client.dbsize() == 0
    redis_client.set("left-over", 1)


@pytest.mark.postgres
def test_postgres_fixture_runs_a_real_server(pg_url: str) -> None:
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        version = conn.execute(sa.text("select version()")).scalar_one()
    engine.dispose()
    assert "PostgreSQL" in version
