"""``celery -A proj dgs web``: serves the page in its own process (127.0.0.1
by default), and without the web extra stops with a message naming it."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import click
import pytest

from celery_dgs.cli.web import EXTRA, parse_bind
from celery_dgs.embedded import RedisServerProcess
from tests.web.conftest import WebWorld, free_port

ROOT = Path(__file__).resolve().parents[2]


def test_bind_defaults_to_localhost() -> None:
    assert parse_bind("8080") == ("127.0.0.1", 8080)
    assert parse_bind("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_bind("[::1]:9000") == ("::1", 9000)
    assert parse_bind(":9000") == ("127.0.0.1", 9000)
    with pytest.raises(click.BadParameter, match="HOST:PORT") as bad:
        parse_bind("localhost:http")
    assert "--bind" in bad.value.format_message(), "names the option"
    from celery_dgs.cli.web import web

    bind = next(p for p in web.params if p.name == "bind")
    assert str(bind.default).startswith("127.0.0.1:")


def test_without_the_extra_the_command_names_it(
    web: WebWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_uvicorn(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvicorn":
            raise ImportError("No module named 'uvicorn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvicorn)
    result = web.invoke("web", "--bind", "127.0.0.1:1")
    assert result.exit_code == 4
    assert f"pip install '{EXTRA}'" in result.output


def _web_command(sqlite_url: str, redis_url: str) -> tuple[list[str], dict[str, str]]:
    """``celery -A tests.cli.decl_proj dgs`` and its environment, its
    schedules synced (Redis is not needed for that)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DECL_REDIS_URL": redis_url,
        "DECL_DATABASE_URL": sqlite_url,
        "DECL_PREFIX": f"web{uuid.uuid4().hex[:6]}",
        "DECL_PERIOD": "3600",
    }
    script = Path(sys.executable).with_name("celery")
    celery = [str(script)] if script.exists() else [sys.executable, "-m", "celery"]
    base = [*celery, "-A", "tests.cli.decl_proj", "dgs"]
    synced = subprocess.run(
        [*base, "sync"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert synced.returncode == 0, synced.stderr
    return base, env


def _spawn_web(base: list[str], env: dict[str, str], port: int) -> subprocess.Popen[str]:
    """``celery ... dgs web`` on ``127.0.0.1:port``, its output piped."""
    return subprocess.Popen(
        [*base, "web", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _get_when_up(proc: subprocess.Popen[str], url: str, *, timeout: float = 30) -> tuple[int, str]:
    """The status and body of ``url`` once the server answers (an error
    status is an answer too)."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as answered:
            return answered.code, answered.read().decode()
        except OSError:
            assert time.monotonic() < deadline, f"{url} did not come up"
            time.sleep(0.1)


def test_the_command_serves_the_page(sqlite_url: str, redis_url: str) -> None:
    base, env = _web_command(sqlite_url, redis_url)
    port = free_port()
    proc = _spawn_web(base, env, port)
    try:
        status, body = _get_when_up(proc, f"http://127.0.0.1:{port}/schedules")
        assert status == 200
        assert "decl.a" in body
        assert "read-only" in body
    finally:
        proc.terminate()
        out, _err = proc.communicate(timeout=20)
    assert f"status page on http://127.0.0.1:{port}/ (read-only)" in out


def test_the_command_logs_each_sign_in_on_stderr(sqlite_url: str, redis_url: str) -> None:
    """Without a logging configuration of the application's, the page's log
    (INFO and up: every action, sign-in and refusal) goes to stderr."""
    base, env = _web_command(sqlite_url, redis_url)
    env["DECL_WEB_TOKEN"] = "s3cret-token-of-the-operator"
    port = free_port()
    proc = _spawn_web(base, env, port)
    try:
        assert _get_when_up(proc, f"http://127.0.0.1:{port}/schedules")[0] == 200

        def sign_in(token: str) -> None:
            form = urllib.parse.urlencode({"token": token}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/login", data=form)
            urllib.request.urlopen(request, timeout=10).close()

        sign_in(env["DECL_WEB_TOKEN"])  # the right one first: a wrong one starts a backoff
        with pytest.raises(urllib.error.HTTPError) as refused:
            sign_in("wrong-token")
        refused.value.close()
        assert refused.value.code == 403
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    assert "(actions once signed in with dgs_web_token)" in out
    assert "INFO] status page: operator signed in from 127.0.0.1" in err, err
    assert "WARNING] status page: refused sign-in from 127.0.0.1" in err, err
    assert "s3cret" not in err


def test_a_redis_not_reachable_yet_is_a_warning_and_the_page_comes_up_with_it(
    sqlite_url: str,
) -> None:
    redis_port = free_port()
    base, env = _web_command(sqlite_url, f"redis://127.0.0.1:{redis_port}/0")
    port = free_port()
    proc = _spawn_web(base, env, port)
    try:
        status, _ = _get_when_up(proc, f"http://127.0.0.1:{port}/api/overview")
        assert status == 503, "no page can be read without Redis"
        with RedisServerProcess(port=redis_port):
            deadline = time.monotonic() + 30
            while (status := _get_when_up(proc, f"http://127.0.0.1:{port}/schedules")[0]) != 200:
                assert time.monotonic() < deadline, f"still {status} with Redis up"
                time.sleep(0.2)
            assert proc.poll() is None
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    assert f"status page on http://127.0.0.1:{port}/ (read-only)" in out
    assert f"warning: Redis at redis://127.0.0.1:{redis_port}/0 (broker_url) is unreachable" in err
    assert "the page answers 503 until it is reachable" in err


def test_an_address_in_use_is_one_line_and_no_page_address(web: WebWorld) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = web.invoke("web", "--bind", f"127.0.0.1:{port}")
    assert result.exit_code == 1, result.output
    assert f"Error: cannot serve on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "status page on" not in result.stdout
