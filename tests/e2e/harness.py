"""Real Celery worker and beat subprocesses for end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal as signals
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "Cluster", "beat_args", "wait_for", "worker_args"]


def worker_args(hostname: str, *, pool: str = "solo", concurrency: int = 1) -> list[str]:
    """``celery worker`` arguments of a test worker: no gossip, mingle or heartbeat."""
    return [
        "worker",
        "-n",
        hostname,
        "-P",
        pool,
        "-c",
        str(concurrency),
        "-l",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]


def beat_args(
    folder: Path, key: str = "beat", scheduler: str = "celery_dgs:DeadlineScheduler"
) -> list[str]:
    """``celery beat`` arguments with its pidfile and schedule file in ``folder``."""
    return [
        "beat",
        "-S",
        scheduler,
        "-l",
        "INFO",
        "--pidfile",
        str(folder / f"{key}.pid"),
        "-s",
        str(folder / f"{key}-schedule"),
    ]


def deadline_window_env(window: int, horizon_s: float, poll_s: float) -> dict[str, str]:
    """The settings of a cluster whose beat holds a window of ``window``
    runtime schedules ``horizon_s`` ahead, in the deadline order (no relative
    laxity, no look-ahead: the order the window reads the store in), polling
    the store every ``poll_s``, with beat's publishes in the event list."""
    return {
        "E2E_SCHEDULE_WINDOW_SIZE": str(window),
        "E2E_SCHEDULE_WINDOW": str(horizon_s),
        "E2E_STORE_POLL": str(poll_s),
        "E2E_LAXITY_FLOOR": "none",
        "E2E_LOOKAHEAD": "0",
        "E2E_PUBLISH_SIGNALS": "1",
        # A loaded machine may take a second to write a run's start: not a
        # fault these tests are about (a run then fences itself and is
        # dispatched again).
        "E2E_PING_TIMEOUT": "6",
        "E2E_DISPATCH_TIMEOUT": "30",
        "E2E_WORKER_TTL": "10",
    }


