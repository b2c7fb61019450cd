"""The worker's start-up check (celery_dgs/worker/startup.py) and the one-line
explanations of connection failures (celery_dgs/failures.py), against real
Redis servers; a worker process refusing to start is in
tests/e2e/test_startup_e2e.py."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis
from celery import Celery
from sqlalchemy import exc as sa_exc

from celery_dgs.dgs import DGS
from celery_dgs.embedded import RedisServerProcess, free_port
from celery_dgs.errors import LeaseError
from celery_dgs.failures import connection_failure, explain_failure, redact_url
from celery_dgs.worker.startup import StartRefused, check_before_start


def app_with(broker: str, **conf: Any) -> tuple[Any, DGS]:
    app = Celery("startup-check", broker=broker, set_as_current=False)
    app.conf.update(conf)
    return app, DGS(app, install_worker_hooks=False)


def test_no_redis_url_is_refused_naming_the_settings() -> None:
    app, dgs = app_with("memory://")
    with pytest.raises(StartRefused, match="dgs_redis_url"):
        check_before_start(app, dgs)


def test_an_invalid_value_is_refused_naming_the_setting(redis_url: str) -> None:
    app, dgs = app_with(redis_url, dgs_ping_interval=-1)
    with pytest.raises(StartRefused, match="dgs_ping_interval"):
        check_before_start(app, dgs)


def test_a_refused_password_is_refused_naming_the_setting() -> None:
    with RedisServerProcess(password="right") as server:
        app, dgs = app_with(f"redis://:wrong@127.0.0.1:{server.port}/0")
        with pytest.raises(StartRefused) as raised:
            check_before_start(app, dgs)
    text = str(raised.value)
    assert "refused the credentials" in text
    assert "broker_url" in text
    assert ":wrong@" not in text  # no password in the line


def test_an_unreachable_redis_only_warns(caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    app, dgs = app_with("memory://", dgs_redis_url=url)
    caplog.set_level(logging.WARNING, logger="celery_dgs")
    rt = check_before_start(app, dgs)
    assert rt.redis_url == url
    (record,) = caplog.records
    assert f"Redis at {url} (dgs_redis_url) is unreachable" in record.getMessage()
    assert record.exc_info is None


def test_a_reachable_redis_with_the_right_password_passes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with RedisServerProcess(password="right") as server:
        app, dgs = app_with(server.url)
        caplog.set_level(logging.WARNING, logger="celery_dgs")
        check_before_start(app, dgs)
    assert caplog.records == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@host:6379/0", "redis://:**@host:6379/0"),
        ("redis://user:s3cret@host/1", "redis://user:**@host/1"),
        ("rediss://:s3cret@[::1]:6380/0", "rediss://:**@[::1]:6380/0"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("postgresql+psycopg://dgs:s3cret@db:5432/dgs", "postgresql+psycopg://dgs:**@db:5432/dgs"),
        ("sqlite:////var/lib/dgs.sqlite3", "sqlite:////var/lib/dgs.sqlite3"),
        ("redis://host:6379/0?password=s3cret&db=1", "redis://host:6379/0?password=**&db=1"),
        ("redis://:a@host/0?PASSWORD=s3cret", "redis://:**@host/0?PASSWORD=**"),
        # a password's '/' and '@' not percent-encoded: all of it before the last '@'
        ("redis://:p@ss/w:rd@127.0.0.1:6380/2", "redis://**@127.0.0.1:6380/2"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def wrapped(error: BaseException) -> LeaseError:
    try:
        try:
            raise error
        except BaseException as exc:
            raise LeaseError("acquire.lua failed") from exc
    except LeaseError as outer:
        return outer


def test_connection_failures_are_found_through_the_exception_chain() -> None:
    assert connection_failure(wrapped(redis.ConnectionError("refused"))) == ("redis", False)
    assert connection_failure(wrapped(redis.TimeoutError("slow"))) == ("redis", False)
    assert connection_failure(wrapped(redis.AuthenticationError("WRONGPASS"))) == ("redis", True)
    refused = sa_exc.OperationalError(
        "SELECT 1", {}, Exception('FATAL:  password authentication failed for user "dgs"')
    )
    assert connection_failure(refused) == ("database", True)
    down = sa_exc.OperationalError("SELECT 1", {}, Exception("unable to open database file"))
    assert connection_failure(down) == ("database", False)
    assert connection_failure(wrapped(ValueError("a bug"))) is None
    assert connection_failure(redis.ResponseError("WRONGTYPE")) is None


@pytest.mark.parametrize(
    ("error", "url", "line"),
    [
        (
            redis.ResponseError("DB index is out of range"),
            "redis://:pw@host:6379/99",
            "Redis at redis://:**@host:6379/99 (dgs_redis_url) has no such database "
            "(ResponseError: DB index is out of range): fix the database number in dgs_redis_url",
        ),
        (
            redis.AuthenticationError("HELLO must be called with the client already authenticated"),
            "redis://host:6379/0",
            "Redis at redis://host:6379/0 (dgs_redis_url) requires a password, and "
            "dgs_redis_url gives none",
        ),
        (
            redis.AuthenticationError("invalid username-password pair"),
            "redis://:wrong@host:6379/0",
            "Redis at redis://:**@host:6379/0 (dgs_redis_url) refused the credentials "
            "(AuthenticationError: invalid username-password pair): fix the password in "
            "dgs_redis_url",
        ),
    ],
)
def test_redis_configuration_mistakes_are_named(error: Exception, url: str, line: str) -> None:
    explained = explain_failure(
        wrapped(error), redis_url=url, redis_setting="dgs_redis_url", database_url="sqlite://"
    )
    assert explained == (line, True)


def test_explain_failure_is_one_line_naming_server_and_setting() -> None:
    down = sa_exc.OperationalError("SELECT 1", {}, Exception("could not connect\n  to server"))
    line, refused = explain_failure(
        down,
        redis_url=None,
        redis_setting="broker_url",
        database_url="postgresql+psycopg://dgs:pw@db/dgs",
    ) or ("", True)
    assert not refused
    assert line == (
        "the database at postgresql+psycopg://dgs:**@db/dgs (dgs_database_url) "
        "is unreachable (Exception: could not connect to server)"
    )
    assert (
        explain_failure(
            ValueError("x"), redis_url=None, redis_setting="broker_url", database_url="sqlite://"
        )
        is None
    )


def test_a_sqlite_file_in_a_missing_directory_is_explained(tmp_path: Any) -> None:
    import sqlite3

    url = f"sqlite:///{tmp_path}/not-yet/dgs.sqlite3"
    try:
        sqlite3.connect(f"{tmp_path}/not-yet/dgs.sqlite3")
    except sqlite3.OperationalError as exc:
        down = sa_exc.OperationalError("SELECT 1", {}, exc)
    line, refused = explain_failure(
        down, redis_url=None, redis_setting="broker_url", database_url=url
    ) or ("", True)
    assert not refused
    assert line == (
        f"the database at {url} (dgs_database_url) is unreachable (OperationalError: unable "
        f"to open database file: the directory '{tmp_path}/not-yet' of the SQLite file "
        "does not exist: SQLite creates the file, not its directory)"
    )
    (tmp_path / "not-yet").mkdir()
    line, _ = explain_failure(
        down, redis_url=None, redis_setting="broker_url", database_url=url
    ) or ("", True)
    assert "does not exist" not in line, "said only while it is missing"
