"""Beat refuses a sentinel:// dgs_redis_url without dgs_redis_master_name with
one line and exit status 78 (a setting that can never work), before it
touches Redis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.harness import Cluster
from tests.e2e.test_startup_e2e import EX_CONFIG, assert_no_traceback, exit_status, lines_with

pytestmark = [pytest.mark.e2e, pytest.mark.redis_ha]


def test_beat_with_a_sentinel_url_and_no_master_name_exits_after_one_line(
    tmp_path: Path, redis_url: str
) -> None:
    conf = {"dgs_redis_url": "sentinel://:pw@127.0.0.1:26379;sentinel://127.0.0.1:26380"}
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
    assert "dgs_redis_url is a sentinel:// URL: set dgs_redis_master_name" in line
    assert ":pw@" not in log
    assert_no_traceback(log)
