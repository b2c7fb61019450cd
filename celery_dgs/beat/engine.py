"""The beat's decision loop, free of Celery: refresh, admit, place, dispatch.

Each :meth:`BeatEngine.tick`:

1. applies the schedule rows that changed in the store since the last look
   (``changes_since(cursor)``), at most every ``store_poll_interval``;
2. if anything is eligible (or busy schedules wait to be released), reads the
   live state from Redis: running leases, pending dispatches, live workers;
   takes back dispatches older than ``dispatch_timeout``;
3. computes the free slots per worker (slots - running leases - pending
   dispatches) and pops, in ``should_start_by`` order, as many placeable
   schedules as there are free slots (:func:`~celery_dgs.core.placement.plan_dispatches`);
4. writes the dispatch records (one pipeline), then publishes the messages;
5. returns how long to sleep: until the earliest ``can_start_by``, capped.

With a :class:`~celery_dgs.beat.leader.BeatLeadership` (every real beat has
one), step 0 is the leader check: a standby only keeps its index warm (step 1)
and sleeps ``standby_interval``; a beat that just became leader first adopts
the dispatch records in Redis (the previous leader's pending dispatches are
waited for, never re-dispatched); the dispatch records of step 4 are fenced by
the leader token, and a refused write publishes nothing.

A schedule is in exactly one of: the index (may be dispatched), ``parked``
(running or dispatched: re-inserted once the lease or dispatch is gone),
``self.held`` (paused/inactive/invalid: not schedulable). Error paths keep this
rule: a round that fails part-way (Redis or the store down) re-indexes what it
took out before re-raising, so nothing is lost until its store row changes.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from ..core.clock import Clock
from ..core.cron_cache import CronFireCache
from ..core.index import DeadlineIndex
from ..core.laxity import margin_seconds
from ..core.lookahead import DemandBook
from ..core.overload import RUN_REQUEST_PRIORITY_S, expected_seconds
from ..core.placement import Constraints, Placement, WorkerSlots, choose_dispatches
from ..core.priority import demand_exceeds
from ..core.ranking import RankingSources, build_index
from ..core.spec_values import AD_HOC_PRIORITY, DEFAULT_PRIORITY
from ..core.timing import start_times
from ..dispatches import DispatchBackend
from ..failures import log_failure
from ..leases.base import BeatViewSource, LeaseBackend
from ..leases.types import BeatView
from ..registry import RegistryBackend
from ..settings import DgsSettings
from ..store.base import ScheduleStore
from ..store.records import StoredSchedule
from .leader import BeatLeadership, Role
from .lookahead import BeatLookahead, note_demand
from .reaper import RunReaper
from .sending import DispatchSending
from .stalled import StalledWorkers
from .types import ANY_WORKER, DispatchOrder, Pending, Publisher, Tracked

__all__ = [
    "ANY_WORKER",
    "BeatEngine",
    "DispatchOrder",
    "Pending",
    "Publisher",
    "Tracked",
]

logger = logging.getLogger("celery_dgs.beat")


@dataclass(slots=True)
class _IndexBatch:
    """Start times computed during :meth:`BeatEngine.load`, indexed at its end."""

    now: datetime
    retry_ladder: tuple[timedelta, ...]
    entries: list[tuple[str, float, float]] = field(default_factory=list)
    cron_times: CronFireCache = field(default_factory=CronFireCache)


class BeatEngine(DispatchSending):
    #: A load of this many schedules or more ends with ``gc.freeze()`` (see :meth:`load`).
    gc_freeze_rows = 100_000

    def __init__(
        self,
        *,
        store: ScheduleStore,
        leases: LeaseBackend,
        registry: RegistryBackend,
        dispatches: DispatchBackend,
        publish: Publisher,
        settings: DgsSettings,
        clock: Clock,
        default_queue: str = "celery",
        max_interval: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
        leadership: BeatLeadership | None = None,
    ) -> None:
        self.store = store
        self.leases = leases
        self.registry = registry
        self.dispatches = dispatches
        self.publish = publish
        self.settings = settings
        self.clock = clock
        self.default_queue = default_queue
        self.max_interval = max_interval
        self.monotonic = monotonic
        #: ``None``: dispatch unconditionally (tests, benchmarks, a single beat tool).
        self.leadership = leadership
        # Due work by priority class with the elevator while capacity is short
        # (a due schedule waited half an elevator interval, or the schedules'
        # demand exceeds the live workers' slots, or either held within the
        # last interval); the top class's work then counts as due 1.5 margins early.
        self.index: DeadlineIndex = build_index(
            settings.order_policy,
            RankingSources(
                expected_s=lambda n: expected_seconds(self.tracked.get(n)),
                margin_s=self._margin_s,
                priority_of=self._priority_of,
                overloaded=self._overloaded,
            ),
        )
        #: The schedulable schedules' shares of a slot, kept at load and refresh
        #: once built: at load with the look-ahead, else the first time the
        #: classes ask (a fleet with one class never does).
        self.demand: DemandBook | None = DemandBook() if settings.lookahead else None
        #: The live workers' slots (``dgs_capacity`` without a registered
        #: worker) as of the last dispatch round's placement; None before it
        #: and while standing by.
        self.live_slots: int | None = None
        self.tracked: dict[str, Tracked] = {}
        #: Look-ahead admission (``dgs_lookahead``) over the demand book.
        self.lookahead = BeatLookahead(self.demand) if self.demand is not None else None
        #: Active schedules whose stored row beat cannot schedule (an invalid
        #: spec or statistics): name -> why. Not in ``tracked``; the metrics
        #: report them in ERROR, as ``status`` does.
        self.unschedulable: dict[str, str] = {}
        self.parked: set[str] = set()
        #: ``should_start_by`` of the most urgent eligible schedule after the last
        #: tick (``None``: none, or standing by). Set on beat's thread: the
        #: metrics endpoint reads it instead of the index, which it must not touch
        #: from its own thread (a peek moves items between heaps).
        self.most_urgent_should_start_by: float | None = None
        self.held: set[str] = set()
        self.pending: dict[str, Pending] = {}
        self.cursor = 0
        self._last_poll = float("-inf")
        self._last_prune = float("-inf")
        self.dispatched_total = 0
        #: When the last tick completed (``monotonic``); ``None``: none yet.
        self.last_tick: float | None = None
        #: Whether the dispatch index is known to hold exactly ``pending``'s
        #: schedules (then a round reads only its size, see :meth:`_read_state`).
        self._dispatch_index_exact = False
        #: Workers that stopped pinging a lease: no new dispatches to them.
        self.stalled = StalledWorkers()
        #: Reads each round's lease/dispatch state; keeps the owners between changes.
        self.lease_view: BeatViewSource = leases.beat_view_reader()
        #: Worker slots (total, free) before this tick's dispatches, for metrics.
        #: Called with each dispatch's lateness (seconds past should_start_by).
        self.on_dispatch: Callable[[float], None] | None = None
        #: Read the store again right after the next round's lease snapshot (set by
        #: :meth:`load` and on election): runs that ended before the snapshot are
        #: then seen with their outcome, not as due schedules with stale stats.
        self._refresh_after_read = True
        #: Ends as ``lost`` the running rows nobody is left to end (leader only).
        #: Deferred checks held (in the index, parked or held): beat's window.
        self.checks: set[str] = set()
        #: The window's end, as (check time, name): every pending check at or
        #: before it is held (name ``None``: every one at or before the time).
        #: ``None``: no check read yet.
        self.check_window_end: tuple[datetime, str | None] | None = None
        #: Whether the last window read stopped at ``check_window_size``.
        self._check_window_full = False
        self.reaper = RunReaper(
            store,
            leases,
            clock,
            grace_s=settings.ping_timeout + settings.steal_delay,
            interval_s=settings.reap_interval,
            batch_size=settings.reap_batch_size,
            monotonic=monotonic,
        )

    # -- loading -----------------------------------------------------------------
    def load(self) -> None:
        """Load every active schedule and the dispatches a previous beat left pending.

        Rows are streamed from the store (``iter_active``) and their start times
        computed at one ``now`` with one retry ladder and one
        :class:`~celery_dgs.core.cron_cache.CronFireCache`; the index is built
        once at the end (``upsert_many``: one heapify instead of a push per row).
        The cyclic GC is paused meanwhile: the load allocates millions of
        objects and almost no cycles, and each collection would walk all of them.
        After a load of ``gc_freeze_rows`` schedules or more, everything alive is
        moved to the GC's permanent generation (``gc.freeze()``), so no later
        collection walks it (its objects are still freed when unreferenced).
        """
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self.cursor, rows = self.store.iter_active()
            batch = _IndexBatch(self.clock.now(), self.settings.retry_ladder)
            count = 0
            for row in rows:
                count += 1
                if not self._load_plain_row(row, batch):
                    self._apply_row_safely(row, batch)
                self._note_demand(row.name)
            self.index.upsert_many(batch.entries)
            if count >= self.gc_freeze_rows:
                # Move what was loaded out of the cyclic GC's reach: each of its
                # generations would otherwise walk all of it once more, a pause of
                # seconds in a later tick (a change poll) at a million schedules.
                gc.freeze()
        finally:
            if gc_was_enabled:
                gc.enable()
        self._last_poll = self.monotonic()
        self._refresh_after_read = True
        self.read_check_window()
        self.adopt_pending()
        logger.info(
            "celery-dgs beat: loaded %d schedules and %d deferred checks (cursor %d)",
            count,
            len(self.checks),
            self.cursor,
        )

    def _load_plain_row(self, row: StoredSchedule, batch: _IndexBatch) -> bool:
        """:meth:`_apply_row` of the common row at start-up, inlined: active,
        valid, not paused, disabled, asked to run or parked. False (nothing
        done) for any other row, and for one whose start times raise: the
        caller then applies it the usual way (which logs and holds it)."""
        name = row.name
        spec = row.spec
        if (
            spec is None
            or not row.active
            or row.paused
            or row.disabled_reason is not None
            or row.run_requested_at is not None
            or name in self.parked
        ):
            return False
        stats = row.stats
        try:
            times = start_times(
                spec, stats, batch.now, retry_ladder=batch.retry_ladder, cron_times=batch.cron_times
            )
        except Exception:
            return False
        if self.unschedulable:
            self.unschedulable.pop(name, None)
        if self.held:
            self.held.discard(name)
        self.tracked[name] = Tracked(
            spec, stats, None, row.declaration_error, None, row.run_requested_priority
        )
        batch.entries.append(
            (name, times.can_start_by.timestamp(), times.should_start_by.timestamp())
        )
        return True

    def adopt_pending(self) -> None:
        """Park every schedule with a dispatch record in Redis (written by this or a
        previous leader) until it starts or is taken back after dispatch_timeout."""
        self.pending.clear()
        mono = self.monotonic()
        names = self.dispatches.pending_names()
        for name in names:
            record = self.dispatches.current(name)
            if record is not None and name in self.tracked:
                self.index.remove(name)
                self.parked.add(name)
                self.pending[name] = Pending(record.dispatch_id, record.worker, mono)
        self._dispatch_index_exact = names == self.pending.keys()

    def _apply_row_safely(self, row: StoredSchedule, batch: _IndexBatch | None = None) -> None:
        """:meth:`_apply_row`; a row it cannot apply is logged and held (the cursor
        has moved past it: raising would skip the rest of the batch for good)."""
        try:
            self._apply_row(row, batch)
        except Exception:
            logger.exception(
                "celery-dgs: schedule %r: cannot apply its stored row; held until the row changes",
                row.name,
            )
            self.index.remove(row.name)
            self.parked.discard(row.name)
            self.held.add(row.name)

    def _apply_row(self, row: StoredSchedule, batch: _IndexBatch | None = None) -> None:
        name = row.name
        if row.kind == "check" and row.active and not self._in_check_window(row):
            self._drop_check(row)
            return
        if not row.active or row.spec is None:
            self.checks.discard(name)
            if row.active:
                logger.error("celery-dgs: schedule %r is not schedulable: %s", name, row.spec_error)
                self.unschedulable[name] = row.spec_error or "invalid stored spec"
            else:
                self.unschedulable.pop(name, None)
            self.index.remove(name)
            self.parked.discard(name)
            self.held.discard(name)
            self.tracked.pop(name, None)
            return
        self.unschedulable.pop(name, None)
        if row.kind == "check":
            self.checks.add(name)
        self.tracked[name] = Tracked(
            row.spec,
            row.stats,
            row.run_requested_at,
            row.declaration_error,
            row.disabled_reason,
            row.run_requested_priority,
        )
        if row.paused or row.disabled_reason is not None:  # disabled: an adaptive one
            self.index.remove(name)
            self.held.add(name)
            return
        self.held.discard(name)
        if name not in self.parked:
            self._reindex(name, batch)

    # -- deferred checks: the window -------------------------------------------------
    def _in_check_window(self, row: StoredSchedule) -> bool:
        """Whether the pending check ``row`` is due by the window's end (or asked to run)."""
        end = self.check_window_end
        at = row.stats.next_target_at
        if row.run_requested_at is not None or at is None:
            return True
        return end is not None and at <= end[0]

    def _drop_check(self, row: StoredSchedule) -> None:
        """Forget a pending check that moved past the window; the window read
        brings it back when it is due. A parked one (running or dispatched)
        keeps its new row until it is freed."""
        name = row.name
        if name in self.parked:
            self.tracked[name] = (
                Tracked(
                    row.spec,
                    row.stats,
                    row.run_requested_at,
                    row.declaration_error,
                    row.disabled_reason,
                    row.run_requested_priority,
                )
                if row.spec is not None
                else self.tracked[name]
            )
            return
        self.index.remove(name)
        self.held.discard(name)
        self.tracked.pop(name, None)
        self.unschedulable.pop(name, None)
        self.checks.discard(name)

    def read_check_window(self) -> int:
        """Read the next pending checks from the store if the window needs them:
        when its end is less than half of ``check_window`` ahead, or (after a
        read that stopped at ``check_window_size``) when fewer than half that
        many are held. Reads up to ``now + check_window``, earliest first, at
        most enough to hold ``check_window_size``. Returns how many rows it read."""
        settings = self.settings
        size, ahead = settings.check_window_size, timedelta(seconds=settings.check_window)
        now = self.clock.now()
        end = self.check_window_end
        held = len(self.checks)
        if self._check_window_full:
            if held > size // 2:
                return 0
        elif end is not None and end[0] >= now + ahead / 2:
            return 0
        limit = size - held
        if limit <= 0:
            return 0
        until = now + ahead
        after = None if end is None else (end[0], end[1] or "")
        rows = self.store.due_checks(after, until, limit)
        if len(rows) >= limit:
            last = rows[-1]
            assert last.stats.next_target_at is not None
            self.check_window_end = (last.stats.next_target_at, last.name)
            self._check_window_full = True
        else:
            self.check_window_end = (max(until, end[0]) if end is not None else until, None)
            self._check_window_full = False
        for row in rows:
            self._apply_row_safely(row)
        return len(rows)

    def _margin_s(self, name: str) -> float:
        return margin_seconds(self.tracked.get(name))

    def _priority_of(self, name: str) -> int:
        """The class ``name`` is indexed in: its spec's priority, or its run
        request's (an operator's ad-hoc run: 0 unless asked otherwise)."""
        tracked = self.tracked.get(name)
        if tracked is None:
            return DEFAULT_PRIORITY
        if tracked.run_requested_at is not None:
            priority = tracked.run_requested_priority
            return AD_HOC_PRIORITY if priority is None else priority
        return tracked.spec.priority

    def _reindex(self, name: str, batch: _IndexBatch | None = None) -> None:
        tracked = self.tracked[name]
        if tracked.run_requested_at is not None:
            at = tracked.run_requested_at.timestamp()
            can, should = at, at - RUN_REQUEST_PRIORITY_S
        else:
            if batch is None:
                now, ladder, cron = self.clock.now(), self.settings.retry_ladder, None
            else:
                now, ladder, cron = batch.now, batch.retry_ladder, batch.cron_times
            times = start_times(
                tracked.spec, tracked.stats, now, retry_ladder=ladder, cron_times=cron
            )
            can, should = times.can_start_by.timestamp(), times.should_start_by.timestamp()
        if batch is None:
            self.index.upsert(name, can, should)
        else:
            batch.entries.append((name, can, should))

    def _note_demand(self, name: str) -> None:
        """Keep ``name``'s share in the demand book once it is built (and the
        look-ahead's queue)."""
        if self.demand is None:
            return
        tracked, held = self.tracked.get(name), name in self.held
        note_demand(self.demand, name, tracked, held)
        if self.lookahead is not None:
            self.lookahead.note(name, tracked, held)

    def _overloaded(self) -> bool:
        """The priority classes' overload signal: the schedules' demand
        exceeds the live workers' slots (the book is built on the first call
        that has them: one pass over the tracked schedules)."""
        if not self.live_slots:
            return False
        if self.demand is None:
            self.demand = DemandBook()
            for name, tracked in self.tracked.items():
                note_demand(self.demand, name, tracked, name in self.held)
        return demand_exceeds(self.demand.total(), self.live_slots)

    def refresh(self) -> int:
        """Apply store changes since the cursor (deferred checks: those ever due
        within the window); returns how many rows changed."""
        end = self.check_window_end
        until = _NO_CHECK_YET if end is None else end[0]
        rows, self.cursor = self.store.changes_since(self.cursor, check_until=until)
        for row in rows:
            self._apply_row_safely(row)
            self._note_demand(row.name)
        self._last_poll = self.monotonic()
        return len(rows)

    # -- the tick ------------------------------------------------------------------
    def tick(self) -> float:
        """One round; returns how long to sleep. Records when it completed
        (``last_tick``, monotonic) for the health endpoint: a tick that raised
        does not count."""
        sleep = self._tick()
        self.last_tick = self.monotonic()
        return sleep

    def _tick(self) -> float:
        mono = self.monotonic()
        leadership = self.leadership
        role = leadership.check() if leadership is not None else Role.LEADER
        if mono - self._last_poll >= self.settings.store_poll_interval:
            self.refresh()
        self.read_check_window()
        if leadership is not None and role is Role.STANDBY:
            self.most_urgent_should_start_by = None
            self.live_slots = None  # known again at this beat's next placement as leader
            return leadership.standby_interval
        if role is Role.ELECTED:
            self.live_slots = None
            self.adopt_pending()
            self._refresh_after_read = True  # a standby's stats may be a poll old
        now = self.clock.now().timestamp()
        if self.index.peek(now) is not None or self.parked:
            self._dispatch_round(now)
        self._maybe_prune(mono)
        self.reaper.maybe_reap()
        top = self.index.peek(now)
        self.most_urgent_should_start_by = None if top is None else self._should_start_by(top)
        wake = self.index.next_wakeup()
        sleep = self.max_interval if wake is None else max(0.0, wake - now)
        if self.parked:
            sleep = min(sleep, self.settings.store_poll_interval)
        if self.leadership is not None:
            sleep = min(sleep, self.leadership.renew_interval)
        return min(sleep, self.max_interval, self.settings.store_poll_interval * 5)

    def _read_state(self) -> BeatView:
        """The round's lease and dispatch reads, one :meth:`BeatViewSource.read`
        (with Redis, one ``beat_view.lua`` call: sweep, running leases per worker,
        stale owners; every owner only when the lease generation changed). The
        dispatch index's names are read only if its size is not
        ``len(self.pending)`` while the index is known to hold exactly ``pending``."""
        expected = len(self.pending) if self._dispatch_index_exact else None
        return self.lease_view.read(expected_dispatches=expected)

    def _dispatch_round(self, now: float) -> None:
        mono = self.monotonic()
        state = self._read_state()
        refreshed = self._refresh_after_read
        if refreshed:
            # A worker writes its outcome before releasing its lease: any run whose
            # lease this snapshot no longer shows has its outcome in the store now.
            self.refresh()
            self._refresh_after_read = False
        running, running_by_worker = state.running, state.running_by_worker
        still_pending = state.dispatch_names  # None: the index still holds exactly `pending`
        pending = self.pending
        if still_pending is not None:
            for name in [n for n in pending if n not in still_pending]:
                del pending[name]  # started (the worker consumed the record) or gone
        taken_back = self._take_back_expired(mono)
        if still_pending is not None:
            self._dispatch_index_exact = still_pending - taken_back == pending.keys()
        freed = [name for name in self.parked if name not in running and name not in pending]
        if freed:
            # Workers write the outcome to the store before releasing the lease:
            # read it now, or the schedule would be re-indexed with stale stats.
            # Refresh first: if it raises, the freed schedules are still parked and
            # are freed again next round (un-parking first would lose them). A
            # refresh made after this round's snapshot already covers them.
            if not refreshed:
                self.refresh()
            self.parked.difference_update(freed)
            for name in freed:
                if name in self.tracked and name not in self.held:
                    self._reindex(name)
        placement = self._placement(running_by_worker, state.stale_workers)
        if placement.free <= 0:
            return

        def constraints_of(name: str) -> Constraints:
            spec = self.tracked[name].spec
            return Constraints(pool=spec.pool, excluded_nodes=spec.dont_run_on_nodes)

        # The chosen schedules have left the index: their should_start_by (for the
        # dispatch's lateness) is the one re-computed when they were confirmed due.
        should_by: dict[str, float] = {}
        admission = (
            None
            if self.lookahead is None
            else self.lookahead.round(
                now,
                placement.free,
                self.tracked,
                [*running, *(n for n in pending if n not in running)],
            )
        )

        def defer(name: str) -> bool:
            if name in running or name in pending:  # running or already dispatched: park it
                self.parked.add(name)
                return True
            should = self._due_should_start_by(name, now)  # e.g. its blackout began
            if should is None:
                return True
            if admission is not None and BeatLookahead.hold(
                admission, self.index, name, self.tracked[name], should
            ):
                return True  # held back: re-indexed, eligible again when looked at next
            should_by[name] = should
            return False

        chosen = choose_dispatches(
            self.index,
            now,
            placement,
            constraints_of,
            defer,
            limit=self.settings.max_dispatches_per_tick,
        )
        orders = [self._order(name, worker, should_by[name]) for name, worker in chosen]
        if orders:
            self._send(orders, now)

    def _take_back_expired(self, mono: float) -> set[str]:
        """Take back the dispatches not started within dispatch_timeout; returns the
        schedules whose record was removed. ``pending`` is in dispatch order (``since``
        never decreases), so the scan stops at the first one still in time."""
        timeout = self.settings.dispatch_timeout
        expired = []
        for name, pend in self.pending.items():
            if mono - pend.since <= timeout:
                break
            expired.append((name, pend))
        taken_back: set[str] = set()
        for name, pend in expired:
            try:
                took = self.dispatches.take_back(name, pend.dispatch_id)
            except BaseException:  # Redis down: still pending, taken back next round
                self._dispatch_index_exact = False
                raise
            del self.pending[name]
            if took:
                taken_back.add(name)
                logger.warning(
                    "celery-dgs: dispatch %s of %r to %s not started within %.0fs; taken back",
                    pend.dispatch_id,
                    name,
                    pend.worker,
                    timeout,
                )
            else:  # started unseen, or replaced: the index is not known any more
                self._dispatch_index_exact = False
        return taken_back

    def _due_should_start_by(self, name: str, now: float) -> float | None:
        """Re-check a chosen schedule's start times at ``now``: the index holds times
        computed earlier, and whether ``now`` is inside a blackout window changes
        with time. If it may not start yet, re-inserts it and returns None;
        otherwise returns its ``should_start_by`` (a run request's too: the
        index orders those by a priority key, not by their real time)."""
        tracked = self.tracked[name]
        times = start_times(
            tracked.spec, tracked.stats, self.clock.now(), retry_ladder=self.settings.retry_ladder
        )
        should = times.should_start_by.timestamp()
        if tracked.run_requested_at is not None or times.can_start_by.timestamp() <= now:
            return should
        self.index.upsert(name, times.can_start_by.timestamp(), should)
        return None

    def _should_start_by(self, name: str) -> float | None:
        """The indexed schedule's ``should_start_by``; a run request's real one
        (the index holds it at a priority key far in the past)."""
        times = self.index.times(name)
        if times is None:
            return None
        tracked = self.tracked.get(name)
        if tracked is None or tracked.run_requested_at is None:
            return times.should_start_by
        real = start_times(
            tracked.spec, tracked.stats, self.clock.now(), retry_ladder=self.settings.retry_ladder
        )
        return real.should_start_by.timestamp()

    def _placement(
        self, running_by_worker: dict[str, int], stale_workers: Mapping[str, datetime]
    ) -> Placement:
        workers = self.stalled.placeable(
            self.registry.live_workers(),
            stale_workers,
            ping_timeout=timedelta(milliseconds=self.leases.ping_timeout_ms),
            worker_ttl=timedelta(milliseconds=self.registry.ttl_ms),
        )
        pending_by_worker = Counter(pend.worker for pend in self.pending.values())
        if not workers and not self.stalled and self.settings.capacity:
            self.live_slots = self.settings.capacity
            used = sum(running_by_worker.values()) + len(self.pending)
            return Placement(
                [WorkerSlots(ANY_WORKER, "", _AllQueues(), self.settings.capacity - used)],
                self.default_queue,
            )
        self.live_slots = sum(w.slots for w in workers)
        slots = [
            WorkerSlots(
                w.name,
                w.node,
                frozenset(w.queues),
                w.slots - running_by_worker.get(w.name, 0) - pending_by_worker.get(w.name, 0),
            )
            for w in workers
        ]
        return Placement(slots, self.default_queue)

    def _maybe_prune(self, mono: float) -> None:
        """Hourly: delete the run history older than ``dgs_run_retention`` and
        the ended deferred checks older than ``dgs_check_retention``."""
        if mono - self._last_prune < 3600:
            return
        self._last_prune = mono
        settings = self.settings
        self._prune("runs", self.store.prune_runs, settings.run_retention)
        self._prune("deferred checks", self.store.prune_checks, settings.check_retention)

    def _prune(self, what: str, prune: Callable[..., int], retention_s: float) -> None:
        cutoff = self.clock.now() - timedelta(seconds=retention_s)
        try:
            removed = prune(cutoff, batch_size=self.settings.prune_batch_size)
        except Exception as exc:
            log_failure(logger, exc, "celery-dgs: pruning %s failed", what)
            return
        if removed:
            logger.info("celery-dgs: pruned %d %s that ended before %s", removed, what, cutoff)


#: The change poll's check window before any check was read: none is held.
_NO_CHECK_YET = datetime(1970, 1, 1, tzinfo=timezone.utc)


class _AllQueues(frozenset[str]):
    """A queue set that contains every queue (fixed-capacity mode)."""

    def __contains__(self, item: object) -> bool:
        return True
