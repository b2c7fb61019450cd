"""One live run: its heartbeat thread and the means to interrupt it.

The heartbeat pings the lease every ``ping_interval`` (sending progress; a
changed progress also at once, at most every :data:`PROGRESS_PING_GAP_S`), and
ends the run when:

- the ping finds another owner (the lease was stolen)  → outcome ``stolen``;
- the ping finds no lease (lost with Redis's data)     → ``stolen``;
- an operator set the cancel flag                      → ``cancelled``;
- the run passed ``max_allowed_duration``              → ``terminated``;
- one of its blackout windows began                    → ``terminated``;
- the worker is shutting down warm                     → ``yielded``;
- no ping has succeeded for ``fence_after`` seconds    → ``self_fenced``.

Self-fencing: pings run on their own thread, so a ping that hangs (Redis
unreachable, a partition) cannot stop the heartbeat from noticing, on its
monotonic clock, that the last successful ping was sent ``fence_after``
(``ping_timeout - self_fence_margin``) ago. The run is then interrupted, and a
run that ignores the interruption has its process ended ``ping_timeout`` after
that ping at the latest: before any other owner can take the lease over
(``ping_timeout + steal_delay`` after Redis saw the ping).

Passing ``max_expected_duration`` is only logged. Interruption raises
:class:`RunTerminated` in the task's thread (via ``PyThreadState_SetAsyncExc``,
and, for a task on the main thread, a signal so blocking calls such as
``time.sleep`` are interrupted too). If the run has not stopped
``termination_grace`` seconds later, ``on_unresponsive`` is called, which
records the run and ends the process. A run yielding to its worker's warm
shutdown on a thread that shares its process with other tasks (the threads
pool) is waited for instead, its lease pinged, as Celery's warm shutdown
waits for every task; its process ends once the lease is lost or
unreachable for ``fence_after``, or the shutdown turns cold.
"""

from __future__ import annotations

import ctypes
import logging
import math
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ..core.blackout import blackout_containing, next_blackout_start
from ..core.checks import CheckInfo
from ..core.items import ItemCounts
from ..core.spec import ScheduleSpec
from .shutdown import SHUTDOWN_REASON, cold_shutdown, mark_leaving

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
    if sup is None:
        mark_leaving()  # warm shutdown of an idle pool process (or one waiting to start a run)
        return
    if sup.delivered or sup._done.is_set():
        return
    if sup.interruption is None:
        mark_leaving()
        sup.interruption = RunTerminated("yielded", SHUTDOWN_REASON)
        sup._wake.set()
    sup.delivered = True
    raise sup.interruption


