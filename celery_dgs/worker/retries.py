"""Retries of scheduled tasks stay under the scheduler's control.

``Task.retry()`` (and ``autoretry_for``, which calls it) publishes a new
message with a countdown or ETA, then raises ``Retry``. For a scheduled task
that message would run outside celery-dgs (no dispatch record, no deadline
order) and the Redis broker may deliver an ETA message more than once. So
inside a supervised run ``retry()`` publishes nothing: it raises the
exception it was asked to retry after (its ``exc``, else the one being
handled), as Celery's own ``retry()`` does once ``max_retries`` is reached,
or :class:`~celery_dgs.errors.RetryRefused` when there is none. The run is
recorded as a failure with that exception and a note of the refusal, and
beat retries the schedule after the ``dgs_retry_backoff`` ladder
(``can_start_by``). Outside a supervised run (a direct call, an unsupervised
task) ``retry()`` is Celery's own.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

from ..errors import RetryRefused
from .supervisor import current_supervisor

logger = logging.getLogger("celery_dgs.worker")


def keep_retries_in_the_scheduler(task: Any) -> None:
    """Replace ``task.retry`` (once) so a supervised run never publishes a retry."""
    if getattr(task.retry, "_dgs_retry", False):
        return
    original = task.retry

    @functools.wraps(original)
    def retry(*args: Any, **kwargs: Any) -> Any:
        sup = current_supervisor()
        if sup is None:
            return original(*args, **kwargs)
        exc = _retried_exception(args, kwargs)
        when = kwargs.get("eta") or kwargs.get("countdown")
        cause = f" after {type(exc).__name__}: {exc}" if exc is not None else ""
        logger.warning(
            "celery-dgs: %s asked for a broker retry%s (countdown/eta %s); refused: the "
            "scheduler retries it after dgs_retry_backoff",
            sup.schedule,
            cause,
            when,
        )
        sup.retry_refused = True
        if exc is not None:
            raise exc
        raise RetryRefused(
            f"schedule {sup.schedule!r} called retry(): celery-dgs retries scheduled "
            "tasks itself (dgs_retry_backoff); no broker retry message was sent"
        )

    retry._dgs_retry = True  # type: ignore[attr-defined]
    task.retry = retry


def _retried_exception(args: tuple[Any, ...], kwargs: dict[str, Any]) -> BaseException | None:
    """The exception a ``retry(args, kwargs, exc, ...)`` call retries after:
    its ``exc`` when an exception instance, else the one being handled."""
    exc = kwargs["exc"] if "exc" in kwargs else (args[2] if len(args) > 2 else None)
    if isinstance(exc, BaseException):
        return exc
    return sys.exc_info()[1]
