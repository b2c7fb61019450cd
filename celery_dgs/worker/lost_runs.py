"""A pool process that died running a scheduled task (killed for its memory,
``SIGKILL``, a crash), or that Celery ended past the task's hard
``time_limit``: its run ends as a failure at once.

A dead process's heartbeat died with it, so its lease would go silent and be
taken over after ``dgs_ping_timeout`` + ``dgs_steal_delay``, the run then
recorded ``stolen``: an interruption, not a failure, so a task killed at
every run would be retried at once, without the retry backoff, forever.
Celery's main process sees the process end (``WorkerLostError``) and sends
``task_failure``; :func:`end_lost_run` runs there.

Past a hard time limit, Celery's main process sends ``task_failure``
(``TimeLimitExceeded``) *before* it sends the pool process ``SIGTERM``; the
process would read that signal as its worker's cold shutdown and record the
run ``yielded``, re-dispatched at once and killed again at its limit. The
failure is recorded first, so the process's later outcome finds the run
ended and leaves it so (a run's end is written once).

The run is the one this worker holds the schedule's lease for (the
message's dispatch, if beat sent it: a lease names its run and its
dispatch): it is recorded ``failure`` with Celery's reason, and the lease
released, as the run would have ended itself.
"""

from __future__ import annotations

import logging
from typing import Any

from billiard.exceptions import TimeLimitExceeded, WorkerLostError

from ..failures import log_failure
from ..runtime import Runtime
from .run_records import finish_run

logger = logging.getLogger("celery_dgs.worker")

#: The ``task_failure`` exceptions that mean the task's pool process is gone.
PROCESS_ENDED = (WorkerLostError, TimeLimitExceeded)


def end_lost_run(
    rt: Runtime, schedule: str, dispatch_id: str | None, hostname: str, error: str
) -> str | None:
    """End the run of ``schedule`` that this worker (``hostname``) holds the
    lease for, of ``dispatch_id`` when given, as a failure with ``error``;
    the run's id, or ``None`` when this worker holds no such lease (the run
    never acquired it, it was taken over, or it already ended)."""
    lease = rt.leases.get(schedule)
    if lease is None or lease.owner_name != hostname:
        return None
    if dispatch_id is not None and lease.dispatch_id != dispatch_id:
        return None
    logger.warning(
        "celery-dgs: run %s of %s ended: %s; recorded as a failure",
        lease.owner_tag,
        schedule,
        error,
    )
    finish_run(rt, schedule, lease.owner_tag, "failure", error)
    return lease.owner_tag


def process_ended_error(exception: BaseException) -> str:
    """The recorded error of a run whose pool process ended with ``exception``
    (one of :data:`PROCESS_ENDED`)."""
    if isinstance(exception, TimeLimitExceeded):
        limit = exception.args[0] if exception.args else None
        within = f" ({limit:g}s)" if isinstance(limit, int | float) else ""
        return f"Celery ended its process past the task's hard time_limit{within}"
    reason = " ".join(str(exception).split()) or type(exception).__name__
    return f"its process died: {reason}"


def on_lost_task(rt: Runtime, task: Any, exception: BaseException) -> None:
    """``task_failure`` of ``task`` in the worker's main process with
    ``exception`` (one of :data:`PROCESS_ENDED`): the scheduled run it was,
    if any, ends as a failure. Never raises (a signal handler)."""
    request = getattr(task, "request", None)
    hostname = getattr(request, "hostname", None)
    schedule = getattr(request, "dgs_schedule", None) or getattr(task, "name", None)
    if not hostname or not schedule:
        return
    dispatch_id = getattr(request, "dgs_dispatch_id", None)
    try:
        end_lost_run(rt, str(schedule), dispatch_id, str(hostname), process_ended_error(exception))
    except Exception as exc:
        log_failure(logger, exc, "celery-dgs: ending the lost run of %s failed", schedule)
