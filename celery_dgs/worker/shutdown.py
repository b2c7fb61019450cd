"""Knowing, in a worker process, that the worker is leaving.

Celery sends ``worker_shutting_down`` *after* a cold shutdown (SIGQUIT) has
cancelled the tasks (``celery.apps.worker.on_cold_shutdown`` calls
``consumer.cancel_active_requests()`` first, and with a soft shutdown it waits
``worker_soft_shutdown_timeout`` before that). No signal fires earlier, so
:func:`hook_cold_shutdown` wraps those two methods of the worker's own consumer
and controller instances (at ``worker_ready``): the worker leaves the registry
when the soft shutdown starts, and its runs yield just before Celery cancels
them. The cancelled task itself then ends with whatever the pool raises in it:

- solo pool: the run was already interrupted (``yielded``) by the hook, in the
  same process;
- prefork: the pool process gets SIGTERM and billiard's terminate handler
  raises ``SystemExit(-241)`` in the task; :func:`pool_process_terminating`
  recognises it (billiard's ``terminate_handler_fired()``), and the run is
  recorded as ``yielded``, never as a failure.

:func:`worker_leaving` is also set in a pool process that receives the
interrupt signal with no run to stop (warm shutdown), so a run waiting out the
Redis restart grace gives up instead of delaying the shutdown.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..dispatches import DispatchRecords

logger = logging.getLogger("celery_dgs.worker")

#: The reason recorded for a run interrupted by a warm or cold worker shutdown.
SHUTDOWN_REASON = "the worker is shutting down"

_leaving = threading.Event()
_cold = threading.Event()


def mark_leaving() -> None:
    """This process's worker is shutting down (warm or cold)."""
    _leaving.set()


def worker_leaving() -> bool:
    return _leaving.is_set()


def mark_cold_shutdown() -> None:
    """This process's worker is shutting down cold: Celery cancels its tasks
    rather than waiting for them."""
    _leaving.set()
    _cold.set()


def cold_shutdown() -> bool:
    return _cold.is_set()


def wait_unless_leaving(seconds: float) -> bool:
    """Sleep up to ``seconds``; True if the worker started leaving meanwhile."""
    return _leaving.wait(max(seconds, 0.0))


def flag_worker_stopping(how: str, exitcode: int) -> None:
    """Set Celery's own stop flag (``should_stop`` for a warm shutdown,
    ``should_terminate`` for a cold one) from ``worker_shutting_down``.

    Celery sets it after that signal's receivers return; before Celery 5.7 it
    is skipped when a receiver raises, as the solo pool's run interruption
    does (it raises in the task, on the signal handler's thread), and the
    worker would go on consuming instead of stopping."""
    from celery.worker import state

    setattr(state, "should_terminate" if how == "Cold" else "should_stop", exitcode)


def pool_process_terminating(exc: BaseException) -> bool:
    """``exc`` is the SystemExit of billiard's terminate-signal handler: this
    pool process is being ended by its worker (a cold shutdown's cancel)."""
    if not isinstance(exc, SystemExit):
        return False
    try:
        from billiard import common
    except ImportError:  # pragma: no cover - billiard comes with Celery
        return False
    fired = getattr(common, "terminate_handler_fired", None)
    if fired is not None:
        return bool(fired())
    flag = getattr(common, "_should_have_exited", None)  # billiard before terminate_handler_fired
    return bool(flag and flag[0])


def hook_cold_shutdown(
    consumer: Any, *, leave: Callable[[], None], stop_runs: Callable[[], None]
) -> bool:
    """Call ``leave()`` when a soft or cold shutdown begins, and ``leave()``
    then ``stop_runs()`` just before Celery cancels the active tasks.

    Wraps ``consumer.cancel_active_requests`` and
    ``consumer.controller.wait_for_soft_shutdown`` on the instances; returns
    False (and logs) when this Celery has neither method. The hooks never
    stop Celery's own shutdown: their errors are logged."""

    def guarded(what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            logger.exception("celery-dgs: %s at cold shutdown failed", what)

    def on_leave() -> None:
        mark_leaving()
        guarded("leaving the worker registry", leave)

    hooked = False
    cancel = getattr(consumer, "cancel_active_requests", None)
    if callable(cancel):

        @functools.wraps(cancel)
        def cancel_active_requests(*args: Any, **kwargs: Any) -> Any:
            mark_cold_shutdown()
            on_leave()
            # On the solo pool this raises the run's interruption right here (the
            # task is on this thread); Celery's own cancel would only raise
            # NotImplementedError in it.
            stop_runs()
            return cancel(*args, **kwargs)

        consumer.cancel_active_requests = cancel_active_requests
        hooked = True
    controller: Any = getattr(consumer, "controller", None)
    soft = getattr(controller, "wait_for_soft_shutdown", None)
    if callable(soft):

        @functools.wraps(soft)
        def wait_for_soft_shutdown(*args: Any, **kwargs: Any) -> Any:
            on_leave()
            return soft(*args, **kwargs)

        controller.wait_for_soft_shutdown = wait_for_soft_shutdown
    if not hooked:
        logger.warning(
            "celery-dgs: this Celery has no consumer.cancel_active_requests; a cold "
            "shutdown's cancelled runs may be recorded as failures"
        )
    return hooked


def give_back_dispatches(dispatches: DispatchRecords, worker: str) -> list[str]:
    """Take back the pending dispatches addressed to ``worker``, which is
    leaving: their messages would wait in its own queue, and beat would only
    take them back after ``dgs_dispatch_timeout``. Beat sees the records gone
    at its next round and dispatches those schedules to a live worker.
    Returns the schedules given back (one read round trip, one per take-back)."""
    from ..dispatches import DispatchRecord
    from ..errors import MalformedDataError

    names = sorted(dispatches.pending_names())
    if not names:
        return []
    pipe = dispatches.client.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(dispatches.keys.dispatch(name))
    given = []
    for name, data in zip(names, pipe.execute(raise_on_error=False), strict=True):
        if not isinstance(data, dict) or not data:
            continue  # started or taken back meanwhile, or not a hash (beat logs that)
        try:
            record = DispatchRecord.from_hash(dispatches.keys.dispatch(name), name, data)
        except MalformedDataError:
            continue
        if record.worker == worker and dispatches.take_back(name, record.dispatch_id):
            given.append(name)
    if given:
        logger.info(
            "celery-dgs: %s is leaving; gave back %d dispatch(es): %s",
            worker,
            len(given),
            ", ".join(given),
        )
    return given
