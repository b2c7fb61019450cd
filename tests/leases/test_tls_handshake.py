"""``rediss://`` pointed at a server without TLS: the server never answers
the handshake, so the client gives up within its connect timeout (at most
``TLS_HANDSHAKE_TIMEOUT_S``), not its read timeout, with one line saying so;
``celery dgs status`` with the default settings fails that fast too."""

from __future__ import annotations

import time

import pytest
import redis
from celery import Celery
from celery.bin.base import CLIContext
from click.testing import CliRunner

from celery_dgs.cli import dgs as dgs_group
from celery_dgs.connection import TLS_HANDSHAKE_TIMEOUT_S, redis_from_url
from celery_dgs.dgs import DGS


def test_the_handshake_is_bounded_by_the_connect_timeout(redis_url: str) -> None:
    client = redis_from_url(
        redis_url.replace("redis://", "rediss://"), socket_timeout=30, socket_connect_timeout=1
    )
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError) as failed:
        client.ping()
    took = time.monotonic() - started
    client.close()
    assert took < 5, f"took {took:.1f} s with a 1 s connect timeout"
    message = str(failed.value)
    assert "TLS handshake" in message
    assert "rediss:// needs a TLS port" in message


def test_status_over_rediss_to_a_plain_server_fails_fast_in_one_line(
    sqlite_url: str, redis_url: str
) -> None:
    app = Celery(
        "tlsprobe", broker=redis_url.replace("redis://", "rediss://"), set_as_current=False
    )
    app.conf.update(dgs_database_url=sqlite_url)  # default timeouts: 67.5 s to read
    DGS(app, install_worker_hooks=False)
    try:
        started = time.monotonic()
        result = CliRunner().invoke(
            dgs_group, ["status"], obj=CLIContext(app=app, no_color=True, workdir=None)
        )
        took = time.monotonic() - started
    finally:
        app.close()
    assert result.exit_code != 0
    assert took < TLS_HANDSHAKE_TIMEOUT_S + 5
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "TLS handshake" in lines[0]
