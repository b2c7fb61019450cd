"""The Sentinel fixture tells a server binary without sentinel mode (which the
tests skip locally, and fail on under CI) from any other start failure."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from celery_dgs.embedded import find_server_binary
from celery_dgs.errors import EmbeddedServerError
from tests.support.redis_sentinel import RedisSentinelProcesses, SentinelModeUnsupported


def wrapper(tmp_path: Path, sentinel_stderr: str) -> Path:
    """The real server binary, except that ``--sentinel`` fails with ``sentinel_stderr``."""
    path = tmp_path / "server-wrapper"
    path.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = --sentinel ] && { echo '
        f"'{sentinel_stderr}' >&2; exit 1; }}; done\n"
        f'exec {find_server_binary()} "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_binary_without_sentinel_mode_is_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = wrapper(tmp_path, ">>> 'sentinel monitor dgsprimary' Bad directive or wrong number")
    monkeypatch.setenv("DGS_REDIS_SERVER", str(server))
    with pytest.raises(SentinelModeUnsupported, match="does not run as a sentinel"):
        RedisSentinelProcesses(tmp_path / "data").start()


def test_another_sentinel_failure_is_no_reason_to_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGS_REDIS_SERVER", str(wrapper(tmp_path, "Address already in use")))
    with pytest.raises(EmbeddedServerError) as raised:
        RedisSentinelProcesses(tmp_path / "data").start()
    assert not isinstance(raised.value, SentinelModeUnsupported)
