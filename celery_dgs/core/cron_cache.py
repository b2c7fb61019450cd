"""Cron fire times remembered across many schedules: beat's start-up.

At start-up beat computes ``next_cron_time(expr, tz, last_good_start_at)`` for
every cron schedule. Thousands of schedules share an expression and zone, and
their anchors (last good starts) fall within a few fire periods of each other.
:class:`CronFireCache` keeps, per ``(expr, tz)``, a *timeline*: a sorted list
of fire times each of which is ``next_cron_time`` of the one before, so no
fire lies between two neighbours, and the earliest ``after`` seen whose
answer was the first of them. For any ``after`` from there to the last fire
the answer is the first fire greater than ``after`` (a bisect);
an ``after`` outside extends the timeline by at most ``max_steps`` fires, or
is computed directly. Every fire time in a timeline comes from
:func:`~celery_dgs.core.cron.next_cron_time`, so the answers are the same
(``tests/core/test_cron_cache.py`` checks it across DST transitions).
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime

from .cron import next_cron_time
from .tz import ensure_utc

#: Fire times one timeline may hold (about 100 bytes each).
CRON_CACHE_MAX_FIRES = 10_000
#: Fire times computed at most to extend a timeline for one lookup; an
#: ``after`` further away is computed directly and the timeline left alone.
CRON_CACHE_MAX_STEPS = 64


class _Timeline:
    """``fires``: consecutive fire times; ``lo``: an instant whose next fire is
    ``fires[0]``. For ``lo <= after < fires[-1]`` the next fire after ``after``
    is the first of ``fires`` greater than it."""

    __slots__ = ("fires", "lo")

    def __init__(self, lo: datetime, first: datetime) -> None:
        self.lo = lo
        self.fires = [first]


class CronFireCache:
    """``next_cron_time`` with a timeline of consecutive fire times per ``(expr, tz)``."""

    def __init__(
        self, max_fires: int = CRON_CACHE_MAX_FIRES, max_steps: int = CRON_CACHE_MAX_STEPS
    ) -> None:
        self.max_fires = max_fires
        self.max_steps = max_steps
        self._timelines: dict[tuple[str, str], _Timeline] = {}
        self.computed = 0  # calls of next_cron_time made (for tests and benchmarks)

    def next_cron_time(self, expr: str, tz: str, after: datetime) -> datetime:
        """Exactly :func:`~celery_dgs.core.cron.next_cron_time` of the arguments."""
        after = ensure_utc(after, what="after")
        line = self._timelines.get((expr, tz))
        if line is None:
            first = self._compute(expr, tz, after)
            self._timelines[(expr, tz)] = _Timeline(after, first)
            return first
        fires = line.fires
        if line.lo <= after < fires[-1]:
            return fires[bisect_right(fires, after)]
        if after >= fires[-1]:
            return self._extend_forward(expr, tz, fires, after)
        return self._extend_backward(expr, tz, line, after)

    def _compute(self, expr: str, tz: str, after: datetime) -> datetime:
        self.computed += 1
        return next_cron_time(expr, tz, after)

    def _extend_forward(
        self, expr: str, tz: str, fires: list[datetime], after: datetime
    ) -> datetime:
        added: list[datetime] = []
        last = fires[-1]
        while last <= after:
            if len(added) >= self.max_steps or len(fires) + len(added) >= self.max_fires:
                return self._compute(expr, tz, after)  # too far: leave the timeline alone
            last = self._compute(expr, tz, last)
            added.append(last)
        fires.extend(added)
        return last

    def _extend_backward(self, expr: str, tz: str, line: _Timeline, after: datetime) -> datetime:
        # after < lo <= fires[0]: its answer is <= fires[0]; chain from it up to fires[0].
        fires = line.fires
        answer = self._compute(expr, tz, after)
        chain = [answer]
        while chain[-1] < fires[0]:
            if len(chain) > self.max_steps or len(fires) + len(chain) >= self.max_fires:
                return answer  # too far: leave the timeline alone
            chain.append(self._compute(expr, tz, chain[-1]))
        if chain[-1] == fires[0]:
            fires[:0] = chain[:-1]
            line.lo = after
        return answer
