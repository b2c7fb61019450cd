"""Fixtures of the worker tests: a runtime on the session's Redis-compatible
server, and one on a server of the test's own (which the test may stop), both
on the test's SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from celery_dgs.embedded import RedisServerProcess
from celery_dgs.runtime import Runtime
from tests.worker.helpers import make_runtime


@pytest.fixture
def rt(redis_url: str, db_path: Path) -> Iterator[Runtime]:
    runtime = make_runtime(redis_url, db_path)
    yield runtime
    runtime.close()


@pytest.fixture
def patient_rt(redis_url: str, db_path: Path) -> Iterator[Runtime]:
    """``rt`` fenced after 9.75 s, not 0.75 s: for the tests that are not
    about fencing (a loaded machine has taken over a second to record a
    run's start, and the run then fenced itself)."""
    runtime = make_runtime(redis_url, db_path, ping_timeout=10.0)
    yield runtime
    runtime.close()


@pytest.fixture
def fresh_rt(fresh_redis_server: RedisServerProcess, db_path: Path) -> Iterator[Runtime]:
    """A runtime on ``fresh_redis_server``, free to be stopped by the test."""
    runtime = make_runtime(fresh_redis_server.url, db_path)
    yield runtime
    runtime.close()
