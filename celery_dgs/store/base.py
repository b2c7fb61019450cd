"""The schedule store interface and the values it returns.

Beat, the worker hooks and the CLI depend only on :class:`ScheduleStore`;
:class:`~celery_dgs.store.sql.SqlScheduleStore` is the SQLAlchemy implementation,
:class:`~celery_dgs.store.memory.MemoryScheduleStore` the in-memory reference
backend (tests, benchmarks). ``tests/store`` runs one contract suite on both.
Every datetime in and out is an aware UTC datetime.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from itertools import islice

from ..core.checks import ON_EXISTS_KEEP
from ..core.items import ItemCounts
from ..core.kept_condition import KeptTimes
from ..core.spec import ScheduleSpec
from ..core.stats import DEFAULT_EWMA_ALPHA
from .check_types import CheckAddReport, CheckHistoryRecord, CheckSummary, NewCheck
from .kept_ladder import LadderAdoption
from .records import RemoveReport, RunRecord, StoredSchedule, SyncReport, UpsertReport
from .selection import Selection
from .window_reads import WindowReads


class ScheduleStore(WindowReads, ABC):
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
        dry_run: bool = False,
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
        one (:func:`~celery_dgs.store.ownership.sync_owns`).

        ``dry_run``: the report of what the sync would do, nothing written.
        """

    @abstractmethod
    def adopt_retry_ladder(self, ladder: tuple[timedelta, ...]) -> LadderAdoption:
        """Keep the start times with ``ladder`` (``dgs_retry_backoff`` and
        ``dgs_retry_duration_fraction``, a
        :class:`~celery_dgs.core.timing.RetryLadder`) from now on: it becomes
        the store's ``retry_ladder``, and when the store's kept columns were
        written with another one (or with one it did not record), the kept
        columns of every active row with failures (``failure_count > 0``,
        deferred checks included) are recomputed with it, each at its
        ``updated_at``, with a new ``change_seq`` (beat's poll re-reads them);
        then the store records the ladder
        (:func:`~celery_dgs.store.kept_ladder.ladder_fingerprint`). Called by
        beat at start, after its sync; a second call with the same ladder
        writes nothing (``rewritten`` ``None``)."""

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

        Per name (:func:`~celery_dgs.store.ownership.upsert_action`): a new name is inserted
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
        (:func:`~celery_dgs.store.ownership.remove_action`)."""

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
    def change_cursor(self) -> int:
        """The store's change cursor now: :meth:`changes_since` with it returns
        the changes made after this call."""

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
        :data:`~celery_dgs.store.check_types.OWNER_CHECK`). A pending one is kept
        as it is (``on_exists="keep"``) or moved to ``at`` with the new spec
        (``"move"``; its first check time and counts kept). A name stored as a
        schedule of another kind raises ScheduleConfigError (nothing written), as
        does a name given twice."""

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
        self,
        include_inactive: bool = False,
        *,
        owner: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[StoredSchedule]:
        """Schedules ordered by name, deferred checks not included (there may be
        millions: :meth:`pending_checks`); only active ones unless
        ``include_inactive``; only those of ``owner``
        (:data:`~celery_dgs.store.records.OWNERS`) when given; a page: the
        names after ``after``, at most ``limit`` of them."""

    @abstractmethod
    def names_near(self, name: str, limit: int) -> list[str]:
        """At most ``limit`` stored names (any kind, active or not) on each side
        of ``name`` in name order: the candidates for a misspelt name, read
        along the name's index whatever the fleet's size."""

    # -- status reads (kept columns: celery_dgs.core.kept_condition) ----------------
    @abstractmethod
    def condition_counts(self, now: datetime, selection: Selection) -> dict[tuple[str, str], int]:
        """How many schedules of ``selection`` are in each ``(level name,
        reason)`` at ``now``, from the kept columns: the whole fleet (or its
        conditions) from the kept counts, whatever its size; a selection by
        name, pool or task from its rows."""

    @abstractmethod
    def fold_condition_tally(self, now: datetime) -> int:
        """Fold the steps the schedules' changes left since the last fold into
        the kept counts by condition, as of ``now``; the step rows folded
        (:mod:`celery_dgs.store.condition_tally`; a store without one: 0).
        Beat's leader calls it every few seconds; the counts are exact
        without it, it keeps their read short."""

    @abstractmethod
    def count_selected(self, now: datetime, selection: Selection, at_most: int) -> int:
        """How many schedules of ``selection`` there are at ``now``, counted no
        further than ``at_most`` (so ``min(count, at_most)``): what
        :meth:`status_rows` would give, for a cost of at most ``at_most``
        index entries per condition's part, whatever the fleet's size."""

    @abstractmethod
    def status_rows(
        self, now: datetime, selection: Selection, *, limit: int | None = None, offset: int = 0
    ) -> Iterator[StoredSchedule]:
        """The schedules of ``selection``, most urgent first at ``now`` by their
        kept columns (ERROR by ``error_at``, then WARNING and OK by
        ``should_start_by``; rows without that time first in their level; then
        by name), from ``offset``, at most ``limit`` (``None``: every one,
        streamed)."""

    @abstractmethod
    def time_to_error_counts(self, now: datetime, bounds: Sequence[timedelta]) -> list[int]:
        """How many active schedules (deferred checks excluded) are in ERROR at
        ``now``, then how many reach ERROR (kept ``error_at``) before ``now +
        bounds[0]``, before each next bound, and after the last: a list of
        ``len(bounds) + 2`` counts. ``bounds`` ascend. Schedules with no
        ``error_at`` and not in ERROR are not counted. One grouped query."""

    @abstractmethod
    def failing_schedules(self, limit: int) -> list[StoredSchedule]:
        """At most ``limit`` active schedules whose last runs failed
        (``failure_count > 0``), the latest ``last_end_at`` first."""

    @abstractmethod
    def kept_times(self, name: str) -> KeptTimes:
        """The named schedule's kept start times and condition;
        :class:`~celery_dgs.errors.UnknownScheduleError` if none."""

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
        items: ItemCounts | None = None,
    ) -> StoredSchedule:
        """In one transaction: record the run's outcome and update the statistics.

        An adaptive schedule's ladder moves in the same transaction
        (:func:`~celery_dgs.core.run_end.stats_after` with ``eventful``, the run's
        token as fudge key) and it is disabled or enabled
        (:func:`~celery_dgs.core.run_end.disabled_after`). A deferred
        check's ``verdict`` (its task's return value) moves it or ends it
        (:func:`celery_dgs.core.checks.check_end`; an ended check gets its
        history record, its row made inactive).

        ``duration_s``: measured by the worker on its monotonic clock (wall-clock
        steps must not enter the statistics); ``None``: ``ended_at - started_at``.

        ``items``: the item counts the run reported (kept on the run record;
        on the schedule too after a good run or a ``partial_failure``, see
        :func:`~celery_dgs.core.run_end.stats_after`); ``ValueError`` for
        counts that are not whole numbers >= 0.

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
    def store_id(self) -> str:
        """This store's identity: a random id kept in the store, the same for
        every process that opens it (another store: another project); written
        by the first process that asks."""

    @abstractmethod
    def stored_store_id(self) -> str | None:
        """:meth:`store_id` if one was written, without writing one."""

    @abstractmethod
    def declarations_owner(self) -> str | None:
        """The project (key prefix) :meth:`claim_declarations` recorded;
        ``None``: none yet."""

    @abstractmethod
    def claim_declarations(self, owner: str, *, take_over: bool = False) -> str | None:
        """Before a :meth:`sync`: record ``owner`` (the project's key prefix)
        as the one whose declarations the store holds, unless another is
        recorded (then returned, nothing written: a sync would deactivate
        that project's schedules); ``take_over``: record it whatever is."""

    def granted_tokens(
        self, limit: int, *, started_before: datetime | None = None
    ) -> dict[str, int]:
        """Up to ``limit`` schedules that were granted a lease (one started
        before ``started_before``, if given), with the token recorded (a
        sample to compare with Redis's counters; the SQL store's are those
        of the latest runs)."""
        granted = (
            (s.name, s.current_token)
            for s in self.list_schedules(include_inactive=True)
            if s.current_token
            and (
                started_before is None
                or any(r.started_at < started_before for r in self.runs(s.name, limit=50))
            )
        )
        return dict(islice(granted, limit))

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

    def close(self) -> None:
        """Release connections."""
