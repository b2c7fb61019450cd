"""The margin buckets' slices of a full window of schedules (pure).

Beat's default order ranks the eligible schedules not in ERROR by relative
laxity, bucket by bucket of margin (:mod:`~celery_dgs.core.laxity`). A
full window's should-order slice bounds the laxity of the schedules it does
not hold only loosely: a short run with a small margin and a late
``should_start_by`` may be the fleet's most urgent. So, while full, the
window may also read, per margin bucket in use (the store keeps each
schedule's :func:`~celery_dgs.core.laxity.margin_bucket`), a slice of that
bucket by (kept ``error_at``, ``next_can_start_at``, name). A schedule the
window does not hold is then past the should-order slice's end *and* past
its bucket's slice end, which bounds its ``error_at`` from below
(:class:`WindowEnds`), hence its laxity and its late key
(:mod:`~celery_dgs.core.window_certainty`).

A bucket's slice is read only when the certainty rule refuses a pick on
that bucket's bound: it is unread until then (its bound is the should-order
slice's alone), cut (its end is its last key) or complete (it holds every
schedule of the bucket that can start within the window). A start-over
reads none and lists the buckets in use again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

#: A schedule's place in its margin bucket's slice: its kept ``error_at``,
#: then ``next_can_start_at``, then name.
BucketKey = tuple[datetime, datetime, str]


@dataclass(frozen=True)
class WindowEnds:
    """What a full window's ends say of every eligible schedule it does not
    hold (seconds on the rule's clock): its kept ``should_start_by`` is at or
    after ``should``, and for one in margin bucket ``m`` (a key of
    ``buckets``, every bucket in use) its ``error_at`` is at or after
    ``buckets[m]`` (``-inf``: the bucket's slice is unread; ``inf``: it is
    complete, every schedule of the bucket is held), and if equal to it, its
    ``(next start, name)`` is after ``cut_at[m]``."""

    should: float
    buckets: dict[int, float]
    #: A cut bucket's last key after its ``error_at``: its next start (seconds)
    #: and name. A schedule not held of that bucket whose ``error_at`` is the
    #: end's has a greater ``(next start, name)``.
    cut_at: dict[int, tuple[float, str]] = field(default_factory=dict)
    #: What the certainty rule computed from these ends, kept while they
    #: stand (:func:`~celery_dgs.core.laxity_bounds.laxity_summary`).
    summaries: dict[tuple[float, int], object] = field(
        default_factory=dict, compare=False, repr=False
    )


class BucketEnds:
    """The margin buckets in use and how far each one's slice was read."""

    def __init__(self) -> None:
        #: The margin buckets of the active schedules (listed at a start-over,
        #: and every bucket of a row seen since).
        self.in_use: set[int] = set()
        #: A bucket's slice read: its last key (cut) or ``None`` (complete).
        self.ends: dict[int, BucketKey | None] = {}
        #: The last :meth:`window_ends`, while no bucket or end changed.
        self._built: WindowEnds | None = None

    def seen(self, bucket: int | None) -> None:
        """A schedule row of margin ``bucket`` was written."""
        if bucket is not None and bucket not in self.in_use:
            self.in_use.add(bucket)
            self._built = None

    def started_over(self, buckets: Iterable[int]) -> None:
        """The window started over: ``buckets`` are in use, no slice is read."""
        self.in_use = set(buckets)
        self.ends.clear()
        self._built = None

    def not_full(self) -> None:
        """The window holds every schedule that can start within it: no
        slice is cut any more."""
        self.ends.clear()
        self._built = None

    def holds(self, bucket: int | None, key: BucketKey | None) -> bool:
        """Whether a schedule of ``bucket`` with ``key`` is in its bucket's
        slice (read and not past its end)."""
        if bucket is None or bucket not in self.ends:
            return False
        end = self.ends[bucket]
        return end is None or (key is not None and key <= end)

    def readable(self, bucket: int) -> bool:
        """Whether ``bucket``'s slice has more to read (it is not complete)."""
        return bucket not in self.ends or self.ends[bucket] is not None

    def after_read(self, bucket: int, keys: list[BucketKey], limit: int) -> None:
        """``bucket``'s slice was read on: ``keys``, in order, of at most ``limit``."""
        self._built = None
        if len(keys) < limit:
            self.ends[bucket] = None
        elif keys:
            before = self.ends.get(bucket)
            self.ends[bucket] = keys[-1] if before is None else max(before, keys[-1])

    def window_ends(self, should: float, seconds: Callable[[datetime], float]) -> WindowEnds:
        """The :class:`WindowEnds` with the should-order slice's end at
        ``should`` (``seconds`` converts a kept time to the rule's clock):
        the same object while nothing changed, so what the rule computed
        from it is kept."""
        built = self._built
        if built is not None and built.should == should:
            return built
        buckets: dict[int, float] = {}
        cut_at: dict[int, tuple[float, str]] = {}
        for bucket in self.in_use:
            if bucket not in self.ends:
                buckets[bucket] = -math.inf
                continue
            end = self.ends[bucket]
            if end is None:
                buckets[bucket] = math.inf
            else:
                buckets[bucket] = seconds(end[0])
                cut_at[bucket] = (seconds(end[1]), end[2])
        self._built = WindowEnds(should, buckets, cut_at)
        return self._built
