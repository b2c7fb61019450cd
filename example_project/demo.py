"""``make demo``: the example project on this machine, with nothing to install.

Starts an embedded Redis-compatible server (the same launcher the tests use),
a SQLite store under ``.demo/``, two workers (``w1@node1``, ``w2@node2``, one
slot each: fewer slots than schedules, so the deadline order matters) and the
deadline-scheduler beat and the status page (``celery dgs web``, on
127.0.0.1:8377 or a free port), then shows ``celery dgs status --watch`` until
Ctrl-C (or ``--seconds N``), and stops everything it started.

Besides the declared scrapers, the example's lister (``example.list_sources``)
adds one adaptive schedule per source of a fake upstream
(:mod:`example_project.upstream`) while beat runs: they appear in the table
within seconds, and the ``interval-N`` flag shows each source's interval
shorten (visits that find changes) or lengthen (visits that find none).
A shop (:mod:`example_project.shop`) places an order every few seconds, each
with a deferred check "is it shipped yet?" (``example.check_order``): the
status table's checks line counts them, ``celery dgs checks`` lists them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from celery_dgs.embedded import RedisServerProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
CELERY = [sys.executable, "-m", "celery", "-A", "example_project.proj"]
#: The status page's port when it is free.
WEB_PORT = 8377


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="stop after this many seconds (default: until Ctrl-C)",
    )
    parser.add_argument("--keep", action="store_true", help="keep .demo/ from a previous run")
    args = parser.parse_args(argv)

    state = ROOT / ".demo"
    if state.exists() and not args.keep:
        shutil.rmtree(state)
    state.mkdir(exist_ok=True)
    (state / "redis").mkdir()
    redis = RedisServerProcess(data_dir=state / "redis").start()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DGS_EXAMPLE_REDIS_URL": redis.url,
        "DGS_EXAMPLE_DATABASE_URL": f"sqlite:///{state / 'dgs.sqlite3'}",
    }
    print(
        f"celery-dgs demo: embedded {redis.binary.name} at {redis.url}, "
        f"store {state / 'dgs.sqlite3'}, logs in {state}/"
    )
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *cmd: str) -> None:
        with open(state / f"{name}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [*CELERY, *cmd],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    try:
        start("worker1", "worker", "-n", "w1@node1", "-c", "1", "-P", "solo", "-l", "INFO")
        start("worker2", "worker", "-n", "w2@node2", "-c", "1", "-P", "solo", "-l", "INFO")
        start(
            "beat",
            "beat",
            "-S",
            "celery_dgs:DeadlineScheduler",
            "-l",
            "INFO",
            "-s",
            str(state / "beat-schedule"),
            "--pidfile",
            str(state / "beat.pid"),
        )
        with open(state / "shop.log", "wb") as log:  # orders, each with a deferred check
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "example_project.shop"],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        port = WEB_PORT if port_free(WEB_PORT) else free_port()
        start("web", "dgs", "web", "--bind", f"127.0.0.1:{port}")
        print(f"celery-dgs demo: status page on http://127.0.0.1:{port}/")
        watch = subprocess.Popen(
            [*CELERY, "dgs", "status", "--watch", "2"], cwd=ROOT, env=env, start_new_session=True
        )
        procs.append(watch)
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        while watch.poll() is None and (deadline is None or time.monotonic() < deadline):
            for proc in procs[:-1]:
                if proc.poll() is not None:
                    print(f"a demo process exited ({proc.args}); see {state}/*.log")
                    return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        redis.cleanup()
        print("celery-dgs demo: stopped the workers, beat and the embedded server.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
