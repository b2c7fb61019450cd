"""What task code may call while it runs under celery-dgs."""

from __future__ import annotations

import logging
import math

from ..core.checks import CheckInfo
from ..core.items import item_counts
from .supervisor import current_supervisor

logger = logging.getLogger("celery_dgs.worker")


def progress(fraction: float) -> bool:
    """Report progress 0..1 of the current run; sent with the next ping and shown
    by ``celery dgs leases``. Returns False when not inside a supervised run.

    Bookkeeping never fails the task: a value outside 0..1 is clamped (with a
    warning) and one that is not a number is ignored (with a warning)."""
    sup = current_supervisor()
    if sup is None:
        return False
    try:
        value = float(fraction)
    except (TypeError, ValueError):
        logger.warning(
            "celery-dgs: progress(%r) of %s ignored: not a number", fraction, sup.schedule
        )
        return False
    if math.isnan(value):
        logger.warning("celery-dgs: progress(nan) of %s ignored", sup.schedule)
        return False
    if not 0.0 <= value <= 1.0:
        clamped = min(max(value, 0.0), 1.0)
        logger.warning("celery-dgs: progress(%s) of %s clamped to %s", value, sup.schedule, clamped)
        value = clamped
    sup.set_progress(value)
    return True


def current_token() -> int | None:
    """The fencing token of the current run (strictly increasing per schedule,
    also across Redis data loss), for fencing the task's own writes: have the
    target accept a write only if its token is at least the highest it has
    seen (example in ``docs/guarantees.md``, G5). None outside a supervised run."""
    sup = current_supervisor()
    return sup.token if sup is not None else None


def eventful(changed: object = True) -> bool:
    """Report whether the current run found changes (``True``: eventful, the
    default) or none (``False``), for an adaptive schedule's interval: an
    eventful good run shortens it two steps, an uneventful one lengthens it
    one; a run that reports nothing leaves it as it is. The last call of a run
    counts. Returns False when not inside a supervised run; a value that is
    not a bool is ignored with a warning (bookkeeping never fails the task)."""
    sup = current_supervisor()
    if sup is None:
        return False
    if not isinstance(changed, bool):
        logger.warning(
            "celery-dgs: eventful(%r) of %s ignored: not True or False", changed, sup.schedule
        )
        return False
    sup.eventful = changed
    return True


def report_items(*, ok: int, failed: int) -> bool:
    """Report how many of the current run's items succeeded (``ok``) and failed
    (``failed``): totals so far, the last call of a run counts. When the run
    returns, a failed share above the schedule's ``partial_failure_threshold``
    (else ``dgs_partial_failure_threshold``) makes it a ``partial_failure``: it
    counts as failed for the condition and the retry backoff. Either way its
    run record keeps the counts.

    Returns True when recorded. Bookkeeping never fails the task: counts that
    are not whole numbers >= 0 are ignored (an error logged naming the
    schedule and the field), and a call outside a run of a schedule is
    ignored with a warning (False)."""
    sup = current_supervisor()
    if sup is None:
        logger.warning(
            "celery-dgs: report_items(ok=%r, failed=%r) ignored: not inside a run of a "
            "schedule (only a run that celery-dgs supervises keeps item counts)",
            ok,
            failed,
        )
        return False
    try:
        sup.items = item_counts(ok, failed)
    except ValueError as exc:
        logger.error("celery-dgs: report_items of schedule %s ignored: %s", sup.schedule, exc)
        return False
    return True


def current_check() -> CheckInfo | None:
    """The deferred check the current run is (:class:`~celery_dgs.core.checks.CheckInfo`); None
    outside a supervised run of a check."""
    sup = current_supervisor()
    return sup.check if sup is not None else None
