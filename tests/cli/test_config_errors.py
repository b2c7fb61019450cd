"""Configuration mistakes and out-of-range options: one clear line and a
documented exit status (4: configuration; 2: usage), never a traceback; 3 stays
"Redis or the store unavailable"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from celery_dgs.cli.context import EXIT_CONFIG, EXIT_UNAVAILABLE
from tests.cli.conftest import World, now, spec
from tests.support.postgres import PostgresServer, postgres_available


def configure(world: World, **conf: Any) -> None:
    world.app.conf.update(conf)


def assert_config_error(world: World, *args: str) -> str:
    result = world.invoke(*args)
    assert result.exit_code == EXIT_CONFIG == 4, result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: configuration: ")
    return lines[0]


def test_an_unknown_setting_is_a_configuration_error_not_unavailable(world: World) -> None:
    configure(world, dgs_ping_intervall=5)
    for command in ("status", "check", "sync"):
        line = assert_config_error(world, command)
        assert "unknown setting 'dgs_ping_intervall'; did you mean 'dgs_ping_interval'?" in line


def test_a_database_url_whose_driver_is_missing_names_the_setting_and_the_package(
    world: World,
) -> None:
    configure(world, dgs_database_url="postgresql+pg8000://scott:tiger-secret@db.example/sched")
    line = assert_config_error(world, "status")
    assert "dgs_database_url 'postgresql+pg8000://scott:***@db.example/sched'" in line
    assert "driver 'pg8000' is not installed; install it (pip install 'pg8000')" in line
    assert "tiger-secret" not in line


def test_a_database_the_store_does_not_run_on_is_refused_by_name(world: World) -> None:
    configure(world, dgs_database_url="mysql://scott:tiger-secret@db.example/sched")
    line = assert_config_error(world, "status")
    assert (
        "dgs_database_url 'mysql://scott:***@db.example/sched': celery-dgs keeps its "
        "schedules in SQLite or PostgreSQL, not 'mysql'"
    ) in line
    assert "tiger-secret" not in line


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysqll://u:pw@h/db", "unknown database dialect 'mysqll'"),
        ("not a url", "dgs_database_url '<not a URL>': not a database URL"),
        (5, "dgs_database_url must be a database URL string, got 5"),
    ],
)
def test_unusable_database_urls(world: World, url: object, message: str) -> None:
    configure(world, dgs_database_url=url)
    assert message in assert_config_error(world, "status")


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_a_sqlite_file_in_a_missing_directory_is_unavailable_naming_the_directory(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool
) -> None:
    # Unavailable (3), not a configuration error: the directory may yet
    # appear (a volume mounted late), and beat retries until it does.
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "no" / "such"
    path = "no/such" if relative else str(missing)
    configure(world, dgs_database_url=f"sqlite:///{path}/dgs.sqlite3")
    result = world.invoke("status")
    assert result.exit_code == EXIT_UNAVAILABLE == 3, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: schedule store: OperationalError: "), line
    assert f"; the directory {str(missing)!r} of the SQLite file does not exist" in line
    assert line.endswith(": SQLite creates the file, not its directory"), line
    assert ("(a relative path, read from " in line) is relative
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"dgs_redis_url": 6379}, "dgs_redis_url must be a redis:// URL string, got 6379"),
        (
            {"dgs_redis_url": "redis://:secret@host:port/0"},
            "dgs_redis_url 'redis://host:port/0': Port could not be cast",
        ),
        ({"dgs_redis_url": "http://host/0"}, "dgs_redis_url is not a Redis URL (scheme 'http')"),
        ({"dgs_redis_url": "user:secret@host:6379/0"}, "dgs_redis_url is not a Redis URL (no"),
        ({"dgs_redis_url": "redis//localhost:6379"}, "dgs_redis_url is not a Redis URL (no"),
        (
            {"broker_url": "redis://:secret@localhost:notaport/0"},
            "broker_url 'redis://localhost:notaport/0': Port could not be cast",
        ),
        ({"broker_url": "amqp://localhost//"}, "celery-dgs needs Redis: set dgs_redis_url"),
        (
            {"dgs_redis_url": "redis://:se@cret/pw@localhost:6379/0"},
            "dgs_redis_url has an '@' past its host: a password holding '@', '/', ':', '?' "
            "or '#' must be percent-encoded (%40, %2F, %3A, %3F, %23)",
        ),
        ({"dgs_retry_backoff": 300}, "dgs_retry_backoff must be a list of delays in seconds"),
        ({"dgs_retry_backoff": "300"}, "dgs_retry_backoff must be a list of delays in seconds"),
        ({"dgs_metrics_addr": 8080}, "dgs_metrics_addr must be an address to bind to"),
        ({"dgs_run_retention": 1e300}, "dgs_run_retention must be at most 3153600000 seconds"),
        ({"dgs_ping_timeout": 10**30}, "dgs_ping_timeout must be at most 3153600000 seconds"),
        ({"dgs_prune_batch_size": 10**20}, "dgs_prune_batch_size must be at most 1000000"),
        ({"dgs_reap_batch_size": 10**20}, "dgs_reap_batch_size must be at most 1000000"),
    ],
)
def test_invalid_settings(world: World, conf: dict[str, Any], message: str) -> None:
    configure(world, **conf)
    for command in ("status", "check"):
        line = assert_config_error(world, command)
        assert message in line
        assert "secret" not in line


def test_a_redis_database_number_the_server_lacks_is_a_configuration_error(
    world: World, redis_url: str
) -> None:
    configure(world, dgs_redis_url=redis_url.rpartition("/")[0] + "/99")
    line = assert_config_error(world, "status")
    assert "has no such database (ResponseError: DB index is out of range)" in line
    assert line.endswith(": fix the database number in dgs_redis_url")


def test_unreachable_redis_is_still_unavailable(world: World) -> None:
    configure(world, broker_url="redis://127.0.0.1:9/0")
    assert world.invoke("status").exit_code == EXIT_UNAVAILABLE == 3


def test_a_database_refusing_the_password_is_a_configuration_error(world: World) -> None:
    """As for Redis, and in beat's words: exit 4, one line naming the setting."""
    if not postgres_available():
        pytest.skip("PostgreSQL binaries not found")
    server = PostgresServer(password="the-right-one").start()
    try:
        configure(world, dgs_database_url=server.url(password="not-the-password"))
        line = assert_config_error(world, "status")
    finally:
        server.stop()
    assert "(dgs_database_url) refused the credentials (OperationalError: " in line
    assert line.endswith(": fix the password in dgs_database_url")
    assert "not-the-password" not in line
    assert "sqlalche.me" not in line


