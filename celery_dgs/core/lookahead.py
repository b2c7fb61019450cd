"""Look-ahead admission (pure): hold a long run back while it would make the
short schedules late.

Seed 000's greedy order starts any eligible schedule on a free slot. A
12-hour job that is eligible early then holds a slot for 12 hours, and the
hourly jobs that come due meanwhile lack the capacity. The admission runs
before a chosen schedule is dispatched and answers: start it now, or hold it
until a given time (then it is re-indexed with that ``can_start_by`` and the
slot goes to the next schedule).

The long runs (the candidate's own, and those in progress with an expected
run time of at least ``h / SHORT_RATIO``) may hold an *allowance* of slots:
what the much shorter schedules leave (every slot less their shares over
``UTILISATION``), and at least what the long schedules' own shares round up
to while the whole demand fits in ``UTILISATION`` of the slots. Under
overload the floor is one slot: the demand beyond capacity is shed from the
long jobs, whose runs buy the least fresh time per slot-second (the long-run
bound's order, :mod:`celery_dgs.sim.bound`), while one long run at a time
still serves them all by their deadline order.

Only a candidate whose expected run is longer than the short schedules'
mean period (weighted by share) is checked: they could not wait for it to
end. A run shorter than that frees its slot before they miss a period;
holding it would only reorder fleets whose run times merely spread widely
(its slot goes to a run not yet due, or idles). Two checks, in this order:

- *the cap*: it is held while as many long runs as the allowance are in
  progress, counted until they end, however far past their expected end (a
  run that overruns still holds its slot). This holds a due candidate too:
  it waits for a long run to end instead of taking a slot the short
  schedules need. The candidates it holds wait in a
  :class:`CapQueue`, in ``should_start_by`` order: a later one counts them
  as already under the cap, so a long slot that frees goes to the one due
  first, and a held candidate is delayed by the long runs in progress and
  those due before it, never starved;
- *the fluid check*, for a candidate not yet due: over its expected run time
  ``h``, the short schedules need ``h * sum(share)`` slot-seconds, and the
  slots offer ``h`` each less the candidate's own and what the long runs in
  progress still hold of the window (to their expected end; a short run's
  slot is counted free: its schedule's share is in the demand). The
  candidate is held while the long runs' slot-seconds would exceed the
  allowance at the window's end or at any long run's end inside it. Once
  its ``should_start_by`` has come, only the cap holds it.

A candidate with no shorter schedules beside it is never held, nor one
no longer than their mean period, nor one with no other long run in
progress or waiting before it (the allowance is at least one slot). The
shares and run times are kept in buckets of expected run time (four per
octave) by :class:`DemandBook`, so a decision
costs slice sums of the buckets and a pass over the runs in progress and
the held candidates, not a pass over the schedules.

The long schedules that are not running are not in the demand: they can
wait, and each is checked itself when it comes up. Pools and node
constraints are not separated (as in :mod:`~celery_dgs.core.projection`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from operator import itemgetter

from .adaptive import current_interval
from .cron import shortest_cron_gap
from .run_estimate import RunEstimates
from .spec import AdaptiveSpec, CheckSpec, CronSpec, PeriodicSpec, ScheduleSpec
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
    """Each indexed schedule's share of a slot (expected run time / period)
    and expected run time, summed per bucket of expected run time. ``note``
    on every (re)index, ``forget`` when a schedule leaves (removed, paused,
    invalid). A schedule without an expected run time yet has no share; the
    admission gives its run the estimate of :attr:`estimates`."""

    def __init__(self) -> None:
        self.rates = [0.0] * _BUCKETS
        self.run_s = [0.0] * _BUCKETS
        self._of: dict[str, tuple[int, float, float, str | None]] = {}
        #: the sum of ``rates``, kept with them (read on every priority decision)
        self._total = 0.0
        #: the shares summed by pool (``None``: the default pool)
        self._by_pool: dict[str | None, float] = {}
        #: the expected run times per task, for a run without one
        self.estimates = RunEstimates()

    def __len__(self) -> int:
        return len(self._of)

    def note(
        self,
        name: str,
        expected_s: float,
        period_s: float,
        task: str | None = None,
        pool: str | None = None,
    ) -> None:
        """``task``: the schedule's task, to estimate the run time of its
        others (None: not counted in :attr:`estimates`); ``pool``: the pool
        it runs in (None: the default one)."""
        if task is not None:
            self.estimates.note(name, task, expected_s)
        positive = period_s > 0 and expected_s > 0
        rate = expected_s / period_s if positive else 0.0
        run_s = expected_s if positive else 0.0
        entry = (_bucket(expected_s), rate, run_s, pool)
        old = self._of.get(name)
        if old is not None:
            if old == entry:
                return
            self._take(old)
        self._of[name] = entry
        bucket = entry[0]
        self.rates[bucket] += rate
        self.run_s[bucket] += run_s
        self._total += rate
        self._by_pool[pool] = self._by_pool.get(pool, 0.0) + rate

    def _take(self, entry: tuple[int, float, float, str | None]) -> None:
        """Take a schedule's ``entry`` out of the sums."""
        bucket, rate, run_s, pool = entry
        self.rates[bucket] -= rate
        self.run_s[bucket] -= run_s
        self._total -= rate
        left = self._by_pool.get(pool, 0.0) - rate
        if left > 1e-12:
            self._by_pool[pool] = left
        else:
            self._by_pool.pop(pool, None)  # the pool's last share (or float dust)

    def note_schedule(
        self, name: str, spec: ScheduleSpec, stats: ScheduleStats, expected_s: float
    ) -> None:
        """:meth:`note` a schedule from its spec (:func:`demand_period_s`); a
        deferred check is one run, not a recurring share: forgotten."""
        if isinstance(spec, CheckSpec):
            self.forget(name)
        else:
            self.note(name, expected_s, demand_period_s(spec, stats), spec.task, spec.pool)

    def expected_s(self, name: str, expected_s: float) -> float:
        """``expected_s`` when known (above 0), else the estimate of
        :class:`~celery_dgs.core.run_estimate.RunEstimates`."""
        return expected_s if expected_s > 0 else self.estimates.expected_s(name, expected_s)

    def forget(self, name: str) -> None:
        self.estimates.forget(name)
        old = self._of.pop(name, None)
        if old is not None:
            self._take(old)

    def total(self) -> float:
        """Slots all the schedules need on average."""
        return max(self._total, 0.0)

    def by_pool(self) -> Mapping[str | None, float]:
        """Slots each pool's schedules need on average (``None``: the default
        pool's, of the schedules that name none)."""
        return self._by_pool

    def share_below(self, expected_s: float) -> float:
        """Slots the schedules whose expected run time is below ``expected_s``
        need on average (bucket resolution: a quarter octave)."""
        return max(sum(self.rates[: _bucket(expected_s)]), 0.0)

    def period_below(self, expected_s: float) -> float:
        """The mean period of the schedules whose expected run time is below
        ``expected_s``, each weighted by its share (sum of run times over sum
        of shares); 0 when there are none."""
        bucket = _bucket(expected_s)
        share = sum(self.rates[:bucket])
        return sum(self.run_s[:bucket]) / share if share > 1e-12 else 0.0


