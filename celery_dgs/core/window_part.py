"""The eligible part of a full window of schedules (pure).

A full window (:mod:`~celery_dgs.core.window`) holds the most urgent
schedules by deadline; they may all start later while slots are free. A
round then reads on among the *eligible* schedules past the window's end
(kept ``next_can_start_at`` at or before now), most urgent first, without
moving the end: the eligible part. It holds every schedule whose key is in
(the window's end, :attr:`EligiblePart.end`] (``None``: past the window's
end, all) and whose next start is at or before :attr:`EligiblePart.at`, the
moment it was last brought up to date. Each round first reads the ones that
became eligible since (:meth:`EligiblePart.refresh_read`: next start in
(``at``, now], key in the part's range), so at the round's moment every
eligible schedule not held has a key above the part's end; a refresh that
fills its limit cuts the part there. A schedule the part held that ran (its
next start is past ``at`` again) is let go. So beat holds, past its window,
only schedules that are due now: reading on among all the schedules that
can start within the horizon instead could hold every one of them until the
next start-over. A start-over, or the window's end read past the part,
ends it.

Beat does not hold the schedules that will become eligible past its window,
so it would not wake when one does. While there is a part, it keeps
:attr:`EligiblePart.next_arrival`, the earliest next start after ``at`` of a
schedule not held (the store's
:meth:`~celery_dgs.store.base.ScheduleStore.window_next_can`, lowered by each
row let go): beat wakes then, and a round before it needs no refresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

#: A schedule's place in the window's order, the index's among eligible
#: schedules: its kept ``should_start_by``, then ``next_can_start_at``, then name.
WindowKey = tuple[datetime, datetime, str]


@dataclass(frozen=True, slots=True)
class SliceRead:
    """One read of the store (:meth:`ScheduleStore.window_schedules
    <celery_dgs.store.base.ScheduleStore.window_schedules>`): the schedules
    whose kept next start is in (``can_after``, ``can_until``] and whose key
    is above ``key_after`` (and at or below ``key_until``, if given), most
    urgent first, at most ``limit``. ``restart``: a read from the start, after
    which what is held and was not read is let go. ``bucket``: a read of one
    margin bucket's slice, whose key is a
    :data:`~celery_dgs.core.window_buckets.BucketKey` (``can_after`` is then
    ``None``); ``None``: of the window's order (:data:`WindowKey`).
    ``eligible``: a read of the eligible part (``can_until`` is the round's
    now): its extension, or with ``can_after`` its refresh."""

    can_after: datetime | None
    can_until: datetime
    key_after: WindowKey | None
    limit: int
    restart: bool
    bucket: int | None = None
    key_until: WindowKey | None = None
    eligible: bool = False

    def may_let_go(self, rows: int) -> bool:
        """Whether the bounds may have moved past held schedules after this
        read returned ``rows`` rows: not after an eligible part's read that
        left its end where it was or moved it on (only a refresh that filled
        its limit cuts the part)."""
        return not self.eligible or (self.can_after is not None and rows >= self.limit)


class EligiblePart:
    """The eligible part past a full window's end (see the module doc)."""

    def __init__(self) -> None:
        #: When the part was last brought up to date; ``None``: no part.
        self.at: datetime | None = None
        #: Its last key; ``None``: every eligible schedule past the window's
        #: end as of :attr:`at` is held.
        self.end: WindowKey | None = None
        #: While there is a part: the earliest next start after :attr:`at` of
        #: a schedule not held (``None``: none), once known.
        self.next_arrival: datetime | None = None
        self._arrival_known = False

    @property
    def complete(self) -> bool:
        """Whether the part holds every eligible schedule past the window's end."""
        return self.at is not None and self.end is None

    def holds(self, can: datetime, key: WindowKey) -> bool:
        """Whether a schedule past the window's end with next start ``can`` and
        ``key`` is the part's."""
        return self.at is not None and can <= self.at and (self.end is None or key <= self.end)

    def bound(self, window_end: WindowKey) -> WindowKey | None:
        """The key every eligible schedule not held is above, with the window's
        end at ``window_end``; ``None``: every eligible one is held."""
        if self.complete:
            return None
        return window_end if self.end is None else max(window_end, self.end)

    def refresh_read(self, now: datetime, window_end: WindowKey, limit: int) -> SliceRead | None:
        """The read that brings the part up to ``now`` (the schedules that
        became eligible since it was, in its range), at most ``limit``;
        ``None``: no part, or up to date (also when the clock stepped back
        before :attr:`at`: what the part holds covers ``now``, and it is
        taken as of ``now``)."""
        at = self.at
        if at is None or now == at:
            return None
        if now < at:
            self.at, self._arrival_known = now, False
            return None
        arrival = self.next_arrival
        if self._arrival_known and (arrival is None or now < arrival):
            self.at = now  # none became eligible since: up to date as it is
            return None
        return SliceRead(at, now, window_end, limit, False, key_until=self.end, eligible=True)

    def extension_read(self, now: datetime, window_end: WindowKey, limit: int) -> SliceRead | None:
        """The read of the next eligible schedules past the part (past the
        window's end, with no part), at most ``limit``: a round at ``now``
        has free slots and none held eligible. ``None``: the part holds
        every eligible one. The part must be up to date
        (:meth:`refresh_read` first)."""
        if self.complete:
            return None
        if self.at is not None and self.at != now:
            raise ValueError(f"the eligible part is as of {self.at}, not {now}: refresh it")
        after = window_end if self.end is None else self.end
        return SliceRead(None, now, after, limit, False, eligible=True)

    def after_read(self, read: SliceRead, keys: list[WindowKey | None]) -> None:
        """The part after its extension or refresh ``read`` returned rows with
        these keys, most urgent last: up to date as of the read's
        ``can_until``; a read that filled its limit makes its last key the
        part's end."""
        if self.at != read.can_until:
            self._arrival_known = False
        self.at = read.can_until
        if len(keys) < read.limit:
            if read.can_after is None:  # an extension that found every one left
                self.end = None
            return
        last = next((key for key in reversed(keys) if key is not None), None)
        if last is not None:
            self.end = last

    def window_moved(self, window_end: WindowKey | None) -> None:
        """The window's end is now ``window_end`` (``None``: not full): the
        part ends if the end reached past it."""
        if window_end is None or (self.end is not None and self.end <= window_end):
            self.clear()

    def clear(self) -> None:
        """No part (a start-over)."""
        self.at = self.end = self.next_arrival = None
        self._arrival_known = False

    def arrival_wanted(self) -> datetime | None:
        """The moment after which :attr:`next_arrival` must be read from the
        store (after a read that moved :attr:`at`), for :meth:`arrival_read`;
        ``None``: known, or no part."""
        return None if self._arrival_known else self.at

    def arrival_read(self, arrival: datetime | None) -> None:
        """:attr:`next_arrival` as the store answered :meth:`arrival_wanted`."""
        self.next_arrival, self._arrival_known = arrival, True

    def not_held(self, can: datetime | None) -> None:
        """A schedule whose kept next start is ``can`` was let go of, or not
        taken in: it may arrive before :attr:`next_arrival`."""
        at, arrival = self.at, self.next_arrival
        if can is None or at is None or can <= at:
            return
        if arrival is None or can < arrival:
            self.next_arrival = can

    def wake_at(self) -> datetime | None:
        """When a schedule not held next becomes eligible, while there is a
        part (beat wakes then); ``None``: none known."""
        return None if self.at is None else self.next_arrival
