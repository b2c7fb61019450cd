"""End to end: two projects (two SQLite stores) on one Redis database with
the same key prefix. The second project's beat stands by behind the first's
leader and logs why, its worker says so at start, the first project's beat
places no run on the second's worker, and ``celery dgs status`` of each
shows it (real beats, a real worker, the real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.harness import Cluster, wait_for
from tests.e2e.test_cli_e2e import dgs

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

WHY = "serves another schedule store: two projects share this Redis database and key prefix"


def test_a_second_project_on_the_same_prefix_is_told_to_take_its_own(
    tmp_path: Path, redis_url: str
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Cluster(tmp_path / "a", redis_url, ["p10"], E2E_PREFIX="shared")
    second = Cluster(tmp_path / "b", redis_url, ["p20"], E2E_PREFIX="shared")
    try:
        first.start_beat()
        wait_for(first.beat_leader, 30, "the first project's beat to lead")
        assert "WARNING" not in dgs(first, "status").stdout.split("beat leader:")[1]

        second.start_beat()
        wait_for(lambda: WHY in second.log_since("beat", 0), 30, "the second beat's error")
        assert "key prefix 'shared'" in second.log_since("beat", 0)
        second.start_worker("w1", "node1")
        wait_for(lambda: WHY in second.log_since("w1", 0), 30, "the second worker's error")

        # The first project's beat places nothing on the second's worker, and says so.
        strangers = "live worker(s) (w1@node1) serve another schedule store"
        wait_for(lambda: strangers in first.log_since("beat", 0), 30, "the first beat's error")
        assert f"WARNING 1 {strangers}" in dgs(first, "status").stdout
        assert not [e for e in first.starts() if e["name"] == "p10"], "run on the other's worker"

        text = dgs(second, "status").stdout
        assert "WARNING the leading beat" in text, text
        assert WHY in text
        doc = json.loads(dgs(second, "status", "--json").stdout)
        assert WHY in doc["beat_leader_warning"]
        assert json.loads(dgs(first, "status", "--json").stdout)["beat_leader_warning"] is None
    finally:
        first.stop_all()
        second.stop_all()
