"""Beat's window of schedules: which stored schedules beat holds, and which
slice of the store it reads next.

The window holds every active schedule whose kept ``next_can_start_at`` is at
or before :attr:`ScheduleBounds.until` and, while the window is *full*, whose
key (kept ``should_start_by``, ``next_can_start_at``, name) is at or before
:attr:`ScheduleBounds.end`: the most urgent of them, at most ``size``. A
run request, and a row with no kept times (an invalid spec, reported), are
always held.

Reads (:meth:`ScheduleBounds.next_read`), in the order they are considered:

* the first read, and while full a read once ``until`` is less than half the
  horizon ahead, start over: every schedule that can start within the
  horizon, most urgent first, at most ``size`` (what is held and not read
  again is let go);
* not full, once ``until`` is less than half the horizon ahead: the schedules
  whose next start entered the horizon since the last read, most urgent
  first, at most the room left (a read that fills the room makes the window
  full, its end the last key read);
* full, once fewer than half of ``size`` are held, or when the certainty
  rule refused a pick on the should-order slice's bound: the next most
  urgent after ``end`` (a read that leaves room makes the window not full);
* full, when the certainty rule refused a pick on a margin bucket's bound:
  that bucket's next slice by ``error_at`` (:mod:`.window_buckets`), a
  quarter of ``size`` (a read that returns fewer makes the bucket's slice
  complete). A start-over reads none and lists the buckets in use;
* full, when a dispatch round has free slots and no eligible schedule held:
  the eligible schedules past ``end``, the eligible part
  (:mod:`.window_part`), brought up to date before each round.

Every schedule that can start now and is not held is less urgent than every
held one (its key is above ``end``, or above the eligible part's end), so
the most urgent eligible schedule of the whole fleet is the window's, or
the window has none eligible left and the round reads on. A schedule held
by a bucket's slice stays held while its key is within that slice. A
schedule let go (its new row is outside the window) is read again when the
window reaches it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from .pace import WindowFigures
from .window_buckets import BucketEnds, BucketKey, WindowEnds
from .window_part import EligiblePart, SliceRead, WindowKey

#: Seconds ahead beat's window of schedules reaches (``dgs_schedule_window``).
DEFAULT_SCHEDULE_WINDOW_S = 3600.0
#: How far, in window sizes, the certainty rule
#: (:mod:`~celery_dgs.core.window_certainty`) reads past a full window
#: (``dgs_schedule_window_read_on``); 0: the picks are not checked. Reading on
#: only where a pick may not be the fleet's, a window holds more than its
#: size mostly under overload.
DEFAULT_WINDOW_READ_ON = 10.0


class KeptStart(NamedTuple):
    """A schedule's kept times that the window selects it by: when it can next
    start, its ``should_start_by``, its ``error_at`` and its margin bucket
    (:func:`~celery_dgs.core.laxity.margin_bucket`). ``None``: not kept (an
    invalid spec)."""

    can: datetime | None
    should: datetime | None
    error_at: datetime | None = None
    bucket: int | None = None


class ScheduleBounds:
    """The window's bounds (see the module doc); ``size`` schedules at most,
    ``horizon`` ahead of now; ``read_on``: how far the certainty rule reads
    past it, in sizes (``None``: as far as it needs)."""

    def __init__(
        self, size: int, horizon: timedelta, read_on: float | None = DEFAULT_WINDOW_READ_ON
    ) -> None:
        if size < 1:
            raise ValueError(f"the schedule window's size must be at least 1, got {size}")
        if horizon <= timedelta(0):
            raise ValueError(f"the schedule window must be a positive duration, got {horizon}")
        if read_on is not None and not 0 <= read_on < float("inf"):
            raise ValueError(f"the window's read-on must be a finite number >= 0, got {read_on}")
        self.size, self.horizon, self.read_on = size, horizon, read_on
        #: Every schedule whose next start is at or before it is held (unless
        #: full); ``None``: nothing read yet.
        self.until: datetime | None = None
        #: While full: the last key held. ``None``: not full.
        self.end: WindowKey | None = None
        #: The should-order bound (:meth:`should_end`) at which reading on was
        #: found not to help the certainty rule: while it is this one, the
        #: picks are not checked.
        self.unchecked_end: WindowKey | None = None
        #: While full: the margin buckets' slices (:mod:`.window_buckets`).
        self.buckets = BucketEnds()
        #: While full: the eligible part past ``end`` (:mod:`.window_part`).
        self.part = EligiblePart()

    @property
    def full(self) -> bool:
        return self.end is not None

    def read_further(self, bucket: int | None, read: Callable[[int | None], int]) -> bool:
        """While full, ``read(bucket)`` reads on ``bucket``'s slice (``None``:
        the should-order slice's) and counts its rows: whether the window read
        on. A margin bucket's slice that had more to read counts even when it
        returns no row: its end moved to complete, which moves its bound."""
        if not self.full:
            return False
        readable = bucket is not None and self.buckets.readable(bucket)
        return read(bucket) > 0 or readable

    def read_eligible(
        self, now: datetime, held: Callable[[], int], read: Callable[[SliceRead], int]
    ) -> bool:
        """A round at ``now`` has free slots and no eligible schedule held:
        bring the eligible part up to date and extend it (``read`` reads a
        slice and counts its rows; ``held()``: how many are held). Whether
        it read any schedule."""
        rows = 0
        refresh = self.refresh_read(now)
        if refresh is not None:
            rows += read(refresh)
        extension = self.extension_read(now, held())
        if extension is not None:
            rows += read(extension)
        return rows > 0

    def reads_on(self, held: int) -> bool:
        """Whether the certainty rule checks the picks with ``held`` schedules
        held: the window is full, may read on (``read_on`` not 0) and holds
        fewer than ``(1 + read_on)`` times its size (past that, beat chooses
        among the held until dispatches or the next start-over make room),
        and reading on was not found useless at its bound (:attr:`unchecked_end`)."""
        if self.end is None or self.should_end() == self.unchecked_end or self.read_on == 0:
            return False
        room = self.room(held)
        return room is None or room > 0

    def checked_ends(self, held: int, seconds: Callable[[datetime], float]) -> WindowEnds | None:
        """The ends the certainty rule checks the picks against (:meth:`reads_on`),
        on the rule's clock (``seconds``); ``None``: they are not checked, or
        the eligible part holds every eligible schedule past ``end`` (the
        window holds every one)."""
        if self.end is None or not self.reads_on(held):
            return None
        should_end = self.should_end()
        if should_end is None:
            return None
        return self.buckets.window_ends(seconds(should_end[0]), seconds)

    def should_end(self) -> WindowKey | None:
        """While full, the key every eligible schedule not held is above: the
        eligible part's end if it reaches past ``end``, else ``end``;
        ``None``: every eligible one is held (or not full)."""
        return None if self.end is None else self.part.bound(self.end)

    def reach_ends(
        self,
        held: int,
        should_at: Callable[[datetime, WindowKey, int], datetime | None],
        seconds: Callable[[datetime], float],
    ) -> WindowEnds | None:
        """The ends once the window read the should-order slice on as far as
        it may (:meth:`reachable_should`), the margin buckets' slices as
        they are; ``None``: the window would hold every schedule that can
        start within it."""
        reach = self.reachable_should(held, should_at)
        should_end = self.should_end()
        if reach is None or should_end is None:
            return None
        return self.buckets.window_ends(seconds(max(reach, should_end[0])), seconds)

    def figures(self, held: int) -> WindowFigures:
        """What ``status`` shows of the window with ``held`` schedules held."""
        room = None if self.read_on is None else int((1 + self.read_on) * self.size)
        return WindowFigures(held=held, size=self.size, full=self.full, room=room)

    def room(self, held: int) -> int | None:
        """How many more schedules the window may read on to with ``held``
        held (``None``: no limit)."""
        if self.read_on is None:
            return None
        return max(int((1 + self.read_on) * self.size) - held, 0)

    def reachable_should(
        self, held: int, should_at: Callable[[datetime, WindowKey, int], datetime | None]
    ) -> datetime | None:
        """The kept ``should_start_by`` of the last schedule the window may
        still read on to with ``held`` held; ``None``: every schedule that can
        start within it fits (reading on leaves the window not full).
        ``should_at(until, end, offset)`` is the store's
        :meth:`~celery_dgs.store.base.ScheduleStore.window_should_at`."""
        room, end, until = self.room(held), self.end, self.until
        if room is None or end is None or until is None:
            return None
        if room < 1:
            return end[0]
        return should_at(until, end, room - 1)

    def moves_at(self) -> datetime | None:
        """When the window next reads as time moves (half the horizon before
        ``until``); ``None``: nothing read yet (it reads at once)."""
        return None if self.until is None else self.until - self.horizon / 2

    def holds(
        self,
        can: datetime | None,
        should: datetime | None,
        name: str,
        *,
        requested: bool,
        error_at: datetime | None = None,
        bucket: int | None = None,
    ) -> bool:
        """Whether a schedule whose kept times are ``can`` and ``should`` (and
        ``error_at``, in margin ``bucket``) is in the window (``requested``: a
        run request is pending)."""
        if requested or can is None or should is None:
            return True
        if self.until is None or can > self.until:
            return False
        if self.end is None or (should, can, name) <= self.end:
            return True
        if self.part.holds(can, (should, can, name)):
            return True
        return self.buckets.holds(bucket, None if error_at is None else (error_at, can, name))

    def next_read(
        self, now: datetime, held: int, *, more: bool = False, bucket: int | None = None
    ) -> SliceRead | None:
        """The read the window needs at ``now`` with ``held`` schedules held;
        ``None``: none. ``more``: the certainty rule refused a pick: the next
        slice is read whatever is held (it is let go of at the next
        start-over): margin ``bucket``'s if the rule named it and it has
        more, else the should-order slice's."""
        ahead = now + self.horizon
        if self.until is None:
            return SliceRead(None, ahead, None, self.size, restart=True)
        moving = self.until <= now + self.horizon / 2
        full = self.end is not None
        if bucket is not None and full and not moving and self.buckets.readable(bucket):
            after, limit = self.buckets.ends.get(bucket), (self.size + 3) // 4
            return SliceRead(None, self.until, after, limit, restart=False, bucket=bucket)
        if self.end is None:
            if not moving:
                return None
            return SliceRead(self.until, ahead, None, max(self.size - held, 1), restart=False)
        if moving:
            return SliceRead(None, ahead, None, self.size, restart=True)
        if more:
            limit = max(self.size - held, (self.size + 1) // 2)
        elif held < self.size // 2:
            limit = self.size - held
        else:
            return None
        return SliceRead(None, self.until, self.end, limit, restart=False)

    def refresh_read(self, now: datetime) -> SliceRead | None:
        """While full, the read that brings the eligible part up to ``now``, at
        most ``size`` (:meth:`EligiblePart.refresh_read
        <celery_dgs.core.window_part.EligiblePart.refresh_read>`); ``None``: none."""
        return None if self.end is None else self.part.refresh_read(now, self.end, self.size)

    def extension_read(self, now: datetime, held: int) -> SliceRead | None:
        """While full, the read of the next eligible schedules past the
        eligible part, half ``size`` or the room left if more
        (:meth:`EligiblePart.extension_read
        <celery_dgs.core.window_part.EligiblePart.extension_read>`): a round
        at ``now`` has free slots and none held eligible. ``None``: not
        full, or every eligible one is held."""
        if self.end is None:
            return None
        limit = max(self.size - held, (self.size + 1) // 2)
        return self.part.extension_read(now, self.end, limit)

    def arrival_wanted(self) -> tuple[datetime, WindowKey] | None:
        """The store's :meth:`~celery_dgs.store.base.ScheduleStore.window_next_can`
        arguments if the part's next arrival must be read, for
        :meth:`EligiblePart.arrival_read
        <celery_dgs.core.window_part.EligiblePart.arrival_read>`; ``None``:
        known, or no part."""
        after = self.part.arrival_wanted()
        return None if after is None or self.end is None else (after, self.end)

    def after_read(
        self, read: SliceRead, keys: list[WindowKey | None], buckets: Iterable[int] = ()
    ) -> None:
        """Move the bounds past ``read``, which returned rows with these keys
        (``None``: a row with no kept times; a margin bucket's read: its
        :data:`BucketKey`), most urgent last. ``buckets``: after a start-over,
        the margin buckets in use."""
        if read.bucket is not None:
            bucket_keys = [key for key in keys if key is not None]
            self.buckets.after_read(read.bucket, bucket_keys, read.limit)
            return
        if read.eligible:
            self.part.after_read(read, keys)
            return
        self.until = read.can_until
        if read.restart:
            self.buckets.started_over(buckets)
            self.part.clear()
        if len(keys) < read.limit:
            if read.restart or read.key_after is not None:
                self.end = None  # everything that can start by ``until`` is held
                self.buckets.not_full()
                self.part.clear()
            return
        last = next((key for key in reversed(keys) if key is not None), None)
        if last is None:  # only rows with no kept times: hold no keyed one yet
            least = datetime.min.replace(tzinfo=read.can_until.tzinfo)
            last = (least, least, "")
        self.end = last if self.end is None or read.restart else max(self.end, last)
        self.part.window_moved(self.end)


def slice_of(read: SliceRead, kept: Iterable[tuple[str, KeptStart]]) -> list[str]:
    """The names ``read`` selects among ``kept`` (every active schedule's kept
    times), in the slice's order (the ``limit`` smallest, without sorting
    the rest): what :meth:`ScheduleStore.window_schedules
    <celery_dgs.store.base.ScheduleStore.window_schedules>` returns, for a fleet
    held in memory (the simulator, the memory store)."""
    if read.bucket is not None:
        return _bucket_slice_of(read, kept)
    unkept: list[str] = []
    keyed: list[tuple[WindowKey, str]] = []
    start = read.can_after is None and read.key_after is None
    for name, (can, should, _, _) in kept:
        if can is None or should is None:
            if start:
                unkept.append(name)
            continue
        if can > read.can_until or (read.can_after is not None and can <= read.can_after):
            continue
        key = (should, can, name)
        if read.key_after is not None and key <= read.key_after:
            continue
        if read.key_until is None or key <= read.key_until:
            keyed.append((key, name))
    unkept = heapq.nsmallest(read.limit, unkept)
    return unkept + [name for _, name in heapq.nsmallest(read.limit - len(unkept), keyed)]


def next_can_of(
    can_after: datetime, key_after: WindowKey, kept: Iterable[tuple[str, KeptStart]]
) -> datetime | None:
    """The store's :meth:`~celery_dgs.store.base.ScheduleStore.window_next_can`
    over every active schedule's kept times (a fleet held in memory)."""
    cans = (
        can
        for name, (can, should, _, _) in kept
        if can is not None and should is not None and can > can_after
        if (should, can, name) > key_after
    )
    return min(cans, default=None)


def _bucket_slice_of(read: SliceRead, kept: Iterable[tuple[str, KeptStart]]) -> list[str]:
    """:func:`slice_of` for a read of one margin bucket's slice."""
    keyed: list[BucketKey] = []
    after, until, bucket = read.key_after, read.can_until, read.bucket
    for name, (can, should, error_at, of) in kept:
        if of != bucket or can is None or should is None or error_at is None or can > until:
            continue
        key = (error_at, can, name)
        if after is None or key > after:
            keyed.append(key)
    return [key[2] for key in heapq.nsmallest(read.limit, keyed)]


class HeldSchedules:
    """The schedules a window holds, with the kept times each was read with:
    the ones to let go of when the bounds move past them."""

    def __init__(self, bounds: ScheduleBounds) -> None:
        self.bounds = bounds
        self.kept: dict[str, KeptStart] = {}

    def __len__(self) -> int:
        return len(self.kept)

    def note(self, name: str, kept: KeptStart) -> None:
        self.kept[name] = kept

    def forget(self, name: str) -> None:
        self.kept.pop(name, None)

    def past_end(self, name: str) -> bool:
        """Whether the held ``name``'s kept key is past the window's end (held
        by the eligible part, not by the window's own range), while full."""
        end, kept = self.bounds.end, self.kept.get(name)
        if end is None or kept is None or kept.can is None or kept.should is None:
            return False
        return (kept.should, kept.can, name) > end

    def outside(self, requested: Callable[[str], bool]) -> list[str]:
        """The held schedules the bounds no longer cover (``requested``: whether
        a run request is pending for one: then it stays)."""
        holds = self.bounds.holds
        return [
            name
            for name, (can, should, error_at, bucket) in self.kept.items()
            if not holds(
                can, should, name, requested=requested(name), error_at=error_at, bucket=bucket
            )
        ]


def unheld(names: Sequence[str], held: HeldSchedules) -> list[str]:
    """The names of a slice read on (not a start-over) the window did not
    hold: the others stay as they were applied (one taken by a round under
    way is not offered again). A margin bucket's slice, and the should-order
    slice past a bucket's, may hold some already."""
    return [name for name in names if name not in held.kept]


def keys_of(
    read: SliceRead, kept: Sequence[KeptStart], names: Sequence[str]
) -> list[WindowKey | None]:
    """The keys of the rows ``read`` returned, in its slice's order (``None``:
    one with no kept times)."""
    if read.bucket is not None:
        return [
            None if can is None or error_at is None else (error_at, can, name)
            for (can, _, error_at, _), name in zip(kept, names, strict=True)
        ]
    return [
        None if can is None or should is None else (should, can, name)
        for (can, should, _, _), name in zip(kept, names, strict=True)
    ]


def buckets_in_use(kept: Iterable[KeptStart]) -> set[int]:
    """The margin buckets of the schedules with kept times (a start-over's
    listing, for a fleet held in memory)."""
    return {k.bucket for k in kept if k.bucket is not None and k.can is not None}
