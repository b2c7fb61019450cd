"""Beat's window of deferred checks: the pending checks due soonest.

Beat holds the pending checks whose check time is at or before the window's
end (and those asked to run), at most ``check_window_size`` of them, and
reads the next ones from the store as time passes. The change poll brings
only the checks ever due within the window; a pending check that moved past
it is forgotten until a window read brings it back.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ..core.clock import Clock
from ..settings import DgsSettings
from ..store.base import ScheduleStore
from ..store.records import StoredSchedule
from .ranking import BeatRanking
from .state import BeatState
from .types import tracked_of

#: The change poll's check window before any check was read: none is held.
NO_CHECK_YET = datetime(1970, 1, 1, tzinfo=timezone.utc)


class CheckWindow:
    def __init__(
        self,
        state: BeatState,
        ranking: BeatRanking,
        store: ScheduleStore,
        settings: DgsSettings,
        clock: Clock,
    ) -> None:
        self.state, self.ranking, self.store = state, ranking, store
        self.settings, self.clock = settings, clock
        #: The window's end, as (check time, name): every pending check at or
        #: before it is held (name ``None``: every one at or before the time).
        #: ``None``: no check read yet.
        self.end: tuple[datetime, str | None] | None = None
        #: Whether the last window read stopped at ``check_window_size``.
        self.full = False

    def until(self) -> datetime:
        """The change poll's ``check_until``: the window's end time."""
        return NO_CHECK_YET if self.end is None else self.end[0]

    def holds(self, row: StoredSchedule) -> bool:
        """Whether the pending check ``row`` is due by the window's end (or asked to run)."""
        at = row.stats.next_target_at
        if row.run_requested_at is not None or at is None:
            return True
        return self.end is not None and at <= self.end[0]

    def drop(self, row: StoredSchedule) -> None:
        """Forget a pending check that moved past the window; the window read
        brings it back when it is due (:func:`let_go`)."""
        self.state.checks.discard(row.name)
        let_go(self.state, self.ranking, row.name, row)

    def next_rows(self) -> list[StoredSchedule]:
        """The next pending checks from the store if the window needs them:
        when its end is less than half of ``check_window`` ahead, or (after a
        read that stopped at ``check_window_size``) when fewer than half that
        many are held. Reads up to ``now + check_window``, earliest first, at
        most enough to hold ``check_window_size``, and moves the window's end."""
        settings = self.settings
        size, ahead = settings.check_window_size, timedelta(seconds=settings.check_window)
        now = self.clock.now()
        end = self.end
        held = len(self.state.checks)
        if self.full:
            if held > size // 2:
                return []
        elif end is not None and end[0] >= now + ahead / 2:
            return []
        limit = size - held
        if limit <= 0:
            return []
        until = now + ahead
        after = None if end is None else (end[0], end[1] or "")
        rows = self.store.due_checks(after, until, limit)
        if len(rows) >= limit:
            last = rows[-1]
            assert last.stats.next_target_at is not None
            self.end = (last.stats.next_target_at, last.name)
            self.full = True
        else:
            self.end = (max(until, end[0]) if end is not None else until, None)
            self.full = False
        return rows


def let_go(
    state: BeatState, ranking: BeatRanking, name: str, row: StoredSchedule | None = None
) -> None:
    """Forget ``name``, which left beat's window (a check's or a schedule's;
    ``row``: its new row, if one moved it out). A parked one (running or
    dispatched) keeps its new row until it is freed, and is forgotten then
    (``state.leaving``)."""
    if name in state.parked:
        if row is not None and row.spec is not None:
            state.tracked[name] = tracked_of(row, row.spec)
        state.leaving.add(name)
        return
    ranking.forget(name)
    state.unschedulable.pop(name, None)
