"""The wheel, installed alone into a new virtual environment (no dev extras,
no checkout on the path), runs a real worker and a real deadline-scheduler
beat: a scheduled run is recorded as a success, and beat serves metrics.

This is what a user gets from ``pip install celery-dgs``: a dependency that
only the dev environment happens to provide fails here, not on their machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from celery_dgs.errors import UnknownScheduleError
from celery_dgs.store.sql import SqlScheduleStore
from tests.e2e.harness import wait_for
from tests.test_packaging import build_wheel

pytestmark = pytest.mark.e2e

SCHEDULE = "wheelproj.ping"
# A tiny project, as a user would write it, with the e2e suite's short timings.
PROJECT = textwrap.dedent("""
    import json
    import os
    import sys
    from datetime import timedelta

    from celery import Celery

    import celery_dgs

    app = Celery("wheelproj", broker=os.environ["WHEEL_REDIS_URL"])
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_backend=None,
        broker_connection_retry_on_startup=True,
        worker_prefetch_multiplier=1,
        dgs_database_url=os.environ["WHEEL_DATABASE_URL"],
        dgs_key_prefix="wheel",
        dgs_ping_interval=0.5,
        dgs_ping_timeout=1.5,
        dgs_steal_delay=1.0,
        dgs_dispatch_timeout=4,
        dgs_worker_ttl=3,
        dgs_store_poll_interval=0.2,
        beat_max_loop_interval=1,
    )
    dgs = celery_dgs.DGS(app)


    @dgs.periodic(period=timedelta(hours=1), cooldown=timedelta(minutes=30))
    @app.task(name="wheelproj.ping")
    def ping() -> str:
        with open("imported.json", "w") as f:
            json.dump({"celery_dgs": celery_dgs.__file__, "python": sys.executable}, f)
        return "pong"
""")


@pytest.fixture
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel and its runtime dependencies only.

    It gets no pip of its own: the test environment's pip installs into it
    (``--python``), which saves bootstrapping one. Bytecode is left to be
    compiled on import (``--no-compile``), which is quicker for one run.
    """
    wheel = build_wheel(tmp_path_factory.getbasetemp() / "wheel")
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-compile",
            "--no-input",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        timeout=240,
    )
    return venv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without anything that would put the checkout or
    the test environment on the new interpreter's path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
    }
    return {**env, **extra}


@pytest.fixture
def processes() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Started processes by name; killed (with their process groups) at the end."""
    procs: dict[str, subprocess.Popen[bytes]] = {}
    yield procs
    for proc in procs.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@pytest.mark.timeout(360)
def test_installed_wheel_runs_worker_and_beat(
    venv: Path,
    tmp_path: Path,
    redis_url: str,
    processes: dict[str, subprocess.Popen[bytes]],
) -> None:
    (tmp_path / "wheelproj.py").write_text(PROJECT)
    database = tmp_path / "dgs.sqlite3"
    database_url = f"sqlite:///{database}"
    env = _clean_env(WHEEL_REDIS_URL=redis_url, WHEEL_DATABASE_URL=database_url)
    celery = [str(venv / "bin" / "celery"), "-A", "wheelproj"]

    def start(key: str, *args: str) -> None:
        with open(tmp_path / f"{key}.log", "wb") as log:
            processes[key] = subprocess.Popen(
                [*celery, *args],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def logs() -> str:
        return "\n".join(
            f"==== {key}\n{(tmp_path / f'{key}.log').read_text()[-4000:]}" for key in processes
        )

    start(
        "worker",
        "worker",
        "-n",
        "w1@node1",
        "-P",
        "solo",
        "-c",
        "1",
        "-l",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    )
    # The metrics port as docker-compose.yml's beat sets it: a setting after "--".
    metrics_port = _free_port()
    start(
        "beat",
        "beat",
        "-S",
        "celery_dgs:DeadlineScheduler",
        "-l",
        "INFO",
        "-s",
        str(tmp_path / "beat-schedule"),
        "--pidfile",
        str(tmp_path / "beat.pid"),
        "--",
        f"dgs.metrics_port=(int){metrics_port}",
    )

    def succeeded() -> bool:
        exited = {key: p.returncode for key, p in processes.items() if p.poll() is not None}
        assert not exited, f"exited early (exit status by process): {exited}"
        # Read in this process (cheap); the installed CLI confirms it below.
        # No schema upgrade here: the installed package's migrations create it.
        if not database.exists():
            return False
        store = SqlScheduleStore(database_url)
        try:
            return any(run.outcome == "success" for run in store.runs(SCHEDULE))
        except (UnknownScheduleError, OperationalError):  # not migrated or stored yet
            return False
        finally:
            store.close()

    try:
        wait_for(succeeded, 90, f"a successful run of {SCHEDULE}", interval=0.2)
    except AssertionError as e:  # timed out or a process died: show why
        raise AssertionError(f"{e}\n{logs()}") from None
    shown = subprocess.run(
        [*celery, "dgs", "runs", SCHEDULE, "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "success" in [run["outcome"] for run in json.loads(shown.stdout)["runs"]]

    def metrics() -> str:
        with contextlib.suppress(OSError):
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as response:
                return str(response.read().decode())
        return ""

    assert "dgs_beat_leader 1.0" in wait_for(metrics, 30, "beat's metrics endpoint").splitlines()

    # The worker imported the installed package, not the checkout.
    imported = json.loads((tmp_path / "imported.json").read_text())
    assert Path(imported["celery_dgs"]).is_relative_to(venv)
    assert Path(imported["python"]).parent == venv / "bin"
    pip_show = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "show",
            "celery-dgs",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "License-Expression: MIT" in pip_show.splitlines()
