"""The schedule store interface and the values it returns.

Beat, the worker hooks and the CLI depend only on :class:`ScheduleStore`;
:class:`~celery_dgs.store.sql.SqlScheduleStore` is the SQLAlchemy implementation,
:class:`~celery_dgs.store.memory.MemoryScheduleStore` the in-memory reference
backend (tests, benchmarks). ``tests/store`` runs one contract suite on both.
Every datetime in and out is an aware UTC datetime.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from ..core.checks import ON_EXISTS_KEEP

# The run-end rules every store applies (and the simulator), re-exported.
from ..core.run_end import END_OUTCOMES as END_OUTCOMES
from ..core.run_end import FAILURE_OUTCOMES as FAILURE_OUTCOMES
from ..core.run_end import INTERRUPTION_OUTCOMES as INTERRUPTION_OUTCOMES
from ..core.run_end import SUCCESS_OUTCOMES as SUCCESS_OUTCOMES
from ..core.run_end import disabled_after as disabled_after
from ..core.run_end import stats_after as stats_after
from ..core.spec import ScheduleSpec, differing_fields
from ..core.stats import DEFAULT_EWMA_ALPHA, ScheduleStats
from ..errors import ScheduleConfigError
from .check_types import OWNER_CHECK, CheckAddReport, CheckHistoryRecord, CheckSummary, NewCheck

RunOutcome = Literal[
    "running",
    "success",
    "failure",
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


def check_eventful(eventful: object) -> bool | None:
    """``record_run_end``'s ``eventful``: True, False or None (``ValueError`` otherwise)."""
    if eventful is not None and not isinstance(eventful, bool):
        raise ValueError(f"eventful must be True, False or None, got {eventful!r}")
    return eventful


def check_finite(field_name: str, value: float | None) -> None:
    """``ValueError`` unless ``value`` is ``None`` or a finite number (not a bool):
    the run-end arguments ``progress`` and ``duration_s`` of every backend."""
    if value is not None and (isinstance(value, bool) or not math.isfinite(value)):
        raise ValueError(f"{field_name} must be a finite number, got {value!r}")


def stale_start(schedule: str, token: int, floor: int | None) -> str | None:
    """Why a run start with ``token`` is refused (every store's
    ``record_run_start``): a token not above the schedule's ``current_token``
    (the durable floor); ``None`` when it may start."""
    if floor is not None and token <= floor:
        return (
            f"stale token {token}: schedule {schedule!r} already recorded token "
            f"{floor}; the run was not started"
        )
    return None


def check_run_end(outcome: str, progress: float | None, duration_s: float | None) -> None:
    """Every store's ``record_run_end`` arguments: an end outcome, finite
    ``progress`` and ``duration_s`` (``ValueError`` otherwise)."""
    if outcome not in END_OUTCOMES:
        raise ValueError(f"outcome must be one of {sorted(END_OUTCOMES)}, got {outcome!r}")
    check_finite("progress", progress)
    check_finite("duration_s", duration_s)


def run_duration_s(started_at: datetime, ended_at: datetime, duration_s: float | None) -> float:
    """The stored duration of a run: the worker's monotonic measure when given,
    else ``ended_at - started_at``; never negative."""
    if duration_s is None:
        duration_s = (ended_at - started_at).total_seconds()
    return max(duration_s, 0.0)


def end_fenced(token: int | None, current: int | None) -> bool:
    """Whether a run's end must not touch the schedule's statistics: its token
    is not the schedule's ``current_token`` (a newer run started since)."""
    return token is None or token != current


def fenced_end_error(run_id: str, schedule: str, token: int | None, current: int | None) -> str:
    """The :class:`~celery_dgs.errors.StaleTokenError` message of a fenced end."""
    return (
        f"run {run_id!r} of schedule {schedule!r} holds token {token}, but the "
        f"schedule's current token is {current}: its end was recorded, "
        "its statistics were not"
    )


