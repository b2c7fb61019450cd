"""Look-ahead admission (pure): hold a long run back while it would make the
short schedules late.

Seed 000's greedy order starts any eligible schedule on a free slot. A
12-hour job that is eligible early then holds a slot for 12 hours, and the
hourly jobs that come due meanwhile lack the capacity. The admission runs
before a chosen schedule is dispatched and answers: start it now, or hold it
until a given time (then it is re-indexed with that ``can_start_by`` and the
slot goes to the next schedule).

The check is a fluid one over the candidate's expected run time ``h``:

- *demand*: the schedules much shorter than the candidate (expected run time
  below ``h / SHORT_RATIO``) need their share of a slot (run time / period)
  all along the window: ``h * sum(share)``;
- *capacity*: every slot for ``h``, less the candidate's own slot, less what
  the long runs in progress (expected run time at least ``h / SHORT_RATIO``)
  still hold of the window (their expected end; a short run's slot is counted
  free: its schedule's share is in the demand).

The candidate is held while ``demand > UTILISATION * capacity``. It is never
held once its own ``should_start_by`` has come (so it is held at most until
it is due, never starved, and then keeps its margin), and a candidate with
no shorter schedules beside it is never held: a slot idles only when the
fluid check says short schedules would need it. The shares are kept in
buckets of expected run time (four per octave) by :class:`DemandBook`, so a
decision costs one slice sum of the buckets and a pass over the runs in
progress, not a pass over the schedules.

The long schedules that are not running are not in the demand: they can
wait, and each is checked itself when it comes up. Pools and node
constraints are not separated (as in :mod:`~celery_dgs.core.projection`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from operator import itemgetter

from .adaptive import current_interval
from .cron import shortest_cron_gap
from .spec import AdaptiveSpec, CronSpec, PeriodicSpec, ScheduleSpec
from .stats import ScheduleStats

#: A schedule is "short" beside a candidate whose expected run time is at
#: least this many times its own.
SHORT_RATIO = 10.0
#: The short schedules may use at most this fraction of the capacity left
#: during the candidate's run (headroom for run-time variance and bursts).
UTILISATION = 0.95
#: A held candidate is looked at again after this fraction of its expected
#: run time (at least ``MIN_RECHECK_S``, at most ``MAX_RECHECK_S``), or at its
#: ``should_start_by`` if that comes first.
RECHECK_FRACTION = 0.01
MIN_RECHECK_S = 1.0
MAX_RECHECK_S = 600.0
#: Buckets per doubling of expected run time, and the range they cover.
_PER_OCTAVE = 4
_LOWEST_LOG2 = -10
_BUCKETS = (40 - _LOWEST_LOG2) * _PER_OCTAVE


_LOWEST_S = 2.0**_LOWEST_LOG2


def _bucket(expected_s: float) -> int:
    if expected_s <= _LOWEST_S:
        return 0
    b = int((math.log2(expected_s) - _LOWEST_LOG2) * _PER_OCTAVE)
    return b if b < _BUCKETS else _BUCKETS - 1


def demand_period_s(spec: ScheduleSpec, stats: ScheduleStats) -> float:
    """Seconds between a schedule's obligations: its period, its current
    adaptive interval, or its cron expression's shortest gap plus ``within``."""
    if isinstance(spec, PeriodicSpec):
        return spec.scheduling_period.total_seconds()
    if isinstance(spec, AdaptiveSpec):
        return current_interval(spec, stats).total_seconds()
    if isinstance(spec, CronSpec):
        gap = shortest_cron_gap(spec.cron_schedule, spec.tz) or timedelta(days=1)
        return (gap + spec.cron_max_schedule_duration).total_seconds()
    raise TypeError(type(spec).__name__)


class DemandBook:
    """Each indexed schedule's share of a slot (expected run time / period),
    summed per bucket of expected run time. ``note`` on every (re)index,
    ``forget`` when a schedule leaves (removed, paused, invalid)."""

    def __init__(self) -> None:
        self.rates = [0.0] * _BUCKETS
        self._of: dict[str, tuple[int, float]] = {}

    def __len__(self) -> int:
        return len(self._of)

    def note(self, name: str, expected_s: float, period_s: float) -> None:
        rate = expected_s / period_s if period_s > 0 and expected_s > 0 else 0.0
        bucket = _bucket(expected_s)
        old = self._of.get(name)
        if old is not None:
            if old[0] == bucket and old[1] == rate:
                return
            self.rates[old[0]] -= old[1]
        self._of[name] = (bucket, rate)
        self.rates[bucket] += rate

    def forget(self, name: str) -> None:
        old = self._of.pop(name, None)
        if old is not None:
            self.rates[old[0]] -= old[1]

    def total(self) -> float:
        """Slots all the schedules need on average."""
        return sum(self.rates)

    def share_below(self, expected_s: float) -> float:
        """Slots the schedules whose expected run time is below ``expected_s``
        need on average (bucket resolution: a quarter octave)."""
        return max(sum(self.rates[: _bucket(expected_s)]), 0.0)


