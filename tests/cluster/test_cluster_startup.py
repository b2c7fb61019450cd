"""Starting with ``dgs_redis_cluster``: a worker checks the cluster before it
starts (refusing when the server has no cluster mode, warning only when the
cluster is unreachable), and beat exits with one line when the server has no
cluster mode (a setting that can never work)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.bin.base import CLIContext
from click.testing import CliRunner

from celery_dgs.cli import dgs as dgs_group
from celery_dgs.connection import redis_from_url
from celery_dgs.dgs import DGS
from celery_dgs.embedded import free_port
from celery_dgs.errors import SettingsError
from celery_dgs.worker.startup import StartRefused, check_before_start
from tests.e2e.harness import Cluster
from tests.e2e.test_startup_e2e import EX_CONFIG, assert_no_traceback, exit_status, lines_with

pytestmark = pytest.mark.redis_ha

CLUSTER_CONF = {"dgs_redis_cluster": True, "dgs_redis_cluster_hash_tag": True}


def app_with(broker: str, **conf: Any) -> tuple[Any, DGS]:
    app = Celery("cluster-startup", broker=broker, set_as_current=False)
    app.conf.update(conf)
    return app, DGS(app, install_worker_hooks=False)


def test_a_worker_checks_the_cluster_before_it_starts(
    cluster_url: str, redis_url: str, sqlite_url: str
) -> None:
    app, dgs = app_with(
        redis_url, dgs_redis_url=cluster_url, dgs_database_url=sqlite_url, **CLUSTER_CONF
    )
    rt = check_before_start(app, dgs)
    assert rt.redis_url == cluster_url
    rt.close()
    app.close()


def test_a_worker_refuses_the_cluster_setting_on_a_server_without_cluster_mode(
    redis_url: str, sqlite_url: str
) -> None:
    app, dgs = app_with(
        redis_url, dgs_redis_url=redis_url, dgs_database_url=sqlite_url, **CLUSTER_CONF
    )
    with pytest.raises(StartRefused) as refused:
        check_before_start(app, dgs)
    assert str(refused.value) == (
        f"invalid setting: dgs_redis_cluster is on, but the Redis at {redis_url} runs "
        "without cluster mode: set dgs_redis_cluster = False"
    )
    app.close()


def test_an_unreachable_cluster_only_warns(
    redis_url: str, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}"
    app, dgs = app_with(
        redis_url, dgs_redis_url=nowhere, dgs_database_url=sqlite_url, **CLUSTER_CONF
    )
    with caplog.at_level(logging.WARNING, logger="celery_dgs"):
        rt = check_before_start(app, dgs)
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"Redis at {nowhere} (dgs_redis_url) is unreachable" in line
    assert "scheduled runs are skipped until it answers" in line
    rt.close()
    app.close()


@pytest.mark.e2e
def test_beat_with_the_cluster_setting_on_a_plain_server_exits_after_one_line(
    tmp_path: Path, redis_url: str
) -> None:
    conf = {"dgs_redis_url": redis_url, **CLUSTER_CONF}
    cluster = type("StartupCluster", (Cluster,), {"app_module": "tests.e2e.robust_proj"})(
        tmp_path,
        redis_url,
        ["marker"],
        E2E_MARKER=str(tmp_path / "marker"),
        E2E_EXTRA_CONF=json.dumps(conf),
    )
    try:
        beat = cluster.start_beat()
        assert exit_status(beat) == EX_CONFIG
    finally:
        cluster.stop_all()
    log = cluster.log_since("beat", 0)
    (line,) = lines_with(log, "celery-dgs beat: cannot start")
    assert "invalid setting: dgs_redis_cluster is on" in line
    assert "runs without cluster mode: set dgs_redis_cluster = False" in line
    assert_no_traceback(log)


def test_a_worker_refuses_a_cluster_node_without_the_cluster_setting(
    cluster_url: str, redis_url: str, sqlite_url: str
) -> None:
    """The opposite mistake: a cluster node with ``dgs_redis_cluster`` off
    (a plain client gets MOVED or CROSSSLOT for most calls) is refused at
    the start, one line naming the settings; ``status`` says the same and
    exits 4 (configuration), not 3 (unavailable)."""
    app, dgs = app_with(redis_url, dgs_redis_url=cluster_url, dgs_database_url=sqlite_url)
    with pytest.raises(StartRefused) as refused:
        check_before_start(app, dgs)
    assert str(refused.value) == (
        f"Redis at {cluster_url} (dgs_redis_url) is a node of a Redis Cluster: set "
        "dgs_redis_cluster = True and dgs_redis_cluster_hash_tag = True (operations.md: "
        "Redis Cluster)"
    )
    obj = CLIContext(app=app, no_color=True, workdir=None)
    result = CliRunner().invoke(dgs_group, ["status"], obj=obj)
    assert result.exit_code == 4, result.output
    assert f"Redis at {cluster_url} (dgs_redis_url): " in result.output
    assert "this Redis is a node of a Redis Cluster; set dgs_redis_cluster = True" in (
        result.output
    )
    app.close()


def test_a_database_number_on_a_cluster_url_is_a_settings_error(cluster_url: str) -> None:
    with pytest.raises(SettingsError) as refused:
        redis_from_url(f"{cluster_url}/5", cluster=True)
    assert str(refused.value) == (
        "dgs_redis_cluster is on, and a Redis Cluster has only database 0: drop the database "
        f"number from {cluster_url}/5"
    )