def admit(
    book: DemandBook,
    now: float,
    expected_s: float,
    should_start_by: float,
    slots: int,
    busy: Sequence[tuple[float, float]],
    busy_count: int | None = None,
    ahead: int = 0,
) -> tuple[float | None, bool]:
    """``(wake, capped)``: ``wake`` None to start the candidate now, else the
    time to look at it again; ``capped``: the cap (not the fluid check) held it.

    ``expected_s``, ``should_start_by``: the candidate's; ``slots``: every
    slot, free or busy (the candidate's included); ``busy``: ``(expected end,
    expected run time)`` of each run in progress or dispatched, the
    candidate's excluded (or only those of them at least a tenth of the
    candidate's run time, with ``busy_count`` the number of all); ``ahead``:
    long candidates the cap holds that are due before this one (their places
    under the cap are kept for them, :class:`CapQueue`). Times are float
    seconds (module docstring).
    """
    if expected_s <= 0:
        return None, False
    cut = expected_s / SHORT_RATIO
    short = book.share_below(cut)
    if short <= 0:
        return None, False
    allowed = long_run_allowance(book, slots, short)
    if (len(busy) if busy_count is None else busy_count) + 1 + ahead <= allowed:
        return None, False  # even if every run in progress were long
    if expected_s <= book.period_below(cut):
        return None, False  # the short schedules can wait for it to end
    long_ends = [end for end, run_s in busy if run_s >= cut]
    if len(long_ends) + 1 + ahead > allowed:
        return now + _recheck_step(expected_s), True
    if now >= should_start_by:
        return None, False
    remaining = sorted(min(max(end - now, 0.0), expected_s) for end in long_ends)
    # Over [now, now + tau] for tau = the window and each long run's end in it:
    # the long runs' slot-seconds (the candidate's included) against `allowed`.
    held = 0.0
    for i, tau in enumerate(remaining):
        if tau <= 0:
            continue
        if tau + held + tau * (len(remaining) - i) > allowed * tau:
            return _recheck(now, expected_s, should_start_by), False
        held += tau
    if expected_s + held > allowed * expected_s:
        return _recheck(now, expected_s, should_start_by), False
    return None, False


