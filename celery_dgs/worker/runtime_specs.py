"""The spec a worker runs a schedule with when its own declarations lack it.

A runtime schedule (added through ``dgs.schedules`` or ``celery dgs add /
import``) or a deferred check is in no worker's declarations: the worker reads
it from the store when beat's dispatch names it (the ``dgs_schedule`` header),
so the run is supervised like any other, under its lease, with the stored
spec. So is a declared schedule that beat declares and this worker does not
(their code differs, as during a deploy): it runs as beat stored it. A
dispatch that reaches the worker after its schedule was removed (or no longer
declared) is skipped (recorded, its dispatch record given back): a removed
schedule never runs again. The row read for the spec also gives the run's
token floor (its ``current_token``), so the lease is asked for without
reading the row again.
"""

from __future__ import annotations

import logging
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from ..core.spec import ScheduleSpec
from ..errors import UnknownScheduleError
from ..failures import log_failure
from ..runtime import Runtime
from ..store.check_types import OWNER_CHECK
from ..store.records import OWNER_DECLARED
from .run_records import record_skipped
from .runs import node_of

logger = logging.getLogger("celery_dgs.worker")


@dataclass(frozen=True)
class StoredSpec:
    """A schedule's stored spec and its token floor, read together."""

    spec: ScheduleSpec
    #: The highest fencing token the store recorded for it (0: none yet).
    token_floor: int
    #: Who keeps the row: ``runtime``, ``check`` or ``declared`` (beat's sync).
    owner: str


def stored_spec(rt: Runtime, schedule: str) -> tuple[StoredSpec | None, str | None]:
    """``(stored, None)`` for the active schedule ``schedule``; ``(None,
    why)`` for one that must not run (removed, no longer declared, or its
    stored spec invalid: the caller skips the dispatch,
    :func:`skip_dispatch`); ``(None, None)`` when the store has no schedule of
    that name (the caller treats it as any unknown schedule)."""
    try:
        row = rt.store.get(schedule)
    except UnknownScheduleError:
        return None, None
    if not row.active:
        if row.owner == OWNER_CHECK:
            return None, "check ended or cancelled"
        if row.owner == OWNER_DECLARED:
            return None, "schedule no longer declared"
        return None, "schedule removed"
    if row.spec is None:
        return None, f"stored spec invalid: {row.spec_error}"
    return StoredSpec(row.spec, int(row.current_token or 0), row.owner), None


def skip_dispatch(rt: Runtime, schedule: str, request: Any, reason: str) -> None:
    """Record the dispatch in ``request`` as skipped for ``reason`` and give its
    dispatch record back; failures are logged, never raised."""
    dispatch_id = getattr(request, "dgs_dispatch_id", None)
    owner = str(getattr(request, "hostname", None) or socket.gethostname())
    give_back_dispatch(rt, schedule, dispatch_id, owner, reason)


def give_back_dispatch(
    rt: Runtime, schedule: str, dispatch_id: str | None, owner: str, reason: str
) -> None:
    """Give the dispatch record ``dispatch_id`` back (a worker ``owner`` will
    not run it) and record a skip for ``reason``; failures are logged, never
    raised."""
    if dispatch_id:
        try:
            rt.dispatches.take_back(schedule, dispatch_id)
        except Exception as exc:
            log_failure(logger, exc, "celery-dgs: could not give back the dispatch of %s", schedule)
    record_skipped(
        rt,
        schedule,
        run_id=uuid.uuid4().hex,
        dispatch_id=dispatch_id,
        node=node_of(owner),
        owner=owner,
        reason=reason,
    )