def _clear_async_exc(thread_id: int) -> None:
    """Drop an asynchronous exception still pending in ``thread_id``."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)


def install_interrupt_handler() -> bool:
    """Install the interrupt signal handler (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(INTERRUPT_SIGNAL, _interrupt_handler)
    return True


#: A changed progress (``celery_dgs.progress``) is sent with a ping of its own
#: at once, then at most every this many seconds; the pings every
#: ``ping_interval`` carry it too. So a run shorter than ``ping_interval``
#: shows its progress, and one that reports it in a loop adds a ping every
#: few seconds at most.
PROGRESS_PING_GAP_S = 5.0


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
        fence_after: float | None = None,
        kill_after: float | None = None,
        granted_mono: float | None = None,
        started_at: datetime | None = None,
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
        #: What the run reported with ``celery_dgs.eventful()`` (None: nothing).
        self.eventful: bool | None = None
        #: What the run reported with ``celery_dgs.report_items()`` (None: nothing).
        self.items: ItemCounts | None = None
        #: The deferred check this run is (``celery_dgs.current_check()``); None otherwise.
        self.check: CheckInfo | None = None
        #: The run asked Celery for a broker retry, which was refused (the
        #: scheduler retries it after ``dgs_retry_backoff``).
        self.retry_refused = False
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
        #: Self-fencing: seconds after the last successful ping (as sent) at which
        #: the run is stopped, and by which its process must be gone.
        self.fence_after = fence_after
        self.kill_after = kill_after if kill_after is not None else fence_after
        #: Monotonic time the last successful ping was sent (the grant at first).
        self.last_ok_mono = granted_mono if granted_mono is not None else self._started_mono
        # Redis time at the grant, advanced by the monotonic clock (no Redis call
        # on the heartbeat's own thread, so it never blocks on a dead connection).
        self._time_base = (started_at, self.last_ok_mono)
        self._pinging = False
        self._ping_result: tuple[str, float] | None = None
        #: A progress changed since the last ping carried one (set by
        #: ``set_progress``, cleared by the heartbeat as it sends it), and when a
        #: ping last carried a changed progress (monotonic).
        self._progress_pending = False
        self._progress_pinged_mono = float("-inf")
        self._ping_lock = threading.Lock()
        #: Held by ``interrupt()`` from its check of ``_done`` to the delivery, and
        #: by ``finish()`` while it sets ``_done``: an interruption is delivered
        #: before the run finished or not at all.
        self._deliver_lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        if self._time_base[0] is None:
            self._time_base = (self._now(), time.monotonic())
        with _live_lock:
            _live[self._thread_id] = self
        self._beat.start()

    def finish(self) -> None:
        """The run's code returned or raised: stop the heartbeat.

        Idempotent. Once ``_done`` is set (under the delivery lock) no
        interruption is delivered any more; one delivered just before and still
        pending in this thread is cleared, so it cannot surface in the code that
        records the run's end. (It may still have been raised on the way in:
        the caller retries ``finish()`` on ``RunTerminated``.)"""
        with self._deliver_lock:
            self._done.set()
            if self.delivered and not self._on_main:
                _clear_async_exc(self._thread_id)
        self._wake.set()
        with _live_lock:
            if _live.get(self._thread_id) is self:
                del _live[self._thread_id]
        if self._beat.ident is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=5)

    def set_progress(self, value: float) -> None:
        """The run's progress, sent with a ping soon (:data:`PROGRESS_PING_GAP_S`)."""
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"progress must be between 0 and 1, got {value}")
        changed = value != self.progress
        self.progress = value
        if changed and not self._progress_pending:
            self._progress_pending = True
            self._wake.set()

    # -- interruption -----------------------------------------------------------------
    def interrupt(self, outcome: str, reason: str) -> None:
        with self._deliver_lock:
            if self.interruption is not None or self._done.is_set():
                self._wake.set()  # a heartbeat waiting for the run looks again
                return
            self.interruption = RunTerminated(outcome, reason)
            logger.warning(
                "celery-dgs: stopping run %s of %s (%s: %s)",
                self.run_id,
                self.schedule,
                outcome,
                reason,
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
        self._stop_on(self._limits(now))

    def _limits(self, now: datetime) -> RunTerminated | None:
        """The stop the run's limits call for at ``now`` (past
        ``max_allowed_duration``, into a blackout); logs a run past
        ``max_expected_duration`` once."""
        elapsed = timedelta(seconds=time.monotonic() - self._started_mono)
        spec = self.spec
        if spec.max_allowed_duration is not None and elapsed >= spec.max_allowed_duration:
            return RunTerminated(
                "terminated", f"ran {elapsed} > max_allowed_duration {spec.max_allowed_duration}"
            )
        if spec.blackout_periods:
            window = blackout_containing(spec.blackout_periods, spec.tz, now)
            if window is not None:
                began = f"blackout window {window[0]}..{window[1]} began"
                return RunTerminated("terminated", began)
        if (
            spec.max_expected_duration is not None
            and not self._warned_expected
            and elapsed > spec.max_expected_duration
        ):
            self._warned_expected = True
            logger.error(
                "celery-dgs: run %s of %s has run %s, past max_expected_duration %s",
                self.run_id,
                self.schedule,
                elapsed,
                spec.max_expected_duration,
            )
        return None

    # -- pings, on their own thread ---------------------------------------------------
    def estimated_now(self) -> datetime:
        """Redis time now, from the grant's Redis time and the monotonic clock
        (immune to jumps of the local wall clock)."""
        return self._estimated_now()

    def _estimated_now(self) -> datetime:
        base, base_mono = self._time_base
        assert base is not None
        return base + timedelta(seconds=time.monotonic() - base_mono)

    def _progress_ping_in(self) -> float | None:
        """Seconds until a changed progress is sent with a ping of its own
        (0.0: now; ``None``: none is pending)."""
        if not self._progress_pending:
            return None
        due = self._progress_pinged_mono + PROGRESS_PING_GAP_S
        return max(due - time.monotonic(), 0.0)

    def _send_ping(self) -> bool:
        """Start one ping on a short-lived thread unless one is still in flight
        (then ``False``)."""
        with self._ping_lock:
            if self._pinging:
                return False
            self._pinging = True
        threading.Thread(
            target=self._ping_once,
            args=(time.monotonic(),),
            daemon=True,
            name=f"dgs-ping-{self.schedule}",
        ).start()
        return True

    def _ping_once(self, sent: float) -> None:
        try:
            status = self._ping(self.progress)
        except Exception as exc:
            logger.warning(
                "celery-dgs: ping of %s failed (%s); retrying at the next ping", self.schedule, exc
            )
            status = "FAILED"
        with self._ping_lock:
            self._pinging = False
            self._ping_result = (status, sent)
        self._wake.set()

    def _take_ping_result(self) -> RunTerminated | None:
        """Apply the last ping's answer; the stop it calls for, if any (the
        lease stolen or gone, or the run cancelled)."""
        with self._ping_lock:
            result, self._ping_result = self._ping_result, None
        if result is None:
            return None
        status, sent = result
        if status in ("OK", "CANCELLED"):
            self.last_ok_mono = max(self.last_ok_mono, sent)
        if status == "NOT_OWNER":
            return RunTerminated("stolen", "the lease now belongs to another run")
        if status == "GONE":
            return RunTerminated(
                "stolen",
                "the lease is gone: taken over and released since, "
                "or lost with Redis's data (restart, failover)",
            )
        if status == "CANCELLED":
            return RunTerminated("cancelled", "an operator cancelled the run")
        return None

    def _fence(self) -> RunTerminated | None:
        """The self-fencing stop, once no ping has succeeded for ``fence_after``."""
        if self.fence_after is None:
            return None
        silent = time.monotonic() - self.last_ok_mono
        if silent < self.fence_after:
            return None
        reason = (
            f"no successful ping for {silent:.1f}s (limit {self.fence_after:g}s): "
            "the lease may be taken over"
        )
        return RunTerminated("self_fenced", reason)

    def _stop_on(self, stop: RunTerminated | None) -> None:
        if stop is not None:
            self.interrupt(stop.outcome, stop.reason)

    def kill_deadline_left(self) -> float:
        """Seconds until this run's process must be gone (self-fencing), or inf."""
        if self.kill_after is None:
            return math.inf
        return self.last_ok_mono + self.kill_after - time.monotonic()

    def _outwaits(self, stop: RunTerminated) -> bool:
        """Whether a run that ignored ``stop`` is waited for rather than its
        process ended: it yields to its worker's warm shutdown, and shares
        its process with other tasks (a thread of the threads pool), which
        ending the process would lose. Celery's warm shutdown waits for it
        anyway; a cold one does not."""
        return stop.outcome == "yielded" and not self._on_main and not cold_shutdown()

    def _outwait(self, grace: float) -> RunTerminated | None:
        """Ping the lease until the run's code stops (``None``), or return the
        stop that ends its process after all: the shutdown turned cold, the
        lease stolen or gone, the run cancelled, past its limits
        (``max_allowed_duration``, a blackout), or no successful ping for
        ``fence_after`` (another owner may take the lease over): the run
        stays the lease's one live copy. Past ``grace`` it says, once, that
        the worker's shutdown waits for the run."""
        next_ping = time.monotonic()
        said_at: float | None = next_ping + grace
        while not self._done.is_set():
            if said_at is not None and time.monotonic() >= said_at:
                said_at = None
                logger.warning(
                    "celery-dgs: run %s of %s did not stop within %.1fs; the worker's "
                    "shutdown waits for it (other tasks share its process), its lease kept",
                    self.run_id,
                    self.schedule,
                    grace,
                )
            if cold_shutdown():  # the shutdown turned cold: Celery waits no longer
                return self.interruption
            stop = self._take_ping_result() or self._limits(self._estimated_now())
            if stop is not None:
                return stop
            stop = self._fence()
            if stop is not None:
                return stop
            if time.monotonic() >= next_ping and self._send_ping():
                next_ping = time.monotonic() + self.ping_interval
            wait = min(next_ping - time.monotonic(), self.ping_interval)
            if said_at is not None:
                wait = min(wait, said_at - time.monotonic())
            if self.fence_after is not None:
                wait = min(wait, self.last_ok_mono + self.fence_after - time.monotonic())
            self._wake.wait(max(wait, 0.01))
            self._wake.clear()
        return None

    def _grace(self) -> float:
        """How long an interrupted run may take to stop before its process ends.

        Self-fenced: until ``kill_after`` after the last good ping, so the
        process is gone before a steal. When that has already passed (the whole
        process was paused and has just resumed), half a ping interval, so a
        run that stops promptly is not killed with its worker.

        Stolen (another owner holds the lease, or it is gone): half a ping
        interval, so the overlap of a resumed owner with the new one stays
        within ``ping_interval / 2`` of the interruption (docs/guarantees.md G3).
        Other interruptions (cancelled, terminated, yielded) leave no second
        owner running: the full ``termination_grace``; but when no ping has
        succeeded for a ping interval or more (Redis silent since before the
        interruption), as for a self-fenced run, not past ``kill_after``
        after the last good ping, when another owner may take the lease over."""
        if self.interruption is not None and self.interruption.outcome == "stolen":
            return min(self.termination_grace, self.ping_interval / 2)
        silent = self.interruption is not None and self.interruption.outcome == "self_fenced"
        if silent or time.monotonic() - self.last_ok_mono > self.ping_interval:
            left = max(self.kill_deadline_left(), self.ping_interval / 2)
            return min(self.termination_grace, left)
        return self.termination_grace

    def _loop(self) -> None:
        next_ping = time.monotonic() + self.ping_interval
        while not self._done.is_set():
            try:
                now = self._estimated_now()
                self._stop_on(self._take_ping_result())
                if self.interruption is None:
                    self._check_limits(now)
                if self.interruption is None:
                    self._stop_on(self._fence())
                if self.interruption is None and time.monotonic() >= next_ping:
                    next_ping = time.monotonic() + self.ping_interval
                    pending, self._progress_pending = self._progress_pending, False
                    if not self._send_ping():  # one in flight: it did not carry this one
                        self._progress_pending = pending
                progress_in = self._progress_ping_in()
                if self.interruption is None and progress_in == 0.0:
                    self._progress_pending = False  # before the ping reads the progress
                    if self._send_ping():
                        self._progress_pinged_mono = time.monotonic()
                        next_ping = time.monotonic() + self.ping_interval
                    else:  # one in flight: its answer wakes the loop, which tries again
                        self._progress_pending = True
                if self.interruption is not None:
                    grace = self._grace()
                    if self._outwaits(self.interruption):
                        stop = self._outwait(grace)
                    elif self._done.wait(grace):
                        return
                    else:
                        logger.error(
                            "celery-dgs: run %s of %s did not stop within %.1fs; "
                            "ending its process",
                            self.run_id,
                            self.schedule,
                            grace,
                        )
                        self.on_unresponsive(self.interruption)
                        return
                    if stop is not None:
                        logger.error(
                            "celery-dgs: run %s of %s, waited for at shutdown, ends its "
                            "process: %s",
                            self.run_id,
                            self.schedule,
                            stop.reason,
                        )
                        self.on_unresponsive(stop)
                    return
                wait = min(self._next_deadline(now), max(next_ping - time.monotonic(), 0.05))
                progress_in = self._progress_ping_in()
                if progress_in is not None and not self._pinging:  # (else its answer wakes)
                    wait = min(wait, max(progress_in, 0.01))
                if self.fence_after is not None:
                    fence_in = self.last_ok_mono + self.fence_after - time.monotonic()
                    wait = min(wait, max(fence_in, 0.01))
            except Exception:
                logger.exception("celery-dgs: heartbeat of %s failed; retrying", self.schedule)
                wait = min(self.ping_interval, 1.0)
            self._wake.wait(wait)
            self._wake.clear()
