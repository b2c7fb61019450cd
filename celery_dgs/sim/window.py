"""Beat's window of schedules in the simulator (``OrderPolicy.window_size``:
``dgs_schedule_window_size``, ``simulate --window``), with the window code
beat runs (:mod:`celery_dgs.core.window`).

Each schedule's kept start times are computed when it becomes idle (a run's
end, the start: when beat's store writes them); they play the store.
:class:`~celery_dgs.sim.deadline_policy.DeadlinePolicy` indexes only the schedules
the window holds: one whose kept times are past the window is let go of (its
demand too: beat's demand book holds what beat holds) and read again when
the window reaches it. The reads, and the read-further of a round with free
slots, are beat's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from ..core.blackout_watch import kept_start_past_blackout
from ..core.laxity import margin_bucket, margin_bucket_of
from ..core.spec import ScheduleSpec
from ..core.stats import ScheduleStats
from ..core.timing import start_margin, start_times
from ..core.window import (
    DEFAULT_WINDOW_READ_ON,
    HeldSchedules,
    KeptStart,
    ScheduleBounds,
    buckets_in_use,
    keys_of,
    next_can_of,
    slice_of,
    unheld,
)
from ..core.window_buckets import WindowEnds
from ..core.window_part import SliceRead, WindowKey
from .state import PolicyHost


class SimRead(NamedTuple):
    """One read of the window: the names to index (held now; but for a
    start-over, those not held before), the held ones the bounds moved past
    (let go of), and how many rows the slice returned."""

    names: list[str]
    outside: list[str]
    rows: int


class SimWindow:
    """The window over the simulator's fleet: at most ``size`` schedules,
    ``horizon_s`` ahead."""

    def __init__(
        self,
        sim: PolicyHost,
        *,
        size: int,
        horizon_s: float,
        retry_ladder: Sequence[timedelta],
        read_on: float | None = DEFAULT_WINDOW_READ_ON,
    ) -> None:
        self.sim, self.ladder = sim, retry_ladder
        self.bounds = ScheduleBounds(size, timedelta(seconds=horizon_s), read_on)
        self.held = HeldSchedules(self.bounds)
        #: Every schedule's kept start times, as of its last write (the store).
        self.kept: dict[str, KeptStart] = {}
        #: How many slices were read, and their rows; the most schedules held.
        self.reads = self.rows_read = self.most_held = 0
        #: Whether an eligible read passed over a schedule no live worker may run.
        self.passed_over_unserved = False

    def idle(self, name: str, spec: ScheduleSpec, stats: ScheduleStats, now: float) -> bool:
        """``name`` is idle at ``now`` (its row written): whether the window holds it."""
        times = start_times(spec, stats, self.sim.at(now), retry_ladder=self.ladder)
        margin = start_margin(spec, stats)
        kept = self.kept[name] = KeptStart(
            times.can_start_by,
            times.should_start_by,
            times.should_start_by + margin,
            margin_bucket(margin.total_seconds()),
        )
        self.bounds.buckets.seen(kept.bucket)
        if self.bounds.holds(
            kept.can, kept.should, name, requested=False, error_at=kept.error_at, bucket=kept.bucket
        ):
            self.held.note(name, kept)
            return True
        self.bounds.part.not_held(kept.can)
        self.held.forget(name)
        return False

    def forget(self, name: str) -> None:
        """``name`` is held back (disabled): in no slice until it is idle again."""
        self.kept.pop(name, None)
        self.held.forget(name)

    def read(self, now: float, *, more: bool = False, bucket: int | None = None) -> SimRead | None:
        """The next slice if the window needs one (``more``, ``bucket``: see
        :meth:`ScheduleBounds.next_read
        <celery_dgs.core.window.ScheduleBounds.next_read>`); ``None``: none."""
        read = self.bounds.next_read(self.sim.at(now), len(self.held), more=more, bucket=bucket)
        return None if read is None else self._take(read)

    def refresh(self, now: float, serves: Callable[[str], bool]) -> SimRead | None:
        """The eligible part brought up to ``now`` (beat's
        :meth:`ScheduleLoader.refresh_eligible
        <celery_dgs.beat.loading.ScheduleLoader.refresh_eligible>`); ``None``:
        no read needed."""
        read = self.bounds.refresh_read(self.sim.at(now))
        return None if read is None else self._take(read, serves)

    def read_eligible(self, now: float, serves: Callable[[str], bool]) -> list[SimRead]:
        """The eligible part brought up to ``now`` and read on (beat's
        :meth:`ScheduleLoader.read_eligible
        <celery_dgs.beat.loading.ScheduleLoader.read_eligible>`): the reads made."""
        reads: list[SimRead] = []

        def take(read: SliceRead) -> int:
            reads.append(self._take(read, serves))
            return reads[-1].rows

        self.bounds.read_eligible(self.sim.at(now), lambda: len(self.held), take)
        return reads

    def _take(self, read: SliceRead, serves: Callable[[str], bool] | None = None) -> SimRead:
        """Make ``read`` over the fleet's kept times and move the bounds past it.
        An eligible read does not hold the schedules ``serves`` says no live
        worker may run (beat's :meth:`ScheduleLoader._startable
        <celery_dgs.beat.loading.ScheduleLoader._startable>`)."""
        names = slice_of(read, self.kept.items())
        kept = [self.kept[name] for name in names]
        in_use = buckets_in_use(self.kept.values()) if read.restart else ()
        bounds = self.bounds
        bounds.after_read(read, keys_of(read, kept, names), in_use)
        past = self._keep_past_blackout(read, unheld(names, self.held)) if read.eligible else set()
        if read.eligible and serves is not None:
            past |= self._unserved(unheld(names, self.held), serves)
        wanted = bounds.arrival_wanted()
        if wanted is not None:
            bounds.part.arrival_read(next_can_of(*wanted, self.kept.items()))
        self.reads += 1
        self.rows_read += len(names)
        rows = len(names)
        if not read.restart:
            names = [name for name in unheld(names, self.held) if name not in past]
        for name in names:
            self.held.note(name, self.kept[name])
        self.most_held = max(self.most_held, len(self.held))
        outside = self.held.outside(lambda _name: False) if read.may_let_go(rows) else []
        for name in outside:
            self.held.forget(name)
        return SimRead(names, outside, rows)

    def _unserved(self, names: list[str], serves: Callable[[str], bool]) -> set[str]:
        """Of the idle schedules an eligible read brought in, those no live
        worker may run: not held (beat drops them from the part)."""
        states, dropped = self.sim.states, set()
        for name in names:
            if states[name].running_since is None and not serves(name):
                self.bounds.part.not_held(self.kept[name].can)
                dropped.add(name)
        self.passed_over_unserved |= bool(dropped)
        return dropped

    def live_workers_changed(self) -> None:
        """Beat's :meth:`ScheduleLoader.live_workers_changed
        <celery_dgs.beat.loading.ScheduleLoader.live_workers_changed>`."""
        if self.passed_over_unserved:
            self.bounds.part.clear()
            self.passed_over_unserved = False

    def _keep_past_blackout(self, read: SliceRead, names: list[str]) -> set[str]:
        """Beat's :meth:`ScheduleLoader._startable
        <celery_dgs.beat.loading.ScheduleLoader._startable>` for blackouts: of the
        idle schedules an eligible ``read`` brought in, those a blackout begun
        since their kept times were written keeps from starting get their
        start times as of the read (the store's
        :func:`~celery_dgs.store.kept.kept_past_blackout`) and are not held."""
        past: set[str] = set()
        states = self.sim.states
        for name in names:
            st, kept = states[name], self.kept[name]
            if st.running_since is not None or not st.sched.spec.blackout_periods:
                continue
            spec, stats = st.sched.spec, st.stats
            moved = kept_start_past_blackout(
                spec, stats, kept.can, kept.should, read.can_until, retry_ladder=self.ladder
            )
            if moved is None:
                continue
            can, should = moved
            bucket = margin_bucket_of(should, kept.error_at)
            self.kept[name] = KeptStart(can, should, kept.error_at, bucket)
            self.bounds.buckets.seen(bucket)
            self.bounds.part.not_held(can)
            past.add(name)
        return past

    def ends(self) -> WindowEnds | None:
        """:meth:`ScheduleBounds.checked_ends
        <celery_dgs.core.window.ScheduleBounds.checked_ends>` in simulated seconds."""
        return self.bounds.checked_ends(len(self.held), self.sim.rel)

    def reach_ends(self) -> WindowEnds | None:
        """:meth:`ScheduleBounds.reach_ends
        <celery_dgs.core.window.ScheduleBounds.reach_ends>` in simulated
        seconds, over the fleet's kept times."""
        return self.bounds.reach_ends(len(self.held), self._should_at, self.sim.rel)

    def _should_at(self, until: datetime, end: WindowKey, offset: int) -> datetime | None:
        """The store's ``window_should_at`` over the fleet's kept times."""
        read = SliceRead(None, until, end, offset + 1, restart=False)
        names = slice_of(read, self.kept.items())
        return self.kept[names[offset]][1] if len(names) > offset else None

    def next_read_s(self) -> float:
        """When the window next reads as time moves, or a schedule past it
        becomes eligible, if sooner (simulated seconds)."""
        moves, arrival = self.bounds.moves_at(), self.bounds.part.wake_at()
        if moves is None:
            return 0.0
        return self.sim.rel(moves if arrival is None else min(moves, arrival))
