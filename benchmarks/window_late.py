"""A late slice beside beat's window, in the simulator: ``python -m benchmarks.window_late``.

Beat's window (:mod:`celery_dgs.core.window`) holds, while full, the ``size``
most urgent schedules by kept ``should_start_by``: beat's default order then
sees only the most overdue schedules in ERROR, not the shortest
(``benchmarks/window_quality.py``). This experiment adds a second slice, the
*late slice*: among the schedules whose kept next start is within the main
window's ``until`` and whose ``error_at`` (``should_start_by`` + margin) is
at or before the late slice's read time + ``E``, the ``late_size`` with the
lowest late key (``L = should_start_by + aging * expected run time``, then
``next_can_start_at``, name: the late order's key). A schedule is held if
either slice holds it. The late slice starts over when the main one does
and when time passes its read time + ``E / 2``.

Before every pick of a dispatch round, while the main window is full and
the late slice is cut (its ``end``: the last key read), the *certainty
rule*: a run request on top, or a top in ERROR whose key is at or before
``end``, is the whole fleet's top among schedules in ERROR; otherwise (no
top, a top not in ERROR, or one past ``end``) the next part of the late
slice is read (``late_size / 2`` rows after ``end``) and the top looked at
again, until certain or the late slice is complete.

Each schedule's ``L`` and ``error_at`` are computed when it becomes idle, as
a store would keep them. Unless ``--no-check``, a shadow index of the whole
fleet's idle schedules (mirroring every upsert, pick and deferral) gives the
fleet's pick beside each of the window's: how many were the same, how many
differed with the fleet's pick in ERROR or not, and how many the window had
claimed exact (logged; ``tests/benchmarks/test_window_late.py`` asserts
there are none).

Runs ``dgs`` (beat's default order) on :mod:`benchmarks.window_quality`'s
fleets: the whole fleet (the baseline, same run), the current window, and
the window with a late slice at ``E`` = 60 s and ``E`` = the horizon;
``--oracle`` adds a diagnostic run handed the fleet's pick whenever the
window lacks it (``--whole-book``: and the whole fleet's demand book).
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from celery_dgs.core.index import DeadlineIndex, IndexedTimes, IndexOver
from celery_dgs.core.late_order import is_run_request
from celery_dgs.core.lookahead import AdmissionRound
from celery_dgs.core.ranking import OrderPolicy, build_index
from celery_dgs.core.spec import ScheduleSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.sim.deadline_policy import DeadlinePolicy
from celery_dgs.sim.draws import KeyedDraw, RunDraw
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.state import PolicyHost
from celery_dgs.sim.window import SimRead, SimWindow
from celery_dgs.sim.workload import Workload

from .common import log
from .quality import scenarios, workload_of

GOAL_RATIO = 0.01
HOUR = 3600.0

#: A schedule's place in the late slice: L, kept next_can_start_at, name
#: (simulated seconds).
LateKey = tuple[float, float, str]


@dataclass(frozen=True, slots=True)
class LateEntry:
    """A schedule's late-slice columns as the store would keep them when it
    becomes idle: kept next start, ``error_at``, ``L``."""

    can: float
    error_at: float
    late: float

    def key(self, name: str) -> LateKey:
        return (self.late, self.can, name)


@dataclass(frozen=True, slots=True)
class LateRead:
    """One read of the late slice: schedules with ``can <= can_until`` and
    ``error_at <= error_until`` whose key is above ``key_after``, lowest key
    first, at most ``limit``."""

    can_until: float
    error_until: float
    key_after: LateKey | None
    limit: int
    restart: bool


class LateBounds:
    """The late slice's bounds: ``size`` rows per start-over, ``error_horizon_s`` (E)."""

    def __init__(self, size: int, error_horizon_s: float) -> None:
        if size < 2:
            raise ValueError(f"the late slice's size must be at least 2, got {size}")
        if not error_horizon_s > 0:
            raise ValueError(f"the late slice's E must be positive, got {error_horizon_s}")
        self.size, self.error_horizon_s = size, error_horizon_s
        #: The last start-over's time; ``None``: none yet.
        self.read_at: float | None = None
        self.can_until = -math.inf
        self.error_until = -math.inf
        #: The last key read when the slice is cut; ``None``: complete.
        self.end: LateKey | None = None

    @property
    def cut(self) -> bool:
        return self.end is not None

    def holds(self, name: str, entry: LateEntry | None) -> bool:
        if entry is None or entry.can > self.can_until or entry.error_at > self.error_until:
            return False
        return self.end is None or entry.key(name) <= self.end

    def restarts_at(self) -> float:
        """When the slice starts over as time passes."""
        return -math.inf if self.read_at is None else self.read_at + self.error_horizon_s / 2

    def start(self, now: float, can_until: float) -> LateRead:
        return LateRead(can_until, now + self.error_horizon_s, None, self.size, restart=True)

    def further(self) -> LateRead | None:
        """The next part after ``end``; ``None``: complete."""
        if self.end is None:
            return None
        return LateRead(self.can_until, self.error_until, self.end, self.size // 2, restart=False)

    def after_read(self, now: float, read: LateRead, keys: Sequence[LateKey]) -> None:
        if read.restart:
            self.read_at, self.can_until, self.error_until = now, read.can_until, read.error_until
        self.end = keys[-1] if len(keys) == read.limit else None


def late_slice_of(read: LateRead, entries: Iterable[tuple[str, LateEntry | None]]) -> list[str]:
    """The names ``read`` selects, lowest key first (what an index on
    (L, next_can_start_at, name) with the two range conditions returns)."""
    after = read.key_after
    keys = [
        entry.key(name)
        for name, entry in entries
        if entry is not None
        and entry.can <= read.can_until
        and entry.error_at <= read.error_until
        and (after is None or entry.key(name) > after)
    ]
    return [key[2] for key in heapq.nsmallest(read.limit, keys)]


@dataclass(frozen=True)
class LateSettings:
    """The late slice of one run: ``size`` rows, ``error_horizon_s`` (E);
    ``reapply``: a start-over applies again the rows it reads that are held."""

    size: int
    error_horizon_s: float
    reapply: bool = False


class LateWindow(SimWindow):
    """:class:`SimWindow` with a late slice; a schedule is held if either slice holds it."""

    def __init__(
        self,
        sim: PolicyHost,
        *,
        size: int,
        horizon_s: float,
        retry_ladder: Sequence[timedelta],
        late: LateSettings,
        entry_of: Callable[[str, float, float], LateEntry],
    ) -> None:
        super().__init__(sim, size=size, horizon_s=horizon_s, retry_ladder=retry_ladder)
        self.late_bounds = LateBounds(late.size, late.error_horizon_s)
        self.reapply = late.reapply
        #: name, kept can, kept should -> its late-slice columns
        self.entry_of = entry_of
        #: Every schedule's late-slice columns as of its last write.
        self.entries: dict[str, LateEntry | None] = {}
        #: The schedules the late slice holds, with the columns each was read with.
        self.late_held: dict[str, LateEntry | None] = {}
        self.late_reads = self.late_rows = 0

    def holding(self) -> int:
        """The schedules held by either slice."""
        return len(self.held.kept.keys() | self.late_held.keys())

    def idle(self, name: str, spec: ScheduleSpec, stats: ScheduleStats, now: float) -> bool:
        in_main = super().idle(name, spec, stats, now)
        can, should = self.kept[name][:2]
        entry = None
        if can is not None and should is not None:
            entry = self.entry_of(name, self.sim.rel(can), self.sim.rel(should))
        self.entries[name] = entry
        in_late = self.late_bounds.holds(name, entry)
        if in_late:
            self.late_held[name] = entry
        else:
            self.late_held.pop(name, None)
        return in_main or in_late

    def forget(self, name: str) -> None:
        super().forget(name)
        self.entries.pop(name, None)
        self.late_held.pop(name, None)

    def read(self, now: float, *, more: bool = False, bucket: int | None = None) -> SimRead | None:
        held_before = self.held.kept.keys() | self.late_held.keys()
        planned = self.bounds.next_read(self.sim.at(now), len(self.held), more=more, bucket=bucket)
        main = super().read(now, more=more, bucket=bucket)
        names = [] if main is None else main.names
        restart = planned is not None and planned.restart
        if restart or now >= self.late_bounds.restarts_at():
            until = self.bounds.until
            assert until is not None  # the main window read first
            read = self.late_bounds.start(now, self.sim.rel(until))
            late_names = self._read_late(now, read)
            for name in [n for n, e in self.late_held.items() if not self.late_bounds.holds(n, e)]:
                del self.late_held[name]
            # Rows held before are applied again only with ``reapply`` (beat's
            # apply_row re-indexes every row read, undoing a look-ahead hold-back).
            skip = set(names) | (set() if self.reapply else held_before)
            names += [name for name in late_names if name not in skip]
        elif main is None:
            return None
        held = self.held.kept
        late_held = self.late_held
        outside = sorted(n for n in held_before if n not in held and n not in late_held)
        return SimRead(names, outside, len(names) + (0 if main is None else main.rows))

    def read_late_further(self, now: float) -> list[str] | None:
        """The late slice's next part (held now); ``None``: it is complete."""
        read = self.late_bounds.further()
        if read is None:
            return None
        return self._read_late(now, read)

    def _read_late(self, now: float, read: LateRead) -> list[str]:
        names = late_slice_of(read, self.entries.items())
        keys = []
        for name in names:
            entry = self.entries[name]
            assert entry is not None
            keys.append(entry.key(name))
            self.late_held[name] = entry
        self.late_bounds.after_read(now, read, keys)
        self.late_reads += 1
        self.late_rows += len(names)
        return names

    def next_read_s(self) -> float:
        return min(super().next_read_s(), max(self.late_bounds.restarts_at(), 0.0))


class PickAudit:
    """The whole fleet's order beside the window's: a shadow index of every
    idle schedule, mirroring each upsert, pick and deferral; each pick of the
    window is compared with the shadow's (the first schedule that can be
    placed, as :func:`choose_dispatches` takes it)."""

    def __init__(
        self, shadow: DeadlineIndex, in_error: Callable[[IndexedTimes, str], bool]
    ) -> None:
        self.shadow, self.in_error = shadow, in_error
        self.picks = self.same = self.differ_error = self.differ_laxity = 0
        #: Picks where the window claimed exactness and its pick was not the fleet's.
        self.broken = 0

    def pick(self, now: float, can_place: Callable[[str], bool]) -> str | None:
        """The shadow's pick at ``now`` (left in the shadow)."""
        placed: list[IndexedTimes] = []

        def probe(name: str) -> bool:
            times = self.shadow.times(name)
            if not can_place(name) or times is None:
                return False
            placed.append(times)
            return True

        name = self.shadow.pop_placeable(now, probe)
        if name is not None:
            self.shadow.upsert(name, placed[-1].can_start_by, placed[-1].should_start_by)
        return name

    def compare(self, now: float, pick: str | None, whole: str | None, *, claimed: bool) -> None:
        """The window's ``pick`` against the shadow's, ``whole``; ``claimed``:
        the window said its top is the fleet's, and it took its top."""
        self.picks += 1
        if pick is not None:
            self.shadow.remove(pick)
        if whole == pick:
            self.same += 1
            return
        times = None if whole is None else self.shadow.times(whole)
        if whole is not None and times is not None and self.in_error(times, whole):
            self.differ_error += 1
        else:
            self.differ_laxity += 1
        if claimed:
            self.broken += 1
            log(f"at {now:.0f} s the window's pick {pick} is not the fleet's {whole}")


class _CheckedPicks(IndexOver):
    """The policy's index as :func:`choose_dispatches` sees it (which only
    pops from it): each pick first runs ``before_pick``, then reports what it
    took (``None``: nothing)."""

    def __init__(
        self,
        main: DeadlineIndex,
        before_pick: Callable[[float, Callable[[str], bool]], None],
        picked: Callable[[float, str | None], None],
    ) -> None:
        super().__init__(main)
        self.before_pick, self.picked = before_pick, picked

    def pop_placeable(
        self, now: float, can_place: Callable[[str], bool], *, max_skips: int = 1000
    ) -> str | None:
        self.before_pick(now, can_place)
        name = self.main.pop_placeable(now, can_place, max_skips=max_skips)
        self.picked(now, name)
        return name


class LatePolicy(DeadlinePolicy):
    """``dgs`` with the window (``order.window_size``), a late slice beside it
    (``late``; ``None``: the current window) and the certainty rule; ``audit``:
    compare every pick with the whole fleet's top."""

    def __init__(
        self,
        sim: PolicyHost,
        order: OrderPolicy,
        late: LateSettings | None,
        *,
        audit: bool,
        oracle: bool = False,
        whole_book: bool = False,
        rule: bool = False,
    ) -> None:
        #: The demand book holds every idle schedule, held or not (a diagnostic).
        self.whole_book = whole_book
        super().__init__(sim, order)
        if not rule:  # the window as it chose before the certainty rule
            self.bound = None
        #: A diagnostic (needs ``audit``): before each pick and each round, the
        #: fleet's pick is indexed if the window lacks it, and the policy wakes
        #: when the fleet's next schedule becomes eligible, held or not.
        self.oracle, self.oracle_reads = oracle and audit, 0
        assert self.window is not None, "a window size is needed"
        self.late_window: LateWindow | None = None
        if late is not None:
            self.window = self.late_window = LateWindow(
                sim,
                size=self.window.bounds.size,
                horizon_s=order.window_s,
                retry_ladder=self.ladder,
                late=late,
                entry_of=self.entry_of,
            )
        self.audit = PickAudit(build_index(order, self.sources()), self.in_error) if audit else None
        self.most_held = 0
        #: Picks made certain by a run request, by the key rule, by a
        #: complete late slice; picks left uncertain (a top not in ERROR with
        #: the late slice complete, or no late slice); late reads the rule made.
        self.by_request = self.by_key = self.by_complete = self.uncertain = 0
        self.rule_reads = 0
        #: The dispatch round's time.
        self.now = 0.0
        #: Before a pick: the window's top if it claimed it the fleet's, and
        #: the fleet's pick.
        self._pending: tuple[str | None, str | None] = (None, None)

    def margin_of(self, name: str) -> float:
        """The index's margin (:class:`~celery_dgs.core.laxity.LaxityIndex`)."""
        margin = self.margin_s(name)
        return margin if math.isfinite(margin) and margin > 0 else 0.0

    def entry_of(self, name: str, can: float, should: float) -> LateEntry:
        aging = self.order.restore_aging * max(self.expected_s(name), 0.0)
        return LateEntry(can, should + self.margin_of(name), should + aging)

    def in_error(self, times: IndexedTimes, name: str) -> bool:
        """Whether ``name``, indexed with ``times``, is in ERROR at the round's time."""
        return times.should_start_by + self.margin_of(name) < self.now

    def _note_held(self) -> None:
        window = self.window
        assert window is not None
        held = window.holding() if isinstance(window, LateWindow) else len(window.held)
        self.most_held = max(self.most_held, held)

    def idle(self, name: str, now: float) -> None:
        super().idle(name, now)
        if self.whole_book and name not in self.index:
            st = self.sim.states[name]
            self.book.note_schedule(name, st.sched.spec, st.stats, st.expected)
        if self.audit is not None and name not in self.index:
            self.audit.shadow.upsert(name, *self._times(name, now))
        self._note_held()

    def _read_window(self, now: float, *, more: bool = False, bucket: int | None = None) -> int:
        read = super()._read_window(now, more=more, bucket=bucket)
        self._note_held()
        return read

    def _let_go(self, name: str) -> None:
        if self.whole_book:
            self.index.remove(name)
        else:
            super()._let_go(name)

    def _index(self, name: str, now: float) -> None:
        super()._index(name, now)
        self._mirror(name)

    def _mirror(self, name: str) -> None:
        times = self.index.times(name)
        if self.audit is not None and times is not None:
            self.audit.shadow.upsert(name, times.can_start_by, times.should_start_by)

    def held(self, name: str) -> None:
        super().held(name)
        if self.audit is not None:
            self.audit.shadow.remove(name)

    def _defer(self, name: str, now: float, admission: AdmissionRound | None) -> bool:
        deferred = super()._defer(name, now, admission)
        if deferred:
            self._mirror(name)
        return deferred

    def dispatch(self, now: float) -> None:
        self.now = now
        if self.oracle and self.audit is not None:
            whole = self.audit.shadow.peek(now)
            if whole is not None and whole not in self.index:
                self.oracle_reads += 1
                self._index(whole, now)
        super().dispatch(now)

    def next_wakeup(self) -> float | None:
        """With the oracle, also when the fleet's next schedule becomes
        eligible (the window wakes only for the ones it holds)."""
        wake = super().next_wakeup()
        if not self.oracle or self.audit is None:
            return wake
        fleet = self.audit.shadow.next_wakeup()
        return fleet if wake is None else wake if fleet is None else min(wake, fleet)

    def picks(self) -> DeadlineIndex:
        return _CheckedPicks(self.index, self._before_pick, self._picked)

    def _before_pick(self, now: float, can_place: Callable[[str], bool]) -> None:
        claimed = self._make_certain(now) or self.bound is not None
        audit = self.audit
        if audit is None:
            return
        whole = audit.pick(now, can_place)
        if self.oracle and whole is not None and whole not in self.index:
            self.oracle_reads += 1
            self._index(whole, now)
        self._pending = (self.index.peek(now) if claimed else None, whole)

    def _picked(self, now: float, name: str | None) -> None:
        if self.audit is None:
            return
        top, whole = self._pending
        self.audit.compare(now, name, whole, claimed=top is not None and top == name)

    def _make_certain(self, now: float) -> bool:
        """The certainty rule; whether the window's top is the whole fleet's
        among schedules in ERROR (always, when the window is not full)."""
        window, late, index = self.window, self.late_window, self.index
        assert window is not None
        if not window.bounds.full:
            return True
        while True:
            top = index.peek(now)
            times = None if top is None else index.times(top)
            if top is not None and times is not None:
                if is_run_request(times.can_start_by, times.should_start_by):
                    self.by_request += 1
                    return True
                if late is not None and self.in_error(times, top):
                    if late.late_bounds.end is None:
                        self.by_complete += 1
                        return True
                    entry = self.entry_of(top, times.can_start_by, times.should_start_by)
                    if entry.key(top) <= late.late_bounds.end:
                        self.by_key += 1
                        return True
            if late is None or not late.late_bounds.cut:
                self.uncertain += 1
                return False
            self.rule_reads += 1
            self._index_read(late.read_late_further(now) or [], now)

    def _index_read(self, names: Iterable[str], now: float) -> bool:
        states, index = self.sim.states, self.index
        read = False
        for name in names:
            read = True
            if states[name].running_since is None and name not in index:
                self._index(name, now)
        self._note_held()
        return read

    def read_eligible(self, now: float) -> bool:
        return super().read_eligible(now) or self._read_late_further(now)

    def read_further(self, now: float, bucket: int | None = None) -> bool:
        return super().read_further(now, bucket) or self._read_late_further(now)

    def _read_late_further(self, now: float) -> bool:
        late = self.late_window
        if late is None or not late.bounds.full or not late.late_bounds.cut:
            return False
        return self._index_read(late.read_late_further(now) or [], now)


@dataclass(frozen=True)
class RunFigures:
    """One run's figures (counts per simulated hour)."""

    error_s: float
    main_reads_h: float = 0.0
    main_rows_h: float = 0.0
    late_reads_h: float = 0.0
    late_rows_h: float = 0.0
    most_held: int = 0
    picks: int = 0
    same: int = 0
    differ_error: int = 0
    differ_laxity: int = 0
    broken: int = 0
    by_key: int = 0
    by_complete: int = 0
    uncertain: int = 0
    oracle_rows_h: float = 0.0


def run_window(
    workload: Workload,
    order: OrderPolicy,
    late: LateSettings | None,
    *,
    audit: bool,
    oracle: bool = False,
    draw: RunDraw | None = None,
    whole_book: bool = False,
    rule: bool = False,
) -> RunFigures:
    """``dgs`` under ``order`` (with its window) and ``late``: its figures."""
    made: list[LatePolicy] = []

    def factory(sim: PolicyHost) -> LatePolicy:
        made.append(
            LatePolicy(
                sim, order, late, audit=audit, oracle=oracle, whole_book=whole_book, rule=rule
            )
        )
        return made[0]

    sim = Simulator(workload, factory, draw=draw)
    result = sim.run()
    policy, hours = made[0], sim.horizon / HOUR
    window = policy.window
    assert window is not None
    late_window = policy.late_window
    checked = policy.audit
    return RunFigures(
        result.error_s,
        window.reads / hours,
        window.rows_read / hours,
        0.0 if late_window is None else late_window.late_reads / hours,
        0.0 if late_window is None else late_window.late_rows / hours,
        policy.most_held,
        *(
            (0, 0, 0, 0, 0)
            if checked is None
            else (
                checked.picks,
                checked.same,
                checked.differ_error,
                checked.differ_laxity,
                checked.broken,
            )
        ),
        policy.by_key,
        policy.by_complete,
        policy.uncertain,
        policy.oracle_reads / hours,
    )


def row(fleet: str, run: str, whole: float, figures: RunFigures) -> str:
    ratio = figures.error_s / whole if whole else (1.0 if figures.error_s == whole else math.inf)
    met = "met" if abs(ratio - 1) <= GOAL_RATIO else "not met"
    reads = f"{figures.main_reads_h:.1f} + {figures.late_reads_h:.1f}"
    rows = f"{figures.main_rows_h:,.0f} + {figures.late_rows_h:,.0f}"
    if figures.oracle_rows_h:
        rows += f" + {figures.oracle_rows_h:,.0f} by the oracle"
    same = f"{figures.same / figures.picks:.2%}" if figures.picks else "-"
    differ = f"{figures.differ_error:,} / {figures.differ_laxity:,}"
    if figures.broken:
        differ += f" ({figures.broken:,} claimed exact)"
    rule = f"{figures.by_key:,} / {figures.by_complete:,} / {figures.uncertain:,}"
    return (
        f"| {fleet} | {run} | {figures.error_s:,.0f} | {ratio:.4f} | {met} | {reads} | {rows} | "
        f"{figures.most_held:,} | {same} | {differ} | {rule} |"
    )


HEADER = (
    "| fleet | run | ERROR s | ratio to whole | ±1 % | slices read / h (main + late) | "
    "rows read / h (main + late) | most held | tops identical | tops differ: fleet's in ERROR / "
    "not | rule: certain by key / by complete slice / uncertain |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def fleet_runs(
    workload: Workload,
    windowed: OrderPolicy,
    late_size: int,
    errors: Sequence[float],
    args: argparse.Namespace,
) -> list[tuple[str, RunFigures]]:
    """The whole fleet, the window, the window with each late slice (and
    with the laxity oracle, ``args.oracle``): each run's figures."""

    def draw() -> RunDraw | None:
        return KeyedDraw(workload.seed) if args.draw == "keyed" else None

    whole_order = replace(windowed, window_size=None)
    whole = Simulator(workload, "dgs", order=whole_order, draw=draw()).run()
    runs = [("whole fleet", RunFigures(whole.error_s, most_held=len(workload.schedules)))]
    audit = not args.no_check
    runs.append(("window", run_window(workload, windowed, None, audit=audit, draw=draw())))
    figures = run_window(workload, windowed, None, audit=audit, draw=draw(), rule=True)
    runs.append(("window + certainty rule", figures))
    for error_s in errors:
        late = LateSettings(late_size, error_s, args.reapply)
        figures = run_window(workload, windowed, late, audit=audit, draw=draw())
        runs.append((f"+ late, E {error_s:g} s", figures))
    if args.oracle:
        late = LateSettings(late_size, errors[-1], args.reapply)
        figures = run_window(workload, windowed, late, audit=True, oracle=True, draw=draw())
        runs.append((f"+ late, E {errors[-1]:g} s + laxity oracle", figures))
    if args.whole_book:
        late = LateSettings(late_size, errors[-1], args.reapply)
        figures = run_window(
            workload, windowed, late, audit=True, oracle=True, draw=draw(), whole_book=True
        )
        runs.append((f"+ late, E {errors[-1]:g} s + laxity oracle + whole book", figures))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.window_late", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="300 schedules, 6 slots")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schedules", type=int, help="the fleet's size (with --slots)")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--share", type=float, default=0.05, help="the window, of the fleet")
    parser.add_argument(
        "--late-share", type=float, default=0.05, help="the late slice, of the fleet"
    )
    parser.add_argument("--horizon", type=float, default=3600.0, help="seconds ahead")
    parser.add_argument(
        "--errors", type=float, nargs="+", default=[60.0], help="E (s); the horizon is added"
    )
    parser.add_argument("--mixes", nargs="+", default=["synthetic", "realistic"])
    parser.add_argument("--labels", nargs="*", help="only these fleets")
    parser.add_argument("--no-check", action="store_true", help="no shadow index of the fleet")
    parser.add_argument(
        "--draw",
        choices=("stream", "keyed"),
        default="stream",
        help="run times from one stream (the simulator's default) or keyed per run",
    )
    parser.add_argument(
        "--no-lookahead", action="store_true", help="beat's order without the look-ahead"
    )
    parser.add_argument(
        "--oracle", action="store_true", help="add a run that is given the fleet's top"
    )
    parser.add_argument(
        "--whole-book",
        action="store_true",
        help="add a run given the fleet's top whose demand book holds the whole fleet",
    )
    parser.add_argument(
        "--reapply", action="store_true", help="a late start-over applies held rows again"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    order = OrderPolicy(lookahead=not args.no_lookahead)
    errors = sorted({*args.errors, args.horizon})
    lines = []
    for mix in args.mixes:
        size = None if args.schedules is None else (args.schedules, args.slots)
        for scenario in scenarios(args.quick, args.seed, size=size):
            if args.labels and scenario.label not in args.labels:
                continue
            workload = workload_of(scenario, mix)
            n = len(workload.schedules)
            size, late_size = max(1, round(n * args.share)), max(2, round(n * args.late_share))
            windowed = replace(order, window_size=size, window_s=args.horizon)
            fleet = f"{mix} {scenario.label}, window {size}, late {late_size}"

            runs = fleet_runs(workload, windowed, late_size, errors, args)
            for run, figures in runs:
                text = row(fleet, run, runs[0][1].error_s, figures)
                log(text)
                lines.append(text)
    print(HEADER)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