class Cluster:
    #: The Celery project the processes run (``celery -A``).
    app_module = "tests.e2e.proj"

    def __init__(self, tmp: Path, redis_url: str, schedules: list[str], **env: str) -> None:
        self.tmp = tmp
        self.redis_url = redis_url
        self.database_url = f"sqlite:///{tmp / 'dgs.sqlite3'}"
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "E2E_REDIS_URL": redis_url,
            "E2E_DATABASE_URL": self.database_url,
            "E2E_SCHEDULES": ",".join(schedules),
            **env,
        }
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.redis = redis.Redis.from_url(redis_url)

    def process_env(self, key: str, node: str) -> dict[str, str]:
        """The environment of process ``key`` on ``node``."""
        return {**self.env, "E2E_NODE": node}

    def _start(self, key: str, args: list[str], node: str = "beat") -> subprocess.Popen[bytes]:
        with open(self.tmp / f"{key}.log", "ab") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", self.app_module, *args],
                cwd=ROOT,
                env=self.process_env(key, node),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[key] = proc
        return proc

    def start_worker(
        self,
        name: str,
        node: str,
        *,
        pool: str = "solo",
        concurrency: int = 1,
        queues: str | None = None,
        extra: tuple[str, ...] = (),
    ) -> subprocess.Popen[bytes]:
        """A worker (consuming ``queues``, comma-separated; ``None``: the
        default queue; ``extra``: more ``celery worker`` options); returns once
        it registered (or, with ``E2E_WORKER_REGISTER=0``, once it logged that
        it is ready)."""
        args = [*worker_args(f"{name}@{node}", pool=pool, concurrency=concurrency), *extra]
        proc = self._start(name, args if queues is None else [*args, "-Q", queues], node=node)
        if self.env.get("E2E_WORKER_REGISTER", "1") == "1":
            ready = lambda: self.worker_registered(f"{name}@{node}")  # noqa: E731
        else:
            ready = lambda: f"{name}@{node} ready." in self.log_since(name, 0)  # noqa: E731
        wait_for(ready, 30, f"worker {name}@{node}")
        return proc

    def keyspace(self) -> Any:
        """The ``KeySpace`` the processes' ``dgs_key_prefix`` gives (``E2E_PREFIX``,
        else ``e2e``)."""
        from celery_dgs.keys import KeySpace

        return KeySpace(self.env.get("E2E_PREFIX", "e2e"))

    def worker_registered(self, hostname: str) -> bool:
        from celery_dgs.registry import WorkerRegistry

        registry = WorkerRegistry(self.redis, self.keyspace(), ttl=3)
        return any(w.name == hostname for w in registry.live_workers())

    def start_beat(
        self, key: str = "beat", scheduler: str = "celery_dgs:DeadlineScheduler"
    ) -> subprocess.Popen[bytes]:
        """A beat process; give each of several beats its own ``key`` (log, pidfile)."""
        return self._start(key, beat_args(self.tmp, key, scheduler))

    def beat_leader(self) -> Any:
        """The stored beat leader lease (``LeaderInfo``), or None."""
        from celery_dgs.leases.leader import RedisLeader

        timeout = float(self.env.get("E2E_BEAT_LEADER_TIMEOUT", "2.0"))
        return RedisLeader(self.redis, self.keyspace(), timeout=timeout).current()

    def leader_pid(self) -> int | None:
        info = self.beat_leader()
        return None if info is None else int(info.owner_pid)

    def log_size(self, key: str) -> int:
        path = self.tmp / f"{key}.log"
        return path.stat().st_size if path.exists() else 0

    def log_since(self, key: str, offset: int) -> str:
        with open(self.tmp / f"{key}.log", "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def send(
        self, task: str, *args: Any, queue: str = "celery", countdown: float | None = None
    ) -> None:
        """Call a task ad hoc (outside beat), as ``task.delay()`` would (with
        ``countdown``: as ``apply_async(countdown=...)`` would)."""
        from celery import Celery

        client = Celery("e2e-client", broker=self.redis_url)
        client.conf.task_serializer = "json"
        client.send_task(task, args=args, queue=queue, countdown=countdown)
        client.close()

    def sync_declarations(self) -> None:
        """Store the project's declarations as beat does at start (in a subprocess,
        with the project's environment)."""
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from tests.e2e.proj import app, dgs\n"
                "from datetime import datetime, timezone\n"
                "from celery_dgs.runtime import runtime_for\n"
                "decl = dgs.all_declarations()\n"
                "runtime_for(app, dgs.settings).store.sync(list(decl.specs.values()),"
                " datetime.now(timezone.utc))",
            ],
            cwd=ROOT,
            env=self.env,
            check=True,
            timeout=60,
        )

    def store(self) -> Any:
        from celery_dgs.store.sql import SqlScheduleStore

        return SqlScheduleStore.open(self.database_url)

    def outcomes(self, schedule: str) -> list[str]:
        """Outcomes of the schedule's runs, newest first ([] before beat stored it)."""
        from celery_dgs.errors import UnknownScheduleError

        store = self.store()
        try:
            return [r.outcome for r in store.runs(schedule)]
        except UnknownScheduleError:
            return []
        finally:
            store.close()

    def wait_ended_run(self, schedule: str, what: str, timeout: float = 10, **fields: Any) -> Any:
        """The first stored run of ``schedule`` whose outcome is written and whose
        ``fields`` have the given values (``token=3``, ``run_id="..."``)."""
        return wait_for(
            lambda: next(
                (
                    r
                    for r in self.runs(schedule)
                    if r.outcome != "running" and all(getattr(r, k) == v for k, v in fields.items())
                ),
                None,
            ),
            timeout,
            what,
        )

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(e) for e in self.redis.lrange("e2e:events", 0, -1)]

    def starts(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["kind"] == "start"]

    def signal(self, key: str, sig: int) -> None:
        os.kill(self.procs[key].pid, sig)

    def signal_group(self, key: str, sig: int) -> None:
        """Signal the process group of ``key`` (its main process and pool children)."""
        os.killpg(self.procs[key].pid, sig)

    def last_ping_after_pause(self, schedule: str) -> float:
        """The lease's ``last_ping_at`` (epoch seconds) once its owner is paused.

        A steal is allowed ``ping_timeout + steal_delay`` after the last ping, not
        after the pause: the owner pinged up to one ping interval before it. The
        short wait lets a ping already sent when the owner stopped reach Redis.
        """
        time.sleep(0.1)
        lease = self.leases().get(schedule)
        assert lease is not None, f"{schedule} has no lease"
        return float(lease.last_ping_at.timestamp())

    def leases(self) -> Any:
        """A RedisLeases on the test Redis with the cluster's timings."""
        from celery_dgs.leases.redis import RedisLeases

        return RedisLeases(
            self.redis,
            self.keyspace(),
            ping_timeout=float(self.env.get("E2E_PING_TIMEOUT", "1.5")),
            steal_delay=float(self.env.get("E2E_STEAL_DELAY", "1.0")),
        )

    def runs(self, schedule: str) -> list[Any]:
        """The schedule's run records, newest first ([] before it is stored)."""
        from celery_dgs.errors import UnknownScheduleError

        store = self.store()
        try:
            return list(store.runs(schedule))
        except UnknownScheduleError:
            return []
        finally:
            store.close()

    def schedule(self, schedule: str) -> Any:
        store = self.store()
        try:
            return store.get(schedule)
        finally:
            store.close()

    def ends(self, name: str | None = None) -> list[dict[str, Any]]:
        return [
            e for e in self.events() if e["kind"] == "end" and (name is None or e["name"] == name)
        ]

    def stop(self, key: str, sig: int = signals.SIGTERM, timeout: float = 20) -> None:
        proc = self.procs.pop(key)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signals.SIGKILL)
                proc.wait(timeout)

    def stop_all(self) -> None:
        for key in list(self.procs):
            self.stop(key, signals.SIGKILL if key != "beat" else signals.SIGTERM, timeout=10)

    def logs(self) -> str:
        return "\n".join(
            f"==== {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in self.tmp.glob("*.log")
        )