def hold_until(
    book: DemandBook,
    now: float,
    expected_s: float,
    should_start_by: float,
    slots: int,
    busy: Sequence[tuple[float, float]],
    busy_count: int | None = None,
) -> float | None:
    """None: start the candidate now. Else the time to look at it again.

    ``expected_s``, ``should_start_by``: the candidate's; ``slots``: every
    slot, free or busy (the candidate's included); ``busy``: ``(expected end,
    expected run time)`` of each run in progress or dispatched, the
    candidate's excluded (or only those of them at least a tenth of the
    candidate's run time, with ``busy_count`` the number of all). Times are
    float seconds (module docstring).
    """
    if expected_s <= 0 or now >= should_start_by:
        return None
    cut = expected_s / SHORT_RATIO
    short = book.share_below(cut)
    if short <= 0:
        return None
    # Slots the long runs may hold while the short schedules keep UTILISATION;
    # at least what the long schedules' own shares round up to, else they
    # could only run when forced at their should_start_by, all at once.
    long_share = max(book.total() - short, 0.0)
    allowed = max(slots - short / UTILISATION, float(math.ceil(long_share - 1e-9)))
    if (len(busy) if busy_count is None else busy_count) + 1 <= allowed:
        return None  # even if every run in progress were long
    remaining = sorted(min(max(end - now, 0.0), expected_s) for end, run_s in busy
                       if run_s >= cut)  # fmt: skip
    # Over [now, now + tau] for tau = the window and each long run's end in it:
    # the long runs' slot-seconds (the candidate's included) against `allowed`.
    held = 0.0
    for i, tau in enumerate(remaining):
        if tau <= 0:
            continue
        if tau + held + tau * (len(remaining) - i) > allowed * tau:
            return _recheck(now, expected_s, should_start_by)
        held += tau
    if expected_s + held > allowed * expected_s:
        return _recheck(now, expected_s, should_start_by)
    return None


def _recheck(now: float, expected_s: float, should_start_by: float) -> float:
    step = min(max(expected_s * RECHECK_FRACTION, MIN_RECHECK_S), MAX_RECHECK_S)
    return min(now + step, should_start_by)


class AdmissionRound:
    """One dispatch round's admission: the slots and the runs in progress at
    its start; each admitted candidate becomes a run in progress for the
    candidates after it (beat and the simulator build one per round).

    ``busy`` is called at most once, when a candidate first needs it (most
    candidates have no shorter schedule beside them and are admitted at once);
    its runs are kept by expected run time, so a candidate looks only at the
    runs at least a tenth of its own.
    """

    def __init__(
        self,
        book: DemandBook,
        now: float,
        slots: int,
        busy: Callable[[], Iterable[tuple[float, float]]],
    ) -> None:
        self.book = book
        self.now = now
        self.slots = slots
        self._busy_of = busy
        self._busy: list[tuple[float, float]] | None = None  # by run time
        self._run_s: list[float] = []
        self._admitted: list[tuple[float, float]] = []

    def hold_until(self, expected_s: float, should_start_by: float) -> float | None:
        """:func:`hold_until` for this round's candidate; an admitted one is
        then counted busy until ``now + expected_s``."""
        wake = None
        if (
            expected_s > 0 and self.now < should_start_by
            and self.book.share_below(expected_s / SHORT_RATIO) > 0
        ):  # fmt: skip
            if self._busy is None:
                runs = sorted([*self._busy_of(), *self._admitted], key=itemgetter(1))
                self._busy, self._run_s = runs, [r[1] for r in runs]
            first = bisect.bisect_left(self._run_s, expected_s / SHORT_RATIO)
            wake = hold_until(self.book, self.now, expected_s, should_start_by, self.slots,
                              self._busy[first:], busy_count=len(self._busy))  # fmt: skip
        if wake is None:
            run = (self.now + expected_s, expected_s)
            if self._busy is None:
                self._admitted.append(run)
            else:
                at = bisect.bisect_right(self._run_s, expected_s)
                self._busy.insert(at, run)
                self._run_s.insert(at, expected_s)
        return wake
