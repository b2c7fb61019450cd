"""The worker noticing a cold shutdown (``celery_dgs/worker/shutdown.py``).

The end-to-end evidence is ``tests/faults/test_worker_faults.py::
test_worker_shutdown_mid_run`` (real workers, SIGQUIT, solo and prefork);
these tests pin the two pieces it rests on."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from celery_dgs.worker.shutdown import hook_cold_shutdown, pool_process_terminating

CHILD = """
import os, signal, sys
from billiard.common import reset_signals
from celery_dgs.worker.shutdown import pool_process_terminating

try:
    sys.exit(3)
except SystemExit as exc:
    print("own exit", pool_process_terminating(exc))
reset_signals()  # what billiard does in each pool process
try:
    os.kill(os.getpid(), signal.SIGTERM)  # Request.cancel -> pool.terminate_job
    signal.pause()
except SystemExit as exc:
    print("terminated", exc.code, pool_process_terminating(exc))
"""


def test_billiards_terminate_exit_is_told_from_the_tasks_own_exit() -> None:
    """In a real process with billiard's signal handlers: SIGTERM raises
    ``SystemExit(-241)``, recognised; a ``sys.exit()`` of the task is not."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30, check=True
    ).stdout.split("\n")
    assert out[0] == "own exit False"
    assert out[1] == "terminated -241 True"
    assert not pool_process_terminating(RuntimeError("x"))


class _Consumer:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.controller = SimpleNamespace(wait_for_soft_shutdown=lambda: calls.append("soft"))

    def cancel_active_requests(self) -> str:
        self.calls.append("cancel")
        return "cancelled"


def test_the_worker_leaves_and_its_runs_yield_before_celery_cancels_them() -> None:
    calls: list[str] = []
    consumer = _Consumer(calls)
    assert hook_cold_shutdown(
        consumer, leave=lambda: calls.append("leave"), stop_runs=lambda: calls.append("stop")
    )
    consumer.controller.wait_for_soft_shutdown()
    assert calls == ["leave", "soft"]
    calls.clear()
    assert consumer.cancel_active_requests() == "cancelled"
    assert calls == ["leave", "stop", "cancel"]


def test_a_failing_deregistration_does_not_stop_the_shutdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    consumer = _Consumer(calls)

    def leave() -> Any:
        raise ConnectionError("redis down")

    hook_cold_shutdown(consumer, leave=leave, stop_runs=lambda: calls.append("stop"))
    assert consumer.cancel_active_requests() == "cancelled"
    assert calls == ["stop", "cancel"]
    assert "leaving the worker registry at cold shutdown failed" in caplog.text


GRACE_WAIT = """
import threading, time
from datetime import datetime, timedelta, timezone
from celery_dgs.leases.types import AcquireResult, AcquireStatus
from celery_dgs.worker.lease_grant import wait_out_grace
from celery_dgs.worker.shutdown import mark_leaving

now = datetime.now(timezone.utc)
def recovering(seconds):
    return AcquireResult(status=AcquireStatus.RECOVERING, now=now,
                         grace_ends_at=now + timedelta(seconds=seconds))
t = time.monotonic()
print("short", wait_out_grace(recovering(0.3)), time.monotonic() - t)
t = time.monotonic()  # before the timer starts: it may fire 0.3 s after its own start
threading.Timer(0.3, mark_leaving).start()
print("leaving", wait_out_grace(recovering(30)), time.monotonic() - t)
"""


def test_a_recovering_dispatch_waits_out_the_grace_unless_the_worker_leaves() -> None:
    """The grace is waited out from the reply's Redis time (+ a margin), and a
    worker that starts shutting down stops waiting at once (the flag is
    process-wide, hence a subprocess)."""
    out = subprocess.run(
        [sys.executable, "-c", GRACE_WAIT], capture_output=True, text=True, timeout=30, check=True
    ).stdout.split("\n")
    # The grace (0.3 s) and its margin are waited out; leaving stops the 30 s wait
    # when the flag is set (0.3 s); the upper bounds leave room for a loaded machine.
    short, waited, short_s = out[0].split()
    assert (short, waited) == ("short", "True")
    assert 0.3 <= float(short_s) < 2.0, out[0]
    leaving, waited, leaving_s = out[1].split()
    assert (leaving, waited) == ("leaving", "False")
    assert 0.3 <= float(leaving_s) < 5.0, out[1]
