"""`make demo` as a new user runs it: the example project comes up on an embedded
server, schedules turn OK in the live status table, the shop's deferred checks
are counted, and everything it started is stopped at the end."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from example_project import upstream
from tests.e2e.harness import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


def test_demo_shows_schedules_turning_ok_and_stops_everything() -> None:
    # 30 s: the shop's third order (and check) comes about 13 s after it starts, and
    # the status table shows everything checked below from its third frame on (6 s).
    result = subprocess.run(
        [sys.executable, "-m", "example_project.demo", "--seconds", "30"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=140,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert re.search(r"status page on http://127\.0\.0\.1:\d+/", out), out
    frames = out.split("celery-dgs status at ")
    assert len(frames) > 5, out
    first, last = frames[1], frames[-1]
    assert "never_succeeded" in first or "likely_late" in first or "ERROR" in first
    ok_rows = re.findall(r"^OK\s+example\.\w+", last, flags=re.M)
    assert len(ok_rows) >= 3, last
    # The lister's sources appeared at runtime as adaptive schedules, and the
    # first visits moved their interval off the starting step (4).
    steps = dict(
        re.findall(r"^\w+\s+example\.visit_source@([\w.]+)\s.*?interval-(\d+):", last, flags=re.M)
    )
    assert set(steps) == {src.name for src in upstream.SOURCES}, last
    assert any(step != "4" for step in steps.values()), last
    # The shop placed orders, each with a deferred check; status counts them.
    assert re.search(r"^deferred checks: \d+ pending", last, flags=re.M), last
    shop_log = (ROOT / ".demo" / "shop.log").read_text()
    assert shop_log.count("its shipping check was added") >= 3, shop_log
    assert "stopped the workers, beat and the embedded server" in out
    beat_log = (ROOT / ".demo" / "beat.log").read_text()
    assert beat_log.count("dispatched example.") >= 4
    leftovers = subprocess.run(
        ["pgrep", "-f", "example_project.proj"], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout.strip() == "", "demo left processes running"
