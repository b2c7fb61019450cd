"""A PostgreSQL connect gives up after the store's connect timeout: a server
that accepts the TCP connection and never answers (a stuck host, a black-holed
port behind a load balancer) fails a connect in seconds, not after minutes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from celery_dgs.store import engine as store_engine
from celery_dgs.store.engine import make_engine

pytest.importorskip("psycopg")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose listener takes connections into its backlog and never speaks."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def connect_seconds(url: str, limit_s: float) -> float:
    """How long a connect through ``make_engine(url)`` took to fail (the test
    fails if it has not within ``limit_s``)."""
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            with make_engine(url).connect() as conn:
                conn.execute(text("SELECT 1"))
        except BaseException as exc:
            outcome.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(limit_s)
    assert not worker.is_alive(), f"the connect still waited after {limit_s} s"
    assert len(outcome) == 1
    assert isinstance(outcome[0], OperationalError)
    assert "timeout" in str(outcome[0]).lower()
    return time.monotonic() - started


def test_the_default_timeout_ends_a_connect_to_a_silent_server(
    silent_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_engine, "POSTGRES_CONNECT_TIMEOUT_S", 1)
    elapsed = connect_seconds(f"postgresql+psycopg://u:p@127.0.0.1:{silent_port}/db", 15.0)
    assert elapsed < 8.0


def test_a_timeout_in_the_url_wins(silent_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_engine, "POSTGRES_CONNECT_TIMEOUT_S", 600)
    url = f"postgresql+psycopg://u:p@127.0.0.1:{silent_port}/db?connect_timeout=1"
    assert connect_seconds(url, 15.0) < 8.0


def test_engine_options_may_set_their_own(silent_port: int) -> None:
    engine = make_engine(
        f"postgresql+psycopg://u:p@127.0.0.1:{silent_port}/db",
        {"connect_args": {"connect_timeout": 1, "application_name": "x"}},
    )
    started = time.monotonic()
    with pytest.raises(OperationalError), engine.connect():
        pass
    assert time.monotonic() - started < 8.0