def test_a_schema_newer_than_this_celery_dgs_is_a_configuration_error(world: World) -> None:
    """After a rollback to an older celery-dgs: one line, not alembic's traceback."""
    with world.store.engine.begin() as conn:
        conn.execute(text("UPDATE dgs_alembic_version SET version_num = '0099_future'"))
    world.app.conf.dgs_database_url = str(world.store.engine.url)
    line = assert_config_error(world, "status")
    assert "has schema revision '0099_future', which this celery-dgs does not know" in line


def test_the_exit_statuses_are_documented(world: World) -> None:
    help_text = " ".join(world.invoke("--help").stdout.split())
    assert "3 Redis or the store unavailable; 4 configuration error" in help_text


def test_runs_limit_out_of_range_is_a_usage_error(world: World) -> None:
    world.sync(spec("t.a"), at=now())
    world.record("t.a", "success", now())
    result = world.invoke("runs", "t.a", "--limit", "99999999999999999999999")
    assert result.exit_code == 2, result.output
    assert "'--limit' / '-n': 99999999999999999999999 is not in the range 1<=x<=1000000" in (
        result.stderr
    )
    assert world.invoke("runs", "t.a", "--limit", "1000000").exit_code == 0


@pytest.mark.parametrize("value", ["nan", "inf", "1e300"])
def test_status_watch_interval_must_be_a_finite_number_of_seconds(world: World, value: str) -> None:
    result = world.invoke("status", "--watch", value)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--watch'" in result.stderr


def test_without_an_app_the_error_says_to_pass_one(tmp_path: Path) -> None:
    """``celery dgs status`` with no ``-A``: Celery's default app has no Redis,
    and the one line says how to name the project's app."""
    script = Path(sys.executable).with_name("celery")
    celery = [str(script)] if script.exists() else [sys.executable, "-m", "celery"]
    env = {k: v for k, v in os.environ.items() if k not in ("APP", "CELERY_BROKER_URL")}
    result = subprocess.run(
        [*celery, "dgs", "status"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == EXIT_CONFIG, result.stderr
    assert result.stderr.strip().splitlines() == [
        "Error: configuration: celery-dgs needs Redis: set dgs_redis_url, or use a redis:// "
        "broker_url (no app given: run this as `celery -A proj dgs ...`)"
    ]


@pytest.mark.timeout(60)  # the page, were it served, would not return
@pytest.mark.parametrize("command", ["status", "web"])
@pytest.mark.parametrize("password", ["", ":not-the-password@"])
def test_redis_refusing_the_credentials_names_the_server_and_the_setting(
    world: World, password: str, command: str
) -> None:
    """No password, or a wrong one, for a Redis that asks for one: a
    configuration error naming the server (password hidden) and the
    setting, as beat and the worker say it; the status page is not served."""
    from celery_dgs.embedded import RedisServerProcess, free_port

    args = ["web", "--bind", f"127.0.0.1:{free_port()}"] if command == "web" else [command]
    with RedisServerProcess(password="the-right-one") as guarded:
        configure(world, dgs_redis_url=f"redis://{password}127.0.0.1:{guarded.port}/0")
        line = assert_config_error(world, *args)
    shown = ":**@" if password else ""
    assert f"Redis at redis://{shown}127.0.0.1:{guarded.port}/0 (dgs_redis_url)" in line
    if password:
        assert "refused the credentials" in line
        assert "fix the password in dgs_redis_url" in line
    else:  # the server's own words (HELLO ...) say less
        assert line.endswith("requires a password, and dgs_redis_url gives none"), line
    assert "not-the-password" not in line
