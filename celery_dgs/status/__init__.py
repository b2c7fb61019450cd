"""Status rows for ``celery dgs status`` and ``celery dgs leases``.

Pure functions of what the store and Redis hold (:class:`StoredSchedule`,
:class:`LeaseInfo`) and ``now``: each schedule's condition (core
:func:`~celery_dgs.core.condition.condition`), its start times (core
:func:`~celery_dgs.core.timing.start_times`), its statistics and who runs it.
No Celery: the operations layer (:mod:`celery_dgs.ops`) reads the state, the
CLI and the status page format the rows.

Decisions:

* A paused schedule's condition is computed as for any other one: pausing
  stops dispatch, it does not make stale data fresh. The row says it is paused.
* A stored spec that no longer validates is ERROR with reason
  ``invalid_spec`` (beat cannot schedule it) and no times.
* A schedule whose declaration is invalid (``declaration_error``) is ERROR
  ``declaration_invalid`` naming the field: beat serves the last valid stored
  version, whose times are shown.
* A schedule with a lease is running (whatever its steal state), as for beat's
  metrics: the condition then uses the lease's ``started_at``.
* Given the worker slots, an OK schedule that the projection of beat's greedy
  order over the live state (:mod:`~celery_dgs.core.projection`) starts after
  its ``should_start_by`` is WARNING ``projected_late``.
* Each row says when beat may dispatch it (``may_run_at``) and what holds it
  back (``holds``, most blocking first): an invalid spec, inactive, paused,
  no live worker able to run it (none consumes its pool, or
  ``dont_run_on_nodes`` excludes every one that does), a retry backoff after
  failures, a blackout window. ``may_run_at`` is ``None`` while it runs or
  while a hold without an end (paused, no worker, ...) applies; otherwise it
  is ``can_start_by`` (past: it may run now). A pending run request (``celery
  dgs run``) is dispatched at once, ahead of backoff and blackouts as beat
  does: ``may_run_at`` is then the request's time.

The modules: :mod:`.row` (one row, the urgency order), :mod:`.holds` (what
holds a schedule back), :mod:`.workers` (whether a live worker can run it),
:mod:`.projection` and :mod:`.priorities` (beat's order and priority classes
applied to the rows), :mod:`.fleet` (every row), :mod:`.names` (row filters),
:mod:`.lease_state` (steal states), :mod:`.adaptive` (adaptive schedules'
fields and counts), :mod:`.check_summary` (the cached deferred-check summary).
"""

from __future__ import annotations

from .adaptive import ADAPTIVE_GROUPS, AdaptiveSummary, adaptive_fields, adaptive_summary
from .check_summary import CachedCheckSummary
from .fleet import build_page, build_rows
from .holds import (
    HOLD_BACKOFF,
    HOLD_BLACKOUT,
    HOLD_DISABLED,
    HOLD_INACTIVE,
    HOLD_INVALID_SPEC,
    HOLD_LOOKAHEAD,
    HOLD_NO_WORKER,
    HOLD_PAUSED,
    INVALID_SPEC,
    Hold,
    holds_for,
    holds_of,
    may_run_at,
)
from .lease_state import (
    STEAL_NONE,
    STEAL_PENDING,
    STEAL_STALE,
    STEAL_TAKEABLE,
    ping_age,
    steal_state,
)
from .names import is_check_name, matches, name_matcher, name_matches
from .priorities import apply_priorities
from .projection import apply_projection
from .row import StatusRow, any_error, build_row, count_levels, schedule_condition, urgency_key
from .workers import NO_LIVE_WORKER, WorkerCheck

__all__ = [
    "ADAPTIVE_GROUPS",
    "HOLD_BACKOFF",
    "HOLD_BLACKOUT",
    "HOLD_DISABLED",
    "HOLD_INACTIVE",
    "HOLD_INVALID_SPEC",
    "HOLD_LOOKAHEAD",
    "HOLD_NO_WORKER",
    "HOLD_PAUSED",
    "INVALID_SPEC",
    "NO_LIVE_WORKER",
    "STEAL_NONE",
    "STEAL_PENDING",
    "STEAL_STALE",
    "STEAL_TAKEABLE",
    "AdaptiveSummary",
    "CachedCheckSummary",
    "Hold",
    "StatusRow",
    "WorkerCheck",
    "adaptive_fields",
    "adaptive_summary",
    "any_error",
    "apply_priorities",
    "apply_projection",
    "build_page",
    "build_row",
    "build_rows",
    "count_levels",
    "holds_for",
    "holds_of",
    "is_check_name",
    "matches",
    "may_run_at",
    "name_matcher",
    "name_matches",
    "ping_age",
    "schedule_condition",
    "steal_state",
    "urgency_key",
]
