"""Dispatches Celery discards before they run: a task this worker does not
have (unregistered), or a message revoked by id (``celery control revoke``)
or past its ``expires``. Beat counts a dispatch's slot busy until its worker
starts the run or ``dgs_dispatch_timeout`` passes; a discarded one never
starts, so its record is given back at once and a skip row says why.

Beat then finds the slot free, and the schedule as due as before, at its
next round (it is not woken: a revoked schedule would be sent straight back,
under a new task id). Stopping a schedule is ``celery dgs pause``; stopping a
live run, ``celery dgs cancel``.
"""

from __future__ import annotations

import logging
from typing import Any

from ..clock_offset import format_seconds
from ..failures import log_failure
from ..runtime import runtime_for
from .runtime_specs import give_back_dispatch
from .startup import DgsPlugin

logger = logging.getLogger("celery_dgs.worker")

#: An expired dispatch's skip row names the worker's clock when it runs ahead
#: of Redis's by at least this share of ``dgs_dispatch_timeout``.
CLOCK_SHARE_NAMED = 0.1


def give_back_unknown_task(
    app: Any, dgs: DgsPlugin, consumer: Any, message: Any, task: str
) -> None:
    """A dispatch of a task this worker does not have (Celery discarded it as
    unregistered). Beat places no run on a worker whose registration lacks
    the task; this covers a beat that does not read the tasks (an older
    version during a rolling upgrade). Never raises."""
    headers = getattr(message, "headers", None) or {}
    hostname = str(getattr(consumer, "hostname", "") or "this worker")
    _give_back(
        app,
        dgs,
        headers.get("dgs_schedule"),
        headers.get("dgs_dispatch_id"),
        hostname,
        f"{hostname} has no task {task!r} (discarded as unregistered)",
        logging.ERROR,
    )


def give_back_revoked(
    app: Any, dgs: DgsPlugin, request: Any, *, expired: bool, clock_offset: float | None = None
) -> None:
    """A dispatch Celery discarded unstarted, its message revoked by id or
    past its ``expires`` (``request``: the message's context, as Celery's
    ``task_revoked`` gives it; ``clock_offset``: this worker's clock minus
    Redis's, when notable, named as the likely cause when it is a tenth of
    ``dgs_dispatch_timeout`` or more). Never raises."""
    hostname = str(getattr(request, "hostname", "") or "this worker")
    why = (
        "expired (sent more than dgs_dispatch_timeout ago)"
        if expired
        else "revoked (celery control revoke)"
    )
    timeout = dgs.settings.dispatch_timeout
    if expired and clock_offset is not None and clock_offset >= timeout * CLOCK_SHARE_NAMED:
        why = (
            f"expired (sent more than dgs_dispatch_timeout ago by {hostname}'s clock, which "
            f"is {format_seconds(clock_offset)} ahead of Redis's: run NTP on that host)"
        )
    _give_back(
        app,
        dgs,
        getattr(request, "dgs_schedule", None),
        getattr(request, "dgs_dispatch_id", None),
        hostname,
        f"{hostname} discarded the message unstarted: {why}",
        logging.WARNING,
    )


def _give_back(
    app: Any,
    dgs: DgsPlugin,
    schedule: object,
    dispatch_id: object,
    hostname: str,
    reason: str,
    level: int,
) -> None:
    if not schedule or not dispatch_id:
        return  # not one of beat's dispatches
    logger.log(level, "celery-dgs: dispatch %s of %s: %s", dispatch_id, schedule, reason)
    try:
        give_back_dispatch(
            runtime_for(app, dgs.settings), str(schedule), str(dispatch_id), hostname, reason
        )
    except Exception as exc:
        log_failure(logger, exc, "celery-dgs: giving back the dispatch of %s failed", schedule)
