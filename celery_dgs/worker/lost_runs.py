"""A pool process that died running a scheduled task (killed for its memory,
``SIGKILL``, a crash): its run ends as a failure at once.

The run's heartbeat died with the process, so its lease would go silent and
be taken over after ``dgs_ping_timeout`` + ``dgs_steal_delay``, the run then
recorded ``stolen``: an interruption, not a failure, so a task killed at
every run would be retried at once, without the retry backoff, forever.
Celery's main process sees the process end (``WorkerLostError``) and sends
``task_failure``; :func:`end_lost_run` runs there. The run is the one this
worker holds the schedule's lease for (the message's dispatch, if beat sent
it: a lease names its run and its dispatch): it is recorded ``failure``
with Celery's reason, and the lease released, as the run would have ended
itself.
"""

from __future__ import annotations

import logging
from typing import Any

from ..failures import log_failure
from ..runtime import Runtime
from .run_records import finish_run

logger = logging.getLogger("celery_dgs.worker")


def end_lost_run(
    rt: Runtime, schedule: str, dispatch_id: str | None, hostname: str, reason: str
) -> str | None:
    """End the run of ``schedule`` that this worker (``hostname``) holds the
    lease for, of ``dispatch_id`` when given, as a failure for ``reason``;
    the run's id, or ``None`` when this worker holds no such lease (the run
    never acquired it, or it was taken over)."""
    lease = rt.leases.get(schedule)
    if lease is None or lease.owner_name != hostname:
        return None
    if dispatch_id is not None and lease.dispatch_id != dispatch_id:
        return None
    logger.warning(
        "celery-dgs: the pool process running %s (run %s) died: %s; recorded as a failure",
        schedule,
        lease.owner_tag,
        reason,
    )
    finish_run(rt, schedule, lease.owner_tag, "failure", f"its process died: {reason}")
    return lease.owner_tag


def on_lost_task(rt: Runtime, task: Any, exception: BaseException) -> None:
    """``task_failure`` of ``task`` in the worker's main process with
    ``exception`` (a ``WorkerLostError``): the scheduled run it was, if any,
    ends as a failure. Never raises (a signal handler)."""
    request = getattr(task, "request", None)
    hostname = getattr(request, "hostname", None)
    schedule = getattr(request, "dgs_schedule", None) or getattr(task, "name", None)
    if not hostname or not schedule:
        return
    dispatch_id = getattr(request, "dgs_dispatch_id", None)
    reason = " ".join(str(exception).split()) or type(exception).__name__
    try:
        end_lost_run(rt, str(schedule), dispatch_id, str(hostname), reason)
    except Exception as exc:
        log_failure(logger, exc, "celery-dgs: ending the lost run of %s failed", schedule)