@dataclass(frozen=True, kw_only=True)
class StoredSchedule:
    """A schedule as stored: its spec, operator flags and statistics.

    ``spec`` is ``None`` when the stored JSON no longer validates (written by
    another version, edited by hand); ``spec_error`` then says why, and readers
    carry on with the other schedules. ``current_token`` is the fencing token of
    the latest run granted (``None``: never ran). ``run_requested_at`` is set
    while an operator's ad-hoc run request waits for beat. ``change_seq`` orders
    every change to the row (see :meth:`ScheduleStore.changes_since`).
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


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One row of the run history.

    ``outcome`` is ``running`` until the run ends. ``fenced`` is true when the
    run's end was recorded but its statistics were refused because a newer run
    had been granted (its token was stale). A skipped dispatch has
    ``started_at == ended_at`` and the reason in ``error``.
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

    @property
    def duration(self) -> timedelta | None:
        return None if self.duration_s is None else timedelta(seconds=self.duration_s)


@dataclass(frozen=True, kw_only=True)
class SyncReport:
    """What :meth:`ScheduleStore.sync` did, as lists of schedule names.

    Each name appears in at most one list; a schedule declared again after being
    deactivated is ``reactivated`` even if its spec changed too. ``invalid``:
    stored, active schedules whose declaration is invalid, kept as stored.
    ``refused``: declared names stored as active runtime schedules, left as
    they are (:func:`owned_by_api` gives the message to show).
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