def long_run_allowance(book: DemandBook, slots: int, short: float) -> float:
    """Slots the long runs may hold at once beside short schedules needing
    ``short`` slots (module docstring): what those leave at UTILISATION, and
    at least the long schedules' own shares rounded up (else they could only
    run when forced at their should_start_by, all at once), or one slot
    under overload."""
    total = book.total()
    if total > slots * UTILISATION:
        floor = 1.0
    else:
        floor = max(float(math.ceil(max(total - short, 0.0) - 1e-9)), 1.0)
    return max(slots - short / UTILISATION, floor)


def _recheck_step(expected_s: float) -> float:
    return min(max(expected_s * RECHECK_FRACTION, MIN_RECHECK_S), MAX_RECHECK_S)


def _recheck(now: float, expected_s: float, should_start_by: float) -> float:
    return min(now + _recheck_step(expected_s), should_start_by)


class CapQueue:
    """The long candidates the cap holds, kept across rounds, so that a long
    slot that frees goes to the one due first and not to whichever is looked
    at first (a schedule whose run just ended and that is eligible again at
    once would otherwise take it back every time). A later candidate counts
    the earlier ones as already under the cap. An entry lapses unless the next
    look at its schedule renews it (a schedule removed, paused or run by an
    operator meanwhile holds no place)."""

    def __init__(self) -> None:
        #: name -> (should_start_by, expected run time, lapses at)
        self._held: dict[str, tuple[float, float, float]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def ahead(self, name: str, expected_s: float, should_start_by: float, now: float) -> int:
        """Held candidates due before ``name`` that are its peers: neither
        ``SHORT_RATIO`` times shorter nor longer (the cap holds long runs for
        the short schedules; a held long one never holds a short one back)."""
        low, high = expected_s / SHORT_RATIO, expected_s * SHORT_RATIO
        count = 0
        lapsed = []
        for other, (should, run_s, lapses_at) in self._held.items():
            if lapses_at < now:
                lapsed.append(other)
            elif (
                other != name and low <= run_s < high and (should, other) < (should_start_by, name)
            ):
                count += 1
        for other in lapsed:
            del self._held[other]
        return count

    def hold(self, name: str, expected_s: float, should_start_by: float, wake: float) -> None:
        self._held[name] = (should_start_by, expected_s, wake + _recheck_step(expected_s))

    def discard(self, name: str) -> None:
        self._held.pop(name, None)


class AdmissionRound:
    """One dispatch round's admission: the slots and the runs in progress at
    its start; each admitted candidate becomes a run in progress for the
    candidates after it (beat and the simulator build one per round).

    ``busy`` is called at most once, when a candidate first needs it (most
    candidates have no shorter schedule beside them and are admitted at once);
    its runs are kept by expected run time, so a candidate looks only at the
    runs at least a tenth of its own. ``queue``: the candidates the cap holds
    (kept by the caller across rounds).
    """

    def __init__(
        self,
        book: DemandBook,
        now: float,
        slots: int,
        busy: Callable[[], Iterable[tuple[float, float]]],
        queue: CapQueue | None = None,
    ) -> None:
        self.book = book
        self.now = now
        self.slots = slots
        self.queue = CapQueue() if queue is None else queue
        self._busy_of = busy
        self._busy: list[tuple[float, float]] | None = None  # by run time
        self._run_s: list[float] = []
        self._admitted: list[tuple[float, float]] = []

    def hold_until(self, expected_s: float, should_start_by: float, name: str = "") -> float | None:
        """:func:`admit` for this round's candidate ``name``: None to start it,
        else the time to look at it again; an admitted
        one is then counted busy until ``now + expected_s``, one held by the
        cap waits in the queue. A candidate without an expected run time
        (0) takes the book's estimate (:meth:`DemandBook.expected_s`)."""
        expected_s = self.book.expected_s(name, expected_s)
        wake, capped = None, False
        if expected_s > 0 and self.book.share_below(expected_s / SHORT_RATIO) > 0:
            if self._busy is None:
                runs = sorted([*self._busy_of(), *self._admitted], key=itemgetter(1))
                self._busy, self._run_s = runs, [r[1] for r in runs]
            first = bisect.bisect_left(self._run_s, expected_s / SHORT_RATIO)
            ahead = (
                self.queue.ahead(name, expected_s, should_start_by, self.now) if self.queue else 0
            )
            wake, capped = admit(
                self.book,
                self.now,
                expected_s,
                should_start_by,
                self.slots,
                self._busy[first:],
                len(self._busy),
                ahead,
            )
        if wake is not None:
            if capped:
                self.queue.hold(name, expected_s, should_start_by, wake)
            return wake
        self.queue.discard(name)
        run = (self.now + expected_s, expected_s)
        if self._busy is None:
            self._admitted.append(run)
        else:
            at = bisect.bisect_right(self._run_s, expected_s)
            self._busy.insert(at, run)
            self._run_s.insert(at, expected_s)
        return None
