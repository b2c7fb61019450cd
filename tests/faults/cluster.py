"""``FaultCluster``: the e2e harness's real worker/beat subprocesses, running
``tests.faults.proj``, with a history file, per-worker environments (a proxy's
Redis URL, a faked clock) and fault helpers that log what they inject."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.e2e.harness import Cluster, wait_for
from tests.faults.checker import Bounds, Report, check
from tests.faults.history import History

PING_INTERVAL, PING_TIMEOUT, STEAL_DELAY = 0.5, 1.5, 1.0
BOUNDS = Bounds(
    ping_interval=PING_INTERVAL,
    ping_timeout=PING_TIMEOUT,
    steal_delay=STEAL_DELAY,
    tick=1.0,
    slack=1.0,
)


class FaultCluster(Cluster):
    app_module = "tests.faults.proj"

    def __init__(self, tmp: Path, redis_url: str, schedules: list[str], **env: str) -> None:
        self.history = History(tmp / "history.jsonl")
        super().__init__(tmp, redis_url, schedules, FAULTS_HISTORY=str(self.history.path), **env)
        self.proc_env: dict[str, dict[str, str]] = {}
        self._paused: dict[str, list[int]] = {}
        self.bounds = BOUNDS

    def tear_down(self, test_failed: bool) -> None:
        """A fixture's teardown: resume anything a failed test left paused, stop
        every process, and print their logs when the test failed."""
        for key in list(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.procs[key].pid, signal.SIGCONT)
        self.stop_all()
        if test_failed:
            print(self.logs())

    def process_env(self, key: str, node: str) -> dict[str, str]:
        return {**super().process_env(key, node), **self.proc_env.get(key, {})}

    def start_worker(
        self,
        name: str,
        node: str,
        *,
        pool: str = "solo",
        concurrency: int = 1,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        self.proc_env[name] = env or {}
        return super().start_worker(name, node, pool=pool, concurrency=concurrency)

    def first_run_on_two_workers(
        self, schedule: str = "victim", *, pool: str = "solo"
    ) -> tuple[dict[str, Any], str]:
        """Workers ``w1`` and ``w2`` (one slot each, on two nodes) and a beat:
        the first start of ``schedule`` and the key of the worker running it."""
        self.start_worker("w1", "node1", pool=pool, concurrency=1)
        self.start_worker("w2", "node2", pool=pool, concurrency=1)
        self.start_beat()
        first = self.wait_start(schedule)
        return first, self.worker_of(first)

    # -- the history ------------------------------------------------------------------
    def starts(self, schedule: str | None = None) -> list[dict[str, Any]]:  # type: ignore[override]
        return [
            e
            for e in self.history.events()
            if e["kind"] == "start" and (schedule is None or e["schedule"] == schedule)
        ]

    def wait_start(
        self, schedule: str, *, after: dict[str, Any] | None = None, timeout: float = 30
    ) -> dict[str, Any]:
        """The first start of ``schedule`` (after the start ``after``); the
        checker, not this wait, judges its token."""
        since = after["t"] if after is not None else -1.0
        return wait_for(
            lambda: next((e for e in self.starts(schedule) if e["t"] > since), None),
            timeout,
            f"a run of {schedule}" + (f" after run {after['run_id']}" if after else ""),
        )

    def wait_end(self, run_id: str, timeout: float = 10) -> dict[str, Any]:
        return wait_for(
            lambda: next(
                (e for e in self.history.events() if e["kind"] == "end" and e["run_id"] == run_id),
                None,
            ),
            timeout,
            f"run {run_id} to end",
        )

    def wait_recorded(self, schedule: str, run_id: str, timeout: float = 5) -> Any:
        """The stored run record of ``run_id`` once its outcome is written. The
        history's ``end`` comes from the task body; the run's wrapper stores the
        outcome after the body returns (``worker/run_records.py``: ``finish_run``), so a
        test that reads the row right after ``wait_end`` waits here for that
        write."""
        return self.wait_ended_run(
            schedule, f"the stored outcome of run {run_id}", timeout, run_id=run_id
        )

    def worker_of(self, start: dict[str, Any]) -> str:
        """The worker key whose node ran this start."""
        return next(
            k
            for k, p in self.proc_env.items()
            if k in self.procs and self._node(k) == start["host"]
        )

    def _node(self, key: str) -> str:
        args = self.procs[key].args
        assert isinstance(args, list)
        return str(args[args.index("-n") + 1]).split("@", 1)[1]

    # -- faults -----------------------------------------------------------------------
    def group_pids(self, key: str) -> list[int]:
        """The worker's main process and its pool children (its process group)."""
        pgid = self.procs[key].pid
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid:  # state, ppid, pgrp
                pids.append(int(stat.parent.name))
        return sorted(pids) or [pgid]

    def sigkill(self, pids: list[int]) -> None:
        self.history.fault("sigkill", pids=pids)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        self.history.exited(pids)

    def sigkill_worker(self, key: str) -> list[int]:
        """SIGKILL the worker's whole process group (its node crashed)."""
        pids = self.group_pids(key)
        self.history.fault("sigkill", pids=pids)
        os.killpg(self.procs[key].pid, signal.SIGKILL)
        self.history.exited(pids)
        self.procs.pop(key).wait(10)
        return pids

    def sigkill_main(self, key: str, timeout: float = 10) -> list[int]:
        """SIGKILL only the worker's main process; its pool children are logged
        as exited when they are seen gone (polled every 50 ms)."""
        main, pids = self.procs[key].pid, self.group_pids(key)
        self.sigkill([main])
        self.procs.pop(key).wait(timeout)
        children = [p for p in pids if p != main]
        deadline = time.monotonic() + timeout
        while children and time.monotonic() < deadline:
            gone = [p for p in children if not Path(f"/proc/{p}").exists()]
            if gone:
                self.history.exited(gone)
                children = [p for p in children if p not in gone]
            time.sleep(0.05)
        return pids

    def sigstop(self, key: str) -> list[int]:
        pids = self.group_pids(key)
        self.history.fault("sigstop", pids=pids)
        os.killpg(self.procs[key].pid, signal.SIGSTOP)
        self._paused[key] = pids
        return pids

    def sigcont(self, key: str) -> None:
        os.killpg(self.procs[key].pid, signal.SIGCONT)
        self.history.resumed(pids=self._paused.pop(key, [self.procs[key].pid]))

    def shutdown(self, key: str, *, cold: bool, timeout: float = 20) -> int:
        """Celery's warm (SIGTERM) or cold (SIGQUIT) shutdown of a worker's main process.

        Either way the run yields (not a failure) and the worker leaves the
        registry first, so the next run follows within the standard bound."""
        proc, pids = self.procs[key], self.group_pids(key)
        self.history.fault("cold_shutdown" if cold else "warm_shutdown", pids=pids)
        proc.send_signal(signal.SIGQUIT if cold else signal.SIGTERM)
        code = proc.wait(timeout)
        self.history.exited(pids)
        self.procs.pop(key)
        return code

    # -- the checker ------------------------------------------------------------------
    def report(self) -> Report:
        events = self.history.events()
        names = {e["schedule"] for e in events if e["kind"] == "start"}
        store = self.store()
        try:
            rows = [r for n in names for r in store.runs(f"faults.{n}", limit=100_000)]
            tokens = {n: store.get(f"faults.{n}").current_token for n in names}
        finally:
            store.close()
        return check(events, self.bounds, now=time.monotonic(), stored=rows, current_tokens=tokens)

    def assert_history_ok(self, settle: float = 3.0) -> Report:
        """Check the history; transient states (a store write in flight) get
        ``settle`` seconds to pass, violations that persist fail the test."""
        deadline = time.monotonic() + settle
        report = self.report()
        while not report.ok and time.monotonic() < deadline:
            time.sleep(0.2)
            report = self.report()
        print(report)
        assert report.ok, f"{report}\n{self.logs()}"
        return report
