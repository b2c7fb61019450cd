"""The cluster fixture tells a server binary without cluster mode (which the
tests skip locally, and fail on under CI) from any other start failure."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from celery_dgs.errors import EmbeddedServerError
from tests.support.redis_cluster import ClusterModeUnsupported, RedisClusterProcesses


def fake_server(tmp_path: Path, stderr: str) -> Path:
    path = tmp_path / "fake-server"
    path.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_binary_without_cluster_mode_is_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "DGS_REDIS_SERVER",
        str(
            fake_server(
                tmp_path,
                ">>> 'cluster-enabled \"yes\"' Bad directive or wrong number of arguments",
            )
        ),
    )
    with pytest.raises(ClusterModeUnsupported, match="does not run in cluster mode"):
        RedisClusterProcesses(tmp_path / "data").start()


def test_another_start_failure_is_no_reason_to_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGS_REDIS_SERVER", str(fake_server(tmp_path, "Address already in use")))
    with pytest.raises(EmbeddedServerError) as raised:
        RedisClusterProcesses(tmp_path / "data").start()
    assert not isinstance(raised.value, ClusterModeUnsupported)
