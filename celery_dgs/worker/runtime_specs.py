"""The spec a worker runs a runtime schedule with.

A runtime schedule (added through ``dgs.schedules`` or ``celery dgs add /
import``) is in no worker's declarations: the worker reads it from the store
when beat's dispatch names it (the ``dgs_schedule`` header), so the run is
supervised like any other, under its lease, with the stored spec. A dispatch
that reaches the worker after its schedule was removed is skipped (recorded,
its dispatch record given back): a removed schedule never runs again.
"""

from __future__ import annotations

import logging
import socket
import uuid
from datetime import datetime, timezone
from typing import Any

from ..core.spec import ScheduleSpec
from ..errors import UnknownScheduleError
from ..runtime import Runtime
from ..store.base import OWNER_RUNTIME
from .runs import node_of

logger = logging.getLogger("celery_dgs.worker")


def runtime_spec(rt: Runtime, schedule: str) -> tuple[ScheduleSpec | None, str | None]:
    """``(spec, None)`` for the active runtime schedule ``schedule``;
    ``(None, why)`` for a runtime schedule that must not run (removed, or its
    stored spec invalid: the caller skips the dispatch,
    :func:`skip_dispatch`); ``(None, None)`` when there is no runtime
    schedule of that name (the caller treats it as any unknown schedule)."""
    try:
        row = rt.store.get(schedule)
    except UnknownScheduleError:
        return None, None
    if row.owner != OWNER_RUNTIME:
        return None, None
    if not row.active:
        return None, "schedule removed"
    if row.spec is None:
        return None, f"stored spec invalid: {row.spec_error}"
    return row.spec, None


def skip_dispatch(rt: Runtime, schedule: str, request: Any, reason: str) -> None:
    """Record the dispatch in ``request`` as skipped for ``reason`` and give its
    dispatch record back; failures are logged, never raised."""
    dispatch_id = getattr(request, "dgs_dispatch_id", None)
    owner = str(getattr(request, "hostname", None) or socket.gethostname())
    logger.warning("celery-dgs: skipped %s on %s: %s", schedule, owner, reason)
    try:
        if dispatch_id:
            rt.dispatches.take_back(schedule, dispatch_id)
        rt.store.record_skip(
            schedule=schedule, run_id=uuid.uuid4().hex, dispatch_id=dispatch_id,
            owner_node=node_of(owner), owner_name=owner, reason=reason,
            at=datetime.now(timezone.utc),
        )  # fmt: skip
    except Exception:
        logger.exception("celery-dgs: could not record the skip of %s", schedule)
