"""Beat's loading and refreshing: stored rows into the state and the index.

:meth:`ScheduleLoader.load` reads every active schedule at start-up;
:meth:`ScheduleLoader.refresh` applies the rows changed since the cursor (the
change poll); :meth:`ScheduleLoader.read_windows` the next deferred
checks. Each row goes through :meth:`ScheduleLoader.apply_row`.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from datetime import datetime

from ..core.clock import Clock
from ..core.late_order import expected_seconds
from ..core.placement import Constraints
from ..core.window_buckets import WindowEnds
from ..core.window_part import SliceRead
from ..settings import DgsSettings
from ..store.base import ScheduleStore
from ..store.kept import kept_past_blackout
from ..store.records import StoredSchedule
from .check_window import CheckWindow
from .poll_changes import PollChanges
from .ranking import BeatRanking, IndexBatch
from .schedule_window import ScheduleWindow
from .state import BeatState
from .types import tracked_of

logger = logging.getLogger("celery_dgs.beat")

#: Beat holding every active schedule (no window) logs a warning once it
#: loaded this many: their load, memory and a new leader's start grow with
#: the fleet (about 63 s and 2 GiB at a million), a window's do not.
WINDOW_ADVICE_ROWS = 250_000


class ScheduleLoader:
    #: A load of this many schedules or more ends with ``gc.freeze()`` (see :meth:`load`).
    gc_freeze_rows = 100_000
    #: Seconds a tick reads the eligible part on past its first such read
    #: (:meth:`read_eligible`): a backlog read in one go (a blackout's start
    #: moving many rows) would keep beat from renewing its leadership and
    #: from dispatching; the next tick goes on at once.
    eligible_reads_per_tick_s = 1.0

    def __init__(
        self,
        state: BeatState,
        ranking: BeatRanking,
        window: CheckWindow,
        store: ScheduleStore,
        settings: DgsSettings,
        clock: Clock,
        monotonic: Callable[[], float],
        schedules: ScheduleWindow | None = None,
    ) -> None:
        self.state, self.ranking, self.window, self.store = state, ranking, window, store
        self.settings, self.clock, self.monotonic = settings, clock, monotonic
        #: Beat's window of schedules; ``None``: every active schedule is held.
        self.schedules = schedules
        #: When the store was last read for changes (``monotonic``).
        self.last_poll = float("-inf")
        #: Until when this tick may read the eligible part on (``None``: it
        #: has not yet); whether it stopped reading for that.
        self._eligible_until: float | None = None
        self.eligible_cut = False
        #: Whether the eligible part passed over a schedule no live worker
        #: could run (read again once the live workers change).
        self._passed_over_unserved = False

    def load(self) -> int:
        """Load every active schedule (with a window of schedules: the first
        slice, :meth:`read_windows`); returns how many rows were read.

        Rows are streamed from the store (``iter_active``) and their start times
        computed at one ``now`` with one retry ladder and one
        :class:`~celery_dgs.core.cron_cache.CronFireCache`; the index is built
        once at the end (``upsert_many``: one heapify instead of a push per row).
        The cyclic GC is paused meanwhile: the load allocates millions of
        objects and almost no cycles, and each collection would walk all of them.
        After a load of ``gc_freeze_rows`` schedules or more, everything alive is
        moved to the GC's permanent generation (``gc.freeze()``), so no later
        collection walks it (its objects are still freed when unreferenced).
        """
        started = self.monotonic()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            batch = IndexBatch(self.clock.now(), self.settings.retry_ladder)
            if self.schedules is not None:
                # The cursor before the slice: a change after it comes with the poll.
                self.state.cursor = self.store.change_cursor()
                count = self._read_schedule_window(batch)
            else:
                self.state.cursor, rows = self.store.iter_active()
                apply, note = self.apply_row_safely, self.ranking.note_demand
                count = 0
                for row in rows:
                    count += 1
                    apply(row, batch)
                    note(row.name)
            self.ranking.index.upsert_many(batch.entries)
            if count >= self.gc_freeze_rows:
                # Move what was loaded out of the cyclic GC's reach: each of its
                # generations would otherwise walk all of it once more, a pause of
                # seconds in a later tick (a change poll) at a million schedules.
                gc.freeze()
        finally:
            if gc_was_enabled:
                gc.enable()
        self.last_poll = self.monotonic()
        self.state.refresh_after_read = True
        if self.schedules is None and count >= WINDOW_ADVICE_ROWS:
            logger.warning(
                "celery-dgs beat: holding all %d active schedules (loaded in %.1f s): the "
                "load, beat's memory and a new leader's start grow with the fleet; "
                "dgs_schedule_window_size (e.g. 50000) holds only those that can start "
                "within dgs_schedule_window, whatever the fleet's size (docs/configuration.md)",
                count,
                self.last_poll - started,
            )
        return count

    def refresh(self) -> int:
        """Apply store changes since the cursor (deferred checks: those ever due
        within the window); returns how many rows changed. A poll that read
        any row logs one line with the counts (:class:`PollChanges`): INFO,
        or DEBUG when only run statistics changed."""
        state = self.state
        rows, state.cursor = self.store.changes_since(state.cursor, check_until=self.window.until())
        changes = PollChanges()
        for row in rows:
            changes.note(
                row,
                known=row.name in state.tracked or row.name in state.unschedulable,
                before=state.tracked.get(row.name),
                held=row.name in state.held,
            )
            self.apply_row_safely(row)
            self.ranking.note_demand(row.name)
        self.last_poll = self.monotonic()
        if rows:
            level = logging.INFO if changes.worth_telling else logging.DEBUG
            text = "celery-dgs beat: store changes: %s (cursor %d)"
            logger.log(level, text, changes, state.cursor)
        return len(rows)

    def read_windows(self) -> int:
        """Apply the next pending checks (:meth:`CheckWindow.next_rows`) and the
        next slice of schedules (:meth:`ScheduleWindow.next_read`) if the
        windows need them; returns how many rows were read."""
        rows = self.window.next_rows()
        for row in rows:
            self.apply_row_safely(row)
        return len(rows) + self._read_schedule_window()

    def read_further(self, bucket: int | None = None) -> bool:
        """The certainty rule refused a pick on ``bucket``'s bound (``None``:
        the should-order slice's): apply the next slice if the window is
        full (the schedules past it may go first). Whether
        the window read on: rows, or the end of a margin bucket's slice
        (which moves its bound)."""
        window = self.schedules
        if window is None:
            return False
        return window.bounds.read_further(
            bucket, lambda read: self._read_schedule_window(more=True, bucket=read)
        )

    def window_wake(self) -> float | None:
        """When a schedule past the window of schedules next becomes eligible
        (epoch seconds; ``None``: none known, or beat holds every one)."""
        return None if self.schedules is None else self.schedules.wake_at()

    def window_ends(self) -> WindowEnds | None:
        """While the window of schedules is full and may read on for the
        certainty rule, what its ends say of every eligible schedule it does
        not hold (epoch seconds); ``None``: the picks are not checked
        (:meth:`ScheduleBounds.reads_on
        <celery_dgs.core.window.ScheduleBounds.reads_on>`)."""
        return None if self.schedules is None else self.schedules.ends()

    def reading_on_helps(self, refused: str, now: float) -> bool:
        """:meth:`ScheduleWindow.read_on_helps` (the rule refused ``refused``)."""
        return self.schedules is None or self.schedules.read_on_helps(refused, now)

    def _read_schedule_window(
        self, batch: IndexBatch | None = None, *, more: bool = False, bucket: int | None = None
    ) -> int:
        """Apply the window's next slice of schedules, if it needs one, and let
        go of the held schedules the window no longer covers."""
        window = self.schedules
        if window is None:
            return 0
        read = window.next_read(more=more, bucket=bucket)
        return 0 if read is None else self._apply_read(window, *read, batch)

    def refresh_eligible(self, now: datetime) -> int:
        """Bring the window's eligible part up to the round's ``now``
        (:meth:`ScheduleBounds.refresh_read
        <celery_dgs.core.window.ScheduleBounds.refresh_read>`): the schedules
        in its range that became eligible since are applied; how many."""
        window = self.schedules
        read = None if window is None else window.refresh_read(now)
        return 0 if window is None or read is None else self._apply_read(window, *read)

    def begin_tick(self) -> None:
        """A tick begins: its eligible reads may go on for
        :attr:`eligible_reads_per_tick_s` past its first."""
        self._eligible_until, self.eligible_cut = None, False

    def read_eligible(self, now: datetime) -> bool:
        """A round at ``now`` has free slots and no eligible schedule held:
        read the window's eligible part on (:meth:`ScheduleBounds.read_eligible
        <celery_dgs.core.window.ScheduleBounds.read_eligible>`). Whether it
        read a schedule; ``False`` without reading once the tick has read for
        :attr:`eligible_reads_per_tick_s` (:attr:`eligible_cut`: the part is
        left where it is, consistent, and the next tick reads on)."""
        window = self.schedules
        if window is None:
            return False
        mono = self.monotonic()
        if self._eligible_until is None:
            self._eligible_until = mono + self.eligible_reads_per_tick_s
        elif mono >= self._eligible_until:
            self.eligible_cut = True
            return False
        return window.bounds.read_eligible(
            now,
            lambda: len(window.held),
            lambda read: self._apply_read(window, read, window.read(read)),
        )

    @property
    def passed_over_unserved(self) -> bool:
        """Whether the eligible part passed over schedules no live worker
        could run (read again once the live workers change)."""
        return self._passed_over_unserved

    def live_workers_changed(self) -> None:
        """What the live workers may run changed: if the window's eligible
        part passed over schedules because no live worker could run them, it
        starts again, so they are read again."""
        window = self.schedules
        if window is not None and self._passed_over_unserved:
            window.bounds.part.clear()
            self._passed_over_unserved = False

    def _apply_read(
        self,
        window: ScheduleWindow,
        sliced: SliceRead,
        rows: list[StoredSchedule],
        batch: IndexBatch | None = None,
    ) -> int:
        """Apply the rows of one read of the window, and let go of the held
        schedules it moved past; how many rows it returned."""
        fresh = window.fresh(sliced, rows)
        try:
            if sliced.eligible:
                fresh = self._startable(window, fresh, sliced.can_until)
        finally:  # if the store failed, every row is held as read: none lost
            for row in fresh:
                self.apply_row_safely(row, batch)
                self.ranking.note_demand(row.name)
        self._say_short_horizon(window, rows)
        outside = window.outside() if sliced.may_let_go(len(rows)) else []
        for name in outside:
            window.forget(name)
            self.ranking.note_demand(name)
        window.learn_arrival()
        self._say_when_full(window)
        if rows or outside:
            logger.debug(
                "celery-dgs beat: schedule window: read %d, let go of %d, holding %d",
                len(rows),
                len(outside),
                len(window.held),
            )
        return len(rows)

    def _startable(
        self, window: ScheduleWindow, rows: list[StoredSchedule], now: datetime
    ) -> list[StoredSchedule]:
        """Of the rows an eligible read brought in, the ones to apply; lets go
        of those that may not start though their kept next start has come, so
        the part holds only schedules that may start now:

        - paused or disabled ones (not dispatched whatever their times): a
          resume changes the row, and the poll brings it back;
        - those no live worker may run (their pool, task or nodes), as of
          the last round: when the live workers change, the part is read
          again (:meth:`live_workers_changed`);
        - those a blackout begun since they were written keeps from
          starting: the store keeps their start times as of ``now``, past the
          blackout (:meth:`ScheduleStore.window_keep_past_blackout
          <celery_dgs.store.base.ScheduleStore.window_keep_past_blackout>`),
          and the part's refresh reads them again when it ends."""
        parked, ladder = self.state.parked, self.settings.retry_ladder
        serves = self.state.serves
        startable: list[StoredSchedule] = []
        moved: list[StoredSchedule] = []
        for row in rows:
            if row.name in parked or not row.active or row.spec is None:
                startable.append(row)
            elif row.paused or row.disabled_reason is not None:
                window.drop(row)
            elif serves is not None and not serves(Constraints.of(row.spec)):
                window.drop(row)
                self._passed_over_unserved = True
            elif row.spec.blackout_periods and (later := kept_past_blackout(row, now, ladder)):
                moved.append(later)
            else:
                startable.append(row)
        if moved:
            written = self.store.window_keep_past_blackout(moved)
            for row in moved:  # one whose write found it changed comes with the poll
                window.drop(row)
            logger.debug(
                "celery-dgs beat: schedule window: kept %d of %d eligible schedules in a "
                "blackout past it",
                written,
                len(moved),
            )
        return startable

    def _say_short_horizon(self, window: ScheduleWindow, rows: list[StoredSchedule]) -> None:
        """Log once if the look-ahead is on and a schedule read runs longer than
        the window's horizon: the look-ahead weighs a long run against the
        runs due during it, which beat then does not all hold."""
        if window.said_short_horizon or not self.settings.lookahead:
            return
        horizon_s = window.bounds.horizon.total_seconds()
        tracked = self.state.tracked
        longest = max((expected_seconds(tracked.get(r.name)) for r in rows), default=0.0)
        if longest > horizon_s:
            window.said_short_horizon = True
            logger.warning(
                "celery-dgs beat: a schedule runs %.0f s, longer than dgs_schedule_window "
                "(%.0f s): the look-ahead sees only the runs due within the window; set it "
                "to the longest expected run or more",
                longest,
                horizon_s,
            )

    def _say_when_full(self, window: ScheduleWindow) -> None:
        """Log once each time the window fills up, and when it has room again:
        a full window holds the most urgent by deadline. The deadline order
        (``dgs_overload_policy = "greedy"``, no look-ahead) is then the whole
        fleet's; the default order's picks are while the certainty rule may
        read on; the look-ahead sees only the held schedules."""
        full = window.bounds.full
        if full == window.said_full:
            return
        window.said_full = full
        if not full:
            logger.info("celery-dgs beat: the schedule window holds every schedule due within it")
            return
        policy = self.settings.order_policy
        exact = policy.overload == "greedy" and not policy.lookahead
        read_on = policy.window_read_on
        reads_on = (
            "as far as it needs"
            if read_on is None
            else f"up to {(1 + read_on) * window.bounds.size:.0f} schedules"
        )
        checked = (
            "; beat's order chooses among those held, and the look-ahead sees only them"
            if read_on == 0
            else (
                f"; the order's picks are checked against the fleet's and the window reads "
                f"on {reads_on}, past which beat chooses among those held; the look-ahead "
                "sees only the held ones"
            )
        )
        logger.log(
            logging.INFO if exact else logging.WARNING,
            "celery-dgs beat: the schedule window is full: it holds the %d most urgent "
            "schedules by deadline%s",
            window.bounds.size,
            ""
            if exact
            else (
                checked + " (a dgs_schedule_window_size above the schedules that can start "
                "within dgs_schedule_window keeps them the whole fleet's; "
                "dgs_schedule_window_read_on = None checks every pick)"
            ),
        )

    def apply_row_safely(self, row: StoredSchedule, batch: IndexBatch | None = None) -> None:
        """:meth:`apply_row`; a row it cannot apply is logged and held (the cursor
        has moved past it: raising would skip the rest of the batch for good)."""
        try:
            self.apply_row(row, batch)
        except Exception:
            logger.exception(
                "celery-dgs: schedule %r: cannot apply its stored row; held until the row changes",
                row.name,
            )
            self.ranking.hold(row.name)

    def apply_row(self, row: StoredSchedule, batch: IndexBatch | None = None) -> None:
        """Track, hold, index or forget ``row``'s schedule as its row says (with
        a ``batch``: indexed at the batch's ``now`` when the batch ends)."""
        name, spec, state = row.name, row.spec, self.state
        is_check, schedules = row.kind == "check", self.schedules
        if is_check and row.active and not self.window.holds(row):
            self.window.drop(row)
            return
        if schedules is not None and not is_check:
            if row.active and not schedules.holds(row):
                schedules.drop(row)
                return
            schedules.note(row)
        if spec is None or not row.active:
            self._untrack(row)
            return
        if state.unschedulable:
            state.unschedulable.pop(name, None)
        if state.unserved:  # placed again by its new row
            state.unserved.discard(name)
        if is_check:
            state.checks.add(name)
        state.leaving.discard(name)
        state.tracked[name] = tracked_of(row, spec)
        if row.paused or row.disabled_reason is not None:  # disabled: an adaptive one
            self.ranking.unindex(name)
            state.held.add(name)
            return
        if state.held:
            state.held.discard(name)
        if name not in state.parked:
            self.ranking.reindex(name, batch)

    def _untrack(self, row: StoredSchedule) -> None:
        """An inactive row, or an active one whose spec is invalid (unschedulable)."""
        name, state = row.name, self.state
        state.checks.discard(name)
        if row.active:
            logger.error("celery-dgs: schedule %r is not schedulable: %s", name, row.spec_error)
            state.unschedulable[name] = row.spec_error or "invalid stored spec"
        else:
            state.unschedulable.pop(name, None)
        self.ranking.forget(name)
