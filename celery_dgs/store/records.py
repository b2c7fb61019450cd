"""The values the schedule store returns: a stored schedule, a run of its
history, and the reports of ``sync``, ``upsert_runtime`` and ``remove_runtime``
(:class:`~celery_dgs.store.base.ScheduleStore`); the run outcomes and row
owners they hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar, Literal

from ..core.items import ItemCounts
from ..core.run_end import END_OUTCOMES
from ..core.spec import ScheduleSpec
from ..core.stats import ScheduleStats
from ..core.window import KeptStart
from .check_types import OWNER_CHECK

RunOutcome = Literal[
    "running",
    "success",
    "failure",
    "partial_failure",
    "terminated",
    "stolen",
    "cancelled",
    "lost",
    "yielded",
    "self_fenced",
    "skipped",
]

#: Every value of the ``outcome`` column.
ALL_OUTCOMES = END_OUTCOMES | {"running", "skipped"}

#: ``owner`` of a schedule declared in code or ``dgs_schedules``: ``sync`` owns it.
OWNER_DECLARED = "declared"
#: ``owner`` of a schedule added through the runtime API: only the API changes it.
OWNER_RUNTIME = "runtime"
OWNERS = (OWNER_DECLARED, OWNER_RUNTIME, OWNER_CHECK)


@dataclass(frozen=True, kw_only=True)
class StoredSchedule:
    """A schedule as stored: its spec, operator flags and statistics.

    ``spec`` is ``None`` when the stored JSON no longer validates (written by
    another version, edited by hand); ``spec_error`` then says why, and readers
    carry on with the other schedules. ``current_token`` is the fencing token of
    the latest run granted (``None``: never ran). ``run_requested_at`` is set
    while an operator's ad-hoc run request waits for beat. ``change_seq`` orders
    every change to the row (see
    :meth:`~celery_dgs.store.base.ScheduleStore.changes_since`).
    ``declaration_error`` is set while the schedule's declaration is invalid:
    ``spec`` is then the last valid version, which beat keeps serving.
    ``owner`` is :data:`OWNER_DECLARED` (``sync`` owns the row) or
    :data:`OWNER_RUNTIME` (the runtime API owns it). ``disabled_reason`` is
    set while an adaptive schedule is disabled after too many failures.
    """

    name: str
    task: str
    configuration: str
    kind: str
    spec: ScheduleSpec | None
    spec_error: str | None
    stats: ScheduleStats
    active: bool
    paused: bool
    current_token: int | None
    run_requested_at: datetime | None
    change_seq: int
    updated_at: datetime
    declaration_error: str | None = None
    owner: str = OWNER_DECLARED
    #: Why an adaptive schedule is disabled (beat does not dispatch it); None: enabled.
    disabled_reason: str | None = None
    #: The priority class of the pending run request (``None``: the default, 0).
    run_requested_priority: int | None = None
    #: A deferred check's first check time and how many checks ran (kind
    #: ``check``; ``None`` for every other kind). Its next check time is
    #: ``stats.next_target_at``.
    first_check_at: datetime | None = None
    check_count: int | None = None
    #: The kept start times, ``error_at`` and margin bucket
    #: (:mod:`~celery_dgs.store.kept`), as of the row's last write: what
    #: beat's window selects the row by. ``None``: an invalid spec, or a row
    #: built before the store wrote it.
    kept_can_start_at: datetime | None = None
    kept_should_start_by: datetime | None = None
    kept_error_at: datetime | None = None
    kept_margin_bucket: int | None = None

    def kept_start(self) -> KeptStart:
        """The kept times beat's window selects the row by."""
        return KeptStart(
            self.kept_can_start_at,
            self.kept_should_start_by,
            self.kept_error_at,
            self.kept_margin_bucket,
        )


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One row of the run history.

    ``outcome`` is ``running`` until the run ends. ``fenced`` is true when the
    run's end was recorded but its statistics were refused because a newer run
    had been granted (its token was stale). A skipped dispatch has
    ``started_at == ended_at`` and the reason in ``error``. ``items_ok`` and
    ``items_failed`` are the item counts the run reported
    (``celery_dgs.report_items``; ``None``: none).
    """

    id: int
    run_id: str
    schedule: str
    dispatch_id: str | None
    owner_node: str | None
    owner_name: str | None
    owner_tag: str | None
    token: int | None
    started_at: datetime
    ended_at: datetime | None
    outcome: str
    error: str | None
    duration_s: float | None
    progress: float | None
    fenced: bool
    items_ok: int | None = None
    items_failed: int | None = None

    @property
    def duration(self) -> timedelta | None:
        return None if self.duration_s is None else timedelta(seconds=self.duration_s)

    @property
    def items(self) -> ItemCounts | None:
        """The item counts the run reported (``None``: none)."""
        if self.items_ok is None or self.items_failed is None:
            return None
        return ItemCounts(self.items_ok, self.items_failed)


@dataclass(frozen=True, kw_only=True)
class SyncReport:
    """What :meth:`~celery_dgs.store.base.ScheduleStore.sync` did, as lists of schedule names.

    Each name appears in at most one list; a schedule declared again after being
    deactivated is ``reactivated`` even if its spec changed too. ``invalid``:
    stored, active schedules whose declaration is invalid, kept as stored.
    ``refused``: declared names stored as active runtime schedules, left as
    they are (:func:`~celery_dgs.store.ownership.owned_by_api` gives the message to show).
    """

    inserted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deactivated: list[str] = field(default_factory=list)
    reactivated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.updated or self.deactivated or self.reactivated)

    #: Names shown per list in :meth:`__str__` (a fleet's sync lists thousands).
    SHOWN_NAMES: ClassVar[int] = 3

    def __str__(self) -> str:
        """``"2 inserted (t.a, t.b), 99 unchanged"``: each list that is not empty,
        its size and its first names (none for ``unchanged``)."""
        parts = []
        for label in ("inserted", "updated", "reactivated", "deactivated", "invalid", "refused"):
            names = getattr(self, label)
            if names:
                shown = ", ".join(names[: self.SHOWN_NAMES])
                more = ", ..." if len(names) > self.SHOWN_NAMES else ""
                parts.append(f"{len(names)} {label} ({shown}{more})")
        if self.unchanged:
            parts.append(f"{len(self.unchanged)} unchanged")
        return ", ".join(parts) or "no schedules declared"


@dataclass(frozen=True, kw_only=True)
class UpsertReport:
    """What :meth:`~celery_dgs.store.base.ScheduleStore.upsert_runtime` did, as
    lists of schedule names.

    ``reactivated``: a stored, inactive row (removed, or no longer declared)
    taken by the runtime API. ``unchanged``: an active runtime schedule whose
    spec is the same: nothing was written. ``refused``: active declared
    schedules, left as they are
    (:func:`~celery_dgs.store.ownership.owned_by_sync`, the message to show).
    """

    inserted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    reactivated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.updated or self.reactivated)


@dataclass(frozen=True, kw_only=True)
class RemoveReport:
    """What :meth:`~celery_dgs.store.base.ScheduleStore.remove_runtime` did, as
    lists of schedule names.

    ``absent``: no such schedule, or a runtime one already removed.
    ``refused``: declared schedules (:func:`~celery_dgs.store.ownership.owned_by_sync`).
    """

    removed: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
