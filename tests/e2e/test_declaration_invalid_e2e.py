"""End to end: after a deploy breaks the declaration of a stored schedule, a
real beat of that deploy keeps dispatching the last valid stored version and a
real worker of that deploy runs it supervised (lease, run record)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from celery_dgs.store.sql import SqlScheduleStore
from tests.cli.test_declaration_invalid import decl_env
from tests.e2e.harness import ROOT, beat_args, wait_for, worker_args

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_beat_and_worker_of_a_broken_deploy_keep_running_the_stored_version(
    tmp_path: Path, sqlite_url: str, redis_url: str, processes: list[subprocess.Popen[bytes]]
) -> None:
    env = decl_env(sqlite_url, redis_url)
    celery = [sys.executable, "-m", "celery", "-A", "tests.cli.decl_proj"]
    good = subprocess.run(
        [*celery, "dgs", "sync"],
        cwd=ROOT,
        env={**env, "DECL_PERIOD": "3600"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert good.returncode == 0, good.stderr

    broken = {**env, "DECL_PERIOD": "0"}  # the next deploy: period 0 is invalid
    for key, args in (
        ("worker", worker_args("w1@node1")),
        ("beat", beat_args(tmp_path)),
    ):
        with open(tmp_path / f"{key}.log", "ab") as log:
            processes.append(
                subprocess.Popen(
                    [*celery, *args],
                    cwd=ROOT,
                    env=broken,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    store = SqlScheduleStore.open(sqlite_url)
    try:

        def succeeded() -> bool:
            return any(r.outcome == "success" for r in store.runs("decl.a"))

        try:
            wait_for(succeeded, 60, "a supervised run of the stored decl.a")
        except AssertionError:
            for key in ("beat", "worker"):
                print(f"--- {key}.log\n" + (tmp_path / f"{key}.log").read_text(errors="replace"))
            raise
        stored = store.get("decl.a")
        assert stored.active
        assert stored.spec is not None
        assert stored.spec.scheduling_period.total_seconds() == 3600  # type: ignore[attr-defined]
        assert stored.declaration_error is not None
        assert "field 'period'" in stored.declaration_error
        assert stored.stats.last_good_start_at is not None
        # A dispatch taken back under load leaves a skip row beside the run: the
        # run that succeeded is the one to check.
        run = next(r for r in store.runs("decl.a") if r.outcome == "success")
        assert run.owner_name == "w1@node1"
        assert run.token is not None
        beat_log = (tmp_path / "beat.log").read_text(errors="replace")
        assert "decl.a keeps its last valid stored version" in beat_log
    finally:
        store.close()
