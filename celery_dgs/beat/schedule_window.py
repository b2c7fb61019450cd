"""Beat's window of schedules: the stored schedules it holds (with
``dgs_schedule_window_size``; without it, every active one).

The bounds and the reads are :class:`~celery_dgs.core.window.ScheduleBounds`',
what is held :class:`~celery_dgs.core.window.HeldSchedules`'. This part reads
the slices from the store, answers whether a changed row is in the window,
and lets go of the held schedules the window left behind; the loader
applies the rows (:meth:`ScheduleLoader.read_windows
<celery_dgs.beat.loading.ScheduleLoader.read_windows>`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..core.clock import Clock
from ..core.pace import WindowFigures
from ..core.window import (
    HeldSchedules,
    ScheduleBounds,
    keys_of,
    unheld,
)
from ..core.window_buckets import WindowEnds
from ..core.window_certainty import read_on_helps
from ..core.window_part import SliceRead, WindowKey
from ..settings import DgsSettings
from ..store.base import ScheduleStore
from ..store.records import StoredSchedule
from .check_window import let_go
from .ranking import BeatRanking
from .state import BeatState


class ScheduleWindow:
    def __init__(
        self,
        state: BeatState,
        ranking: BeatRanking,
        store: ScheduleStore,
        clock: Clock,
        *,
        size: int,
        horizon_s: float,
        read_on: float | None,
    ) -> None:
        self.state, self.ranking, self.store, self.clock = state, ranking, store, clock
        self.bounds = ScheduleBounds(size, timedelta(seconds=horizon_s), read_on)
        #: The schedules held, with the kept times of their last row applied.
        self.held = HeldSchedules(self.bounds)
        #: Whether the log last said the window is full; whether it said that
        #: a schedule runs longer than the horizon.
        self.said_full = self.said_short_horizon = False

    def _should_at(self, until: datetime, end: WindowKey, offset: int) -> datetime | None:
        return self.store.window_should_at(can_until=until, key_after=end, offset=offset)

    def read_on_helps(self, name: str, now: float) -> bool:
        """Whether reading on (as far as the window may) could let the
        certainty rule vouch for ``name``, which it refused at ``now``; if
        not, the picks go unchecked until the window's end moves."""
        reach = self.bounds.reach_ends(len(self.held), self._should_at, _seconds)
        return read_on_helps(
            self.bounds, self.ranking.pick_bound, name, self.ranking.index.times(name), now, reach
        )

    def figures(self) -> WindowFigures:
        """How many schedules beat holds, of what size and room (the pace's)."""
        return self.bounds.figures(len(self.held))

    def ends(self) -> WindowEnds | None:
        """:meth:`ScheduleBounds.checked_ends
        <celery_dgs.core.window.ScheduleBounds.checked_ends>` in epoch seconds."""
        return self.bounds.checked_ends(len(self.held), _seconds)

    @classmethod
    def configured(
        cls,
        state: BeatState,
        ranking: BeatRanking,
        store: ScheduleStore,
        clock: Clock,
        settings: DgsSettings,
    ) -> ScheduleWindow | None:
        """The window ``settings`` ask for (``dgs_schedule_window_size``,
        ``dgs_schedule_window``, ``dgs_schedule_window_read_on``); ``None``:
        beat holds every active schedule."""
        size = settings.schedule_window_size
        if size is None:
            return None
        horizon_s, read_on = settings.schedule_window, settings.schedule_window_read_on
        return cls(state, ranking, store, clock, size=size, horizon_s=horizon_s, read_on=read_on)

    def holds(self, row: StoredSchedule) -> bool:
        """Whether the active schedule ``row`` is in the window (its margin
        bucket is in use from now on)."""
        self.bounds.buckets.seen(row.kept_margin_bucket)
        return self.bounds.holds(
            row.kept_can_start_at,
            row.kept_should_start_by,
            row.name,
            requested=row.run_requested_at is not None,
            error_at=row.kept_error_at,
            bucket=row.kept_margin_bucket,
        )

    def note(self, row: StoredSchedule) -> None:
        """``row`` was applied: beat holds it (active) or forgot it."""
        self.bounds.buckets.seen(row.kept_margin_bucket)
        if row.active and row.spec is not None:
            self.held.note(row.name, row.kept_start())
        else:
            self.held.forget(row.name)

    def drop(self, row: StoredSchedule) -> None:
        """Let go of a schedule whose new row is outside the window."""
        self.bounds.part.not_held(row.kept_can_start_at)
        self.held.forget(row.name)
        let_go(self.state, self.ranking, row.name, row)

    def next_read(
        self, *, more: bool = False, bucket: int | None = None
    ) -> tuple[SliceRead, list[StoredSchedule]] | None:
        """The next slice of the store if the window needs one (the bounds are
        moved past it; the rows to apply: :meth:`fresh`);
        ``None``: none needed. ``more``, ``bucket``: see
        :meth:`ScheduleBounds.next_read <celery_dgs.core.window.ScheduleBounds.next_read>`."""
        read = self.bounds.next_read(self.clock.now(), len(self.held), more=more, bucket=bucket)
        return None if read is None else (read, self.read(read))

    def refresh_read(self, now: datetime) -> tuple[SliceRead, list[StoredSchedule]] | None:
        """The read that brings the eligible part up to ``now``
        (:meth:`ScheduleBounds.refresh_read
        <celery_dgs.core.window.ScheduleBounds.refresh_read>`), made; ``None``:
        none needed."""
        read = self.bounds.refresh_read(now)
        return None if read is None else (read, self.read(read))

    def read(self, read: SliceRead) -> list[StoredSchedule]:
        """Read ``read``'s rows from the store and move the bounds past them."""
        rows = self.store.window_schedules(
            can_after=read.can_after,
            can_until=read.can_until,
            key_after=read.key_after,
            limit=read.limit,
            bucket=read.bucket,
            key_until=read.key_until,
        )
        in_use = self.store.window_margin_buckets() if read.restart else ()
        kept = [r.kept_start() for r in rows]
        self.bounds.after_read(read, keys_of(read, kept, [r.name for r in rows]), in_use)
        return rows

    def learn_arrival(self) -> None:
        """Read when the next schedule past the window becomes eligible, if a
        read moved the eligible part (:meth:`ScheduleBounds.arrival_wanted
        <celery_dgs.core.window.ScheduleBounds.arrival_wanted>`). Called once
        a read's rows are applied: if the store fails here, they are held
        all the same, and the part's next refresh asks again."""
        wanted = self.bounds.arrival_wanted()
        if wanted is not None:
            can_after, key_after = wanted
            arrival = self.store.window_next_can(can_after=can_after, key_after=key_after)
            self.bounds.part.arrival_read(arrival)

    def wake_at(self) -> float | None:
        """When a schedule past the window next becomes eligible (epoch
        seconds; :meth:`EligiblePart.wake_at
        <celery_dgs.core.window_part.EligiblePart.wake_at>`)."""
        wake = self.bounds.part.wake_at()
        return None if wake is None else wake.timestamp()

    def fresh(self, read: SliceRead, rows: list[StoredSchedule]) -> list[StoredSchedule]:
        """The rows of ``read`` to apply: all of a start-over's, else those
        the window did not hold (:func:`~celery_dgs.core.window.unheld`)."""
        if read.restart:
            return rows
        new = set(unheld([r.name for r in rows], self.held))
        return [r for r in rows if r.name in new]

    def outside(self) -> list[str]:
        """The held schedules the bounds no longer cover (after a read that
        filled the window or started over): beat lets go of them."""
        tracked = self.state.tracked

        def requested(name: str) -> bool:
            held = tracked.get(name)
            return held is not None and held.run_requested_at is not None

        return self.held.outside(requested)

    def forget(self, name: str) -> None:
        """Let go of the held schedule ``name`` (the bounds moved past it)."""
        self.held.forget(name)
        let_go(self.state, self.ranking, name)


def _seconds(moment: datetime) -> float:
    """A kept time on the certainty rule's clock (epoch seconds)."""
    return moment.timestamp()
