"""One live run: its heartbeat thread and the means to interrupt it.

The heartbeat pings the lease every ``ping_interval`` (sending progress), and
ends the run when:

- the ping finds another owner (the lease was stolen)  → outcome ``stolen``;
- an operator set the cancel flag                      → ``cancelled``;
- the run passed ``max_allowed_duration``              → ``terminated``;
- one of its blackout windows began                    → ``terminated``;
- the worker is shutting down warm                     → ``yielded``.

Passing ``max_expected_duration`` is only logged. Interruption raises
:class:`RunTerminated` in the task's thread (via ``PyThreadState_SetAsyncExc``,
and, for a task on the main thread, a signal so blocking calls such as
``time.sleep`` are interrupted too). If the run has not stopped
``termination_grace`` seconds later, ``on_unresponsive`` is called, which
records the run and ends the process.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ..core.blackout import blackout_containing, next_blackout_start
from ..core.spec import ScheduleSpec

logger = logging.getLogger("celery_dgs.worker")

#: Signal used to interrupt a task running on the main thread of its process.
INTERRUPT_SIGNAL = signal.SIGUSR2


class RunTerminated(BaseException):
    """Raised inside task code to stop a run; a BaseException so that a task's
    ``except Exception`` does not swallow it.

    ``PyThreadState_SetAsyncExc`` raises the class, built with no arguments:
    the defaults keep that a RunTerminated (not a TypeError, which task code's
    ``except Exception`` would swallow); the real outcome is the supervisor's
    ``interruption``."""

    def __init__(self, outcome: str = "terminated", reason: str = "interrupted") -> None:
        super().__init__(f"{outcome}: {reason}")
        self.outcome = outcome
        self.reason = reason


_live: dict[int, RunSupervisor] = {}  # task thread ident -> supervisor
_live_lock = threading.Lock()


def live_supervisors() -> list[RunSupervisor]:
    with _live_lock:
        return list(_live.values())


def current_supervisor() -> RunSupervisor | None:
    with _live_lock:
        return _live.get(threading.get_ident())


def _interrupt_handler(signum: int, frame: Any) -> None:
    """Raise the pending interruption in the run on the main thread. With none
    pending, the signal came from the worker's main process at warm shutdown:
    the run yields."""
    sup = _live.get(threading.main_thread().ident or -1)
    if sup is None or sup.delivered or sup._done.is_set():
        return
    if sup.interruption is None:
        sup.interruption = RunTerminated("yielded", "the worker is shutting down")
        sup._wake.set()
    sup.delivered = True
    raise sup.interruption


def install_interrupt_handler() -> bool:
    """Install the interrupt signal handler (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(INTERRUPT_SIGNAL, _interrupt_handler)
    return True


class RunSupervisor:
    def __init__(
        self,
        *,
        schedule: str,
        run_id: str,
        spec: ScheduleSpec,
        ping: Callable[[float | None], str],
        now: Callable[[], datetime],
        ping_interval: float,
        termination_grace: float,
        on_unresponsive: Callable[[RunTerminated], None],
        token: int,
    ) -> None:
        self.schedule = schedule
        self.run_id = run_id
        self.spec = spec
        self.token = token
        self._ping = ping
        self._now = now
        self.ping_interval = ping_interval
        self.termination_grace = termination_grace
        self.on_unresponsive = on_unresponsive
        self.progress: float | None = None
        self.interruption: RunTerminated | None = None
        self.delivered = False
        self._thread_id = threading.get_ident()
        self._on_main = threading.current_thread() is threading.main_thread()
        self._done = threading.Event()
        self._wake = threading.Event()
        self._started_mono = time.monotonic()
        self._warned_expected = False
        self._beat = threading.Thread(
            target=self._loop, name=f"dgs-heartbeat-{schedule}", daemon=True
        )

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        with _live_lock:
            _live[self._thread_id] = self
        self._beat.start()

    def finish(self) -> None:
        """The run's code returned or raised: stop the heartbeat."""
        self._done.set()
        self._wake.set()
        with _live_lock:
            if _live.get(self._thread_id) is self:
                del _live[self._thread_id]
        if self._beat is not threading.current_thread():
            self._beat.join(timeout=5)

    def set_progress(self, value: float) -> None:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"progress must be between 0 and 1, got {value}")
        self.progress = value

    # -- interruption -----------------------------------------------------------------
    def interrupt(self, outcome: str, reason: str) -> None:
        if self.interruption is not None or self._done.is_set():
            return
        self.interruption = RunTerminated(outcome, reason)
        logger.warning(
            "celery-dgs: stopping run %s of %s (%s: %s)",
            self.run_id, self.schedule, outcome, reason,
        )
        if self._on_main and signal.getsignal(INTERRUPT_SIGNAL) is _interrupt_handler:
            signal.pthread_kill(self._thread_id, INTERRUPT_SIGNAL)
        else:
            self.delivered = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self._thread_id), ctypes.py_object(RunTerminated)
            )
        self._wake.set()

    # -- the heartbeat -----------------------------------------------------------------
    def _next_deadline(self, now: datetime) -> float:
        """Seconds until the next thing to check: a ping, max_allowed, a blackout."""
        wait = self.ping_interval
        elapsed = time.monotonic() - self._started_mono
        if self.spec.max_allowed_duration is not None:
            wait = min(wait, self.spec.max_allowed_duration.total_seconds() - elapsed)
        if self.spec.max_expected_duration is not None and not self._warned_expected:
            wait = min(wait, self.spec.max_expected_duration.total_seconds() - elapsed)
        if self.spec.blackout_periods:
            start = next_blackout_start(self.spec.blackout_periods, self.spec.tz, now)
            if start is not None:
                wait = min(wait, (start - now).total_seconds())
        return max(wait, 0.05)

    def _check_limits(self, now: datetime) -> None:
        elapsed = timedelta(seconds=time.monotonic() - self._started_mono)
        spec = self.spec
        if spec.max_allowed_duration is not None and elapsed >= spec.max_allowed_duration:
            self.interrupt("terminated", f"ran {elapsed} > max_allowed_duration "
                                         f"{spec.max_allowed_duration}")  # fmt: skip
            return
        if spec.blackout_periods:
            window = blackout_containing(spec.blackout_periods, spec.tz, now)
            if window is not None:
                self.interrupt("terminated", f"blackout window {window[0]}..{window[1]} began")
                return
        if (
            spec.max_expected_duration is not None
            and not self._warned_expected
            and elapsed > spec.max_expected_duration
        ):
            self._warned_expected = True
            logger.error(
                "celery-dgs: run %s of %s has run %s, past max_expected_duration %s",
                self.run_id, self.schedule, elapsed, spec.max_expected_duration,
            )  # fmt: skip

    def _loop(self) -> None:
        next_ping = time.monotonic() + self.ping_interval
        while not self._done.is_set():
            try:
                now = self._now()
                if self.interruption is None:
                    self._check_limits(now)
                if self.interruption is None and time.monotonic() >= next_ping:
                    next_ping = time.monotonic() + self.ping_interval
                    status = self._ping(self.progress)
                    if status == "NOT_OWNER":
                        self.interrupt("stolen", "the lease now belongs to another run")
                    elif status == "CANCELLED":
                        self.interrupt("cancelled", "an operator cancelled the run")
                if self.interruption is not None:
                    if not self._done.wait(self.termination_grace):
                        logger.error(
                            "celery-dgs: run %s of %s did not stop within %.1fs; "
                            "ending its process",
                            self.run_id, self.schedule, self.termination_grace,
                        )  # fmt: skip
                        self.on_unresponsive(self.interruption)
                    return
                wait = min(self._next_deadline(now), max(next_ping - time.monotonic(), 0.05))
            except Exception:
                logger.exception("celery-dgs: heartbeat of %s failed; retrying", self.schedule)
                wait = min(self.ping_interval, 1.0)
            self._wake.wait(wait)
            self._wake.clear()