@dataclass(frozen=True, kw_only=True)
class UpsertReport:
    """What :meth:`ScheduleStore.upsert_runtime` did, as lists of schedule names.

    ``reactivated``: a stored, inactive row (removed, or no longer declared)
    taken by the runtime API. ``unchanged``: an active runtime schedule whose
    spec is the same: nothing was written. ``refused``: active declared
    schedules, left as they are (:func:`owned_by_sync`, the message to show).
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
    """What :meth:`ScheduleStore.remove_runtime` did, as lists of schedule names.

    ``absent``: no such schedule, or a runtime one already removed.
    ``refused``: declared schedules (:func:`owned_by_sync`).
    """

    removed: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def owned_by_sync(name: str) -> str:
    """Why the runtime API refuses to change the declared schedule ``name``."""
    return (
        f"schedule {name!r} is declared in code or dgs_schedules (owner 'declared'): "
        "only `sync` changes or removes it; change its declaration instead"
    )


def owned_by_api(name: str) -> str:
    """Why ``sync`` leaves the runtime schedule ``name`` alone although it is declared."""
    return (
        f"schedule {name!r} is a runtime schedule (owner 'runtime'): `sync` does not "
        f"change it; remove it (`celery dgs remove {name}`) before declaring it in code"
    )


def upsert_action(owner: str | None, active: bool, same_spec: bool) -> str:
    """What :meth:`ScheduleStore.upsert_runtime` does to a stored row of this
    ``owner`` (None: not stored) and ``active`` flag, whose spec equals the new
    one or not: one of the :class:`UpsertReport` list names. Every store
    applies this rule."""
    if owner is None:
        return "inserted"
    if not active:
        return "reactivated"
    if owner != OWNER_RUNTIME:
        return "refused"
    return "unchanged" if same_spec else "updated"


def state_unchanged(
    disabled_reason: str | None, stored_hint: datetime | None, new_hint: datetime | None
) -> bool:
    """Whether an upsert leaves a stored row's adaptive state as it is: the row
    is enabled and no new ``last_modified`` is given (an upsert of a disabled
    row enables it; a new hint is written). With an equal spec, the row is then
    ``unchanged``, else ``updated`` (:func:`upsert_action`)."""
    return disabled_reason is None and (new_hint is None or new_hint == stored_hint)


def remove_action(owner: str | None, active: bool) -> str:
    """What :meth:`ScheduleStore.remove_runtime` does to a stored row of this
    ``owner`` (None: not stored): one of the :class:`RemoveReport` list names."""
    if owner is None:
        return "absent"
    if owner != OWNER_RUNTIME:
        return "refused"
    return "removed" if active else "absent"


def sync_owns(owner: str, active: bool) -> bool:
    """Whether ``sync`` may change a stored row: any declared row, and an
    inactive (removed) runtime row, which a declaration takes over."""
    return owner == OWNER_DECLARED or not active


@dataclass(frozen=True, kw_only=True)
class SyncRowState:
    """What :func:`plan_sync` needs of a stored row."""

    owner: str
    active: bool
    #: Whether the stored spec is the declared one (``None``: not declared).
    same_spec: bool | None
    declaration_error: str | None


def plan_sync(
    declared: Sequence[str], rows: Mapping[str, SyncRowState], invalid: Mapping[str, str]
) -> tuple[SyncReport, list[str]]:
    """What every store's ``sync`` does, decided once: the report, and the
    stored rows whose ``declaration_error`` becomes ``invalid[name]``.

    ``rows``: the stored rows of the ``declared`` names and every active
    declared row (more rows do no harm). A declared name not stored is
    inserted; one ``sync`` may not change (:func:`sync_owns`) is refused; an
    inactive one is reactivated; one whose spec differs, or whose declaration
    was invalid, is updated. An active declared row not declared now stays as
    stored (``invalid``) when its declaration is invalid, else is deactivated.
    """
    report = SyncReport()
    for name in sorted(declared):
        row = rows.get(name)
        if row is None:
            report.inserted.append(name)
        elif not sync_owns(row.owner, row.active):
            report.refused.append(name)
        elif not row.active:
            report.reactivated.append(name)
        elif not row.same_spec or row.declaration_error is not None:
            report.updated.append(name)
        else:
            report.unchanged.append(name)
    names, marked = set(declared), []
    for name in sorted(rows):
        row = rows[name]
        if not row.active or name in names or row.owner != OWNER_DECLARED:
            continue
        if name in invalid:
            report.invalid.append(name)
            if row.declaration_error != invalid[name]:
                marked.append(name)
        else:
            report.deactivated.append(name)
    return report, marked


def declared_by_name(
    specs: Sequence[ScheduleSpec], invalid: Mapping[str, str]
) -> dict[str, ScheduleSpec]:
    """The declared ``specs`` by name, as every store's ``sync`` reads them.

    A name declared twice with identical fields counts once; with different
    fields it raises :class:`~celery_dgs.errors.ScheduleConfigError` naming the
    first field that differs. A name both declared and in ``invalid`` raises
    ``ValueError`` (the caller's declarations disagree with themselves).
    """
    declared: dict[str, ScheduleSpec] = {}
    for spec in specs:
        first = declared.get(spec.name)
        if first is None:
            declared[spec.name] = spec
            continue
        differ = differing_fields(first, spec)
        if differ:
            raise ScheduleConfigError(
                spec.name, differ[0], f"declared twice with different {', '.join(differ)}"
            )
    both = sorted(set(declared) & set(invalid))
    if both:
        raise ValueError(f"declared both valid and invalid: {', '.join(both)}")
    return declared


class ScheduleStore(ABC):
    """Persistent schedules, statistics and run history shared by beat and workers."""

    @abstractmethod
    def upgrade(self) -> None:
        """Bring the schema to the newest version (idempotent, safe to race)."""

    @abstractmethod
    def sync(
        self,
        specs: Sequence[ScheduleSpec],
        now: datetime,
        *,
        invalid: Mapping[str, str] | None = None,
    ) -> SyncReport:
        """Make the stored schedules match the declared ``specs``.

        New names are inserted (``registered_at = now``), changed specs updated,
        stored names not declared deactivated (history kept) and deactivated
        names declared again reactivated. Statistics are never reset.

        ``invalid``: the names of invalid declarations and their errors. A
        stored, active schedule among them is neither updated nor deactivated:
        it keeps its last valid spec (beat keeps serving it) and its
        ``declaration_error`` is set to the error (listed in
        ``SyncReport.invalid``). Being declared validly again, or not at all,
        clears it (``updated`` / ``deactivated``).

        Active runtime schedules (owner runtime) are never changed or
        deactivated: one that is also declared is listed in ``refused``. An
        inactive runtime row that is declared is reactivated as a declared
        one (:func:`sync_owns`).
        """

    @abstractmethod
    def insert_if_missing(self, spec: ScheduleSpec, now: datetime) -> bool:
        """Store ``spec`` if no schedule of that name is stored (active or not),
        as :meth:`sync` would insert it. Never updates, deactivates or
        reactivates: that stays with ``sync``. True if it inserted the row.
        For a worker that runs a declared schedule before beat synced it."""

    @abstractmethod
    def upsert_runtime(
        self,
        specs: Sequence[ScheduleSpec],
        now: datetime,
        *,
        last_modified: Mapping[str, datetime] | None = None,
    ) -> UpsertReport:
        """Store ``specs`` as runtime schedules, all in one transaction.

        Adaptive schedules: ``last_modified`` gives, by name, the source's
        last change as its lister saw it (``upstream_modified_at``; a name
        not in it keeps its stored value); a new value, or a disabled row,
        makes the row ``updated``, and every row written is enabled again
        (``disabled_reason`` cleared).

        Per name (:func:`upsert_action`): a new name is inserted
        (``registered_at = now``, owner runtime); an active runtime schedule
        whose spec differs is updated; one whose spec is the same is left
        untouched (no write, no new ``change_seq``: beat does not re-read it);
        a stored, inactive row (removed, or no longer declared) becomes an
        active runtime schedule again, its statistics and history kept; an
        active declared schedule is refused and left as it is. One new
        ``change_seq`` for every row written. A name given twice with
        different fields raises ScheduleConfigError (nothing written).
        Statistics, ``paused`` and run requests are never touched."""

    def upsert_runtime_texts(
        self,
        specs: Sequence[tuple[ScheduleSpec, str]],
        now: datetime,
        *,
        last_modified: Mapping[str, datetime] | None = None,
    ) -> UpsertReport:
        """:meth:`upsert_runtime` of ``(spec, text)`` pairs whose ``text`` is the
        spec's canonical JSON (``celery_dgs.store.convert.spec_json``), which a
        bulk caller builds faster, once per spec shape
        (:mod:`celery_dgs.entry_shapes`): the SQL store writes and compares
        the texts as given. This default ignores them."""
        return self.upsert_runtime([spec for spec, _ in specs], now, last_modified=last_modified)

    @abstractmethod
    def remove_runtime(self, names: Sequence[str], now: datetime) -> RemoveReport:
        """Deactivate the named runtime schedules, in one transaction (one new
        ``change_seq``): beat stops dispatching them at its next store poll;
        a live run ends as usual; statistics and run history stay. A declared
        schedule is refused, an unknown or already removed name is ``absent``
        (:func:`remove_action`)."""

    @abstractmethod
    def load_active(self) -> tuple[list[StoredSchedule], int]:
        """All active schedules but deferred checks (beat reads those with
        :meth:`due_checks`), and the cursor to pass to :meth:`changes_since`."""

    def iter_active(self) -> tuple[int, Iterator[StoredSchedule]]:
        """:meth:`load_active` as the cursor and an iterator, so a reader of a
        million schedules need not hold them all (the SQL store streams them)."""
        rows, cursor = self.load_active()
        return cursor, iter(rows)

    @abstractmethod
    def changes_since(
        self, cursor: int, *, check_until: datetime | None = None
    ) -> tuple[list[StoredSchedule], int]:
        """Every schedule (active or not) changed after ``cursor``, and the new cursor.

        A change committed concurrently is either returned now or by the next
        call with the returned cursor; none is ever skipped.

        Deferred checks: only those of them that are inactive, or whose next
        check time is, or ever was, at or before ``check_until`` (beat's
        window; ``None``: every check). A pending check never due within the
        window is left for :meth:`due_checks`.
        """

    # -- deferred checks (celery_dgs.core.checks) ----------------------------------
    @abstractmethod
    def add_checks(
        self, checks: Sequence[NewCheck], now: datetime, *, on_exists: str = ON_EXISTS_KEEP
    ) -> CheckAddReport:
        """Store ``checks`` in one transaction (one new ``change_seq``). A new
        name, or one whose check ended, becomes a pending check (``first_check_at
        = next check = at``, no checks run, ``registered_at = now``, owner
        :data:`OWNER_CHECK`). A pending one is kept as it is (``on_exists="keep"``)
        or moved to ``at`` with the new spec (``"move"``; its first check time and
        counts kept). A name stored as a schedule of another kind raises
        ScheduleConfigError (nothing written), as does a name given twice."""

    @abstractmethod
    def cancel_checks(self, names: Sequence[str], now: datetime) -> list[str]:
        """End the named pending checks as ``cancelled`` (history written, rows
        made inactive), in one transaction; returns the names it cancelled (an
        unknown or ended check is skipped). A live run is not stopped: its end
        is recorded, and its verdict ignored."""

    @abstractmethod
    def due_checks(
        self, after: tuple[datetime, str] | None, until: datetime, limit: int
    ) -> list[StoredSchedule]:
        """At most ``limit`` pending checks whose (next check time, name) is above
        ``after`` (``None``: from the first) and whose time is at or before
        ``until``, in that order: beat's window."""

    @abstractmethod
    def pending_checks(
        self, *, task: str | None = None, due_before: datetime | None = None, limit: int = 50
    ) -> list[StoredSchedule]:
        """Pending checks (of ``task``; due before ``due_before``), earliest first."""

    @abstractmethod
    def check_summary(self, now: datetime) -> CheckSummary:
        """Pending checks per task, the overdue ones (due before ``now``), the earliest."""

    @abstractmethod
    def check_history(
        self, *, name: str | None = None, task: str | None = None, limit: int = 50
    ) -> list[CheckHistoryRecord]:
        """Ended checks (the named one; ``task``'s), the latest end first."""

    @abstractmethod
    def get(self, name: str) -> StoredSchedule:
        """The named schedule; :class:`~celery_dgs.errors.UnknownScheduleError` if none."""

    @abstractmethod
    def list_schedules(
        self, include_inactive: bool = False, *, owner: str | None = None
    ) -> list[StoredSchedule]:
        """Schedules ordered by name, deferred checks not included (there may be
        millions: :meth:`pending_checks`); only active ones unless
        ``include_inactive``; only those of ``owner`` (:data:`OWNERS`) when given."""

    @abstractmethod
    def set_paused(self, name: str, paused: bool) -> bool:
        """Pause or resume a schedule; True if the flag changed. Resuming also
        enables a disabled adaptive schedule (``disabled_reason`` cleared; True)."""

    @abstractmethod
    def request_run(self, name: str, now: datetime, *, priority: int | None = None) -> None:
        """Ask beat to run the schedule as soon as it can (an operator's ad-hoc run),
        served in class ``priority`` (``None``: 0, ahead of all scheduled work).

        A request already pending keeps its earlier time; its class becomes
        ``priority``.
        """

    @abstractmethod
    def clear_run_request(self, name: str, *, requested_at: datetime | None = None) -> None:
        """Consume the run request (beat, once it dispatched the run).

        With ``requested_at``, only a request made at that time is cleared, so a
        request made after beat read the schedule is not lost.
        """

    @abstractmethod
    def record_run_start(
        self,
        *,
        schedule: str,
        run_id: str,
        dispatch_id: str | None,
        owner_node: str,
        owner_name: str,
        owner_tag: str,
        token: int,
        started_at: datetime,
    ) -> None:
        """In one transaction: add the run (``running``), set ``last_start_at`` and
        make ``token`` the schedule's ``current_token``. A token not above the
        current one is refused: the run is stored as a fenced skip, then
        :class:`~celery_dgs.errors.StaleTokenError` is raised."""

    @abstractmethod
    def record_run_end(
        self,
        *,
        run_id: str,
        outcome: str,
        ended_at: datetime,
        error: str | None = None,
        progress: float | None = None,
        alpha: float = DEFAULT_EWMA_ALPHA,
        duration_s: float | None = None,
        eventful: bool | None = None,
        verdict: object = None,
    ) -> StoredSchedule:
        """In one transaction: record the run's outcome and update the statistics.

        An adaptive schedule's ladder moves in the same transaction
        (:func:`stats_after` with ``eventful``, the run's token as fudge key)
        and it is disabled or enabled (:func:`disabled_after`). A deferred
        check's ``verdict`` (its task's return value) moves it or ends it
        (:func:`celery_dgs.core.checks.check_end`; an ended check gets its
        history record, its row made inactive).

        ``duration_s``: measured by the worker on its monotonic clock (wall-clock
        steps must not enter the statistics); ``None``: ``ended_at - started_at``.

        Raises :class:`~celery_dgs.errors.StaleTokenError` (after committing the
        run record) when the run's token is no longer the schedule's current one.
        """

    @abstractmethod
    def record_skip(
        self,
        *,
        schedule: str,
        run_id: str,
        dispatch_id: str | None,
        owner_node: str,
        owner_name: str,
        reason: str,
        at: datetime,
    ) -> None:
        """Record a dispatch that did not run (outcome ``skipped``); stats untouched."""

    def token_floor(self, schedule: str) -> int:
        """The highest fencing token recorded for ``schedule`` (0: none yet); a
        new lease must get a larger one (the durable floor)."""
        return self.get(schedule).current_token or 0

    @abstractmethod
    def runs(self, name: str, limit: int = 50) -> list[RunRecord]:
        """The schedule's latest runs, newest first."""

    @abstractmethod
    def running_runs(self) -> list[RunRecord]:
        """Every run still marked ``running``, oldest first."""

    @abstractmethod
    def running_runs_page(self, *, after_id: int, limit: int) -> list[RunRecord]:
        """At most ``limit`` runs still marked ``running`` whose row ``id`` is above
        ``after_id``, in ``id`` order (beat's reaper pages through them)."""

    @abstractmethod
    def outcome_counts(self) -> dict[str, int]:
        """How many stored runs ended (or are) in each outcome (beat's metrics)."""

    @abstractmethod
    def prune_runs(self, older_than: datetime, batch_size: int = 1000) -> int:
        """Delete finished runs that ended before ``older_than``; the number deleted."""

    @abstractmethod
    def prune_checks(self, older_than: datetime, batch_size: int = 1000) -> int:
        """Delete the history of checks that ended before ``older_than`` and their
        inactive rows that no run refers to any more; the number of history
        records deleted."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
