"""Asking for a run's lease: the wait through a Redis restart grace, what a
grant carries, and why a refusal is recorded as a skip."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..leases.types import AcquireResult, AcquireStatus, LeaseInfo
from .shutdown import wait_unless_leaving

logger = logging.getLogger("celery_dgs.worker")

#: Acquires retried after waiting out a Redis restart grace (another restart
#: during the wait starts a new grace).
GRACE_WAITS = 3
#: Seconds past the grace's end before asking again (Redis times are in ms).
GRACE_MARGIN = 0.05


@dataclass(frozen=True)
class Grant:
    """A granted lease: its fencing token, its start (Redis time), the
    monotonic time the acquire was asked (the grant, and its first "ping", is no
    earlier) and the lease it took over, if any."""

    token: int
    started_at: datetime
    asked_mono: float
    took_over_from: LeaseInfo | None


def acquire_through_grace(ask: Callable[[], AcquireResult]) -> tuple[AcquireResult, float]:
    """``ask()``'s answer and the monotonic time it was asked (the grant, and
    its first "ping", is no earlier). A RECOVERING answer is waited out and
    asked again, up to :data:`GRACE_WAITS` times: the dispatch keeps its record
    (beat counts it pending), where a skip would only be re-sent after
    dispatch_timeout. Errors of ``ask`` are raised."""
    asked_mono = time.monotonic()
    result = ask()
    if result.status is AcquireStatus.RECOVERING:
        for _ in range(GRACE_WAITS):
            if result.status is not AcquireStatus.RECOVERING or not wait_out_grace(result):
                break
            asked_mono = time.monotonic()
            result = ask()
    return result, asked_mono


def wait_out_grace(result: AcquireResult) -> bool:
    """Sleep until the restart grace of a RECOVERING acquire ends; False (at
    once) when the worker starts shutting down or the reply names no end."""
    if result.grace_ends_at is None:
        return False
    left = (result.grace_ends_at - result.now).total_seconds() + GRACE_MARGIN
    logger.info(
        "celery-dgs: Redis restarted; waiting %.1fs for its grace to end (%s)",
        left,
        result.grace_ends_at.isoformat(),
    )
    return not wait_unless_leaving(left)


def refusal_reason(result: AcquireResult, dispatch_id: str | None) -> str:
    """Why the lease was not granted, as the skip records it."""
    holder = getattr(result, "holder", None)
    reason = result.status.name.lower() + (f" (held by {holder.owner_name})" if holder else "")
    if result.status is AcquireStatus.STALE_DISPATCH:
        reason += (
            f" (dispatch {dispatch_id} already started, taken back or replaced: "
            "a redelivered or superseded message)"
        )
    if result.grace_ends_at is not None:
        until = result.grace_ends_at.isoformat()
        reason += (
            " (Redis restarted or lost data, including this schedule's last "
            f"grant: no new lease until {until})"
        )
    return reason
