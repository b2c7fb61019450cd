"""Beat's run reaper: ends, as ``lost``, the runs nobody is left to end;
beat's hourly pruning of the run and check history (:class:`HistoryPruner`);
and its fold of the condition tally every few seconds (:class:`TallyFolder`).

A run row stays ``running`` until its owner (or the worker that took its lease
over, as ``stolen``) records its end. When Redis loses its data while the owner
is dead, the next grant has no ``took_over_from`` and nobody ends the old row;
the taker's ``stolen`` write can fail too. The leader beat therefore looks, at
most every ``dgs_reap_interval`` seconds, at up to ``dgs_reap_batch_size``
running rows (paging through them by row id across looks), and ends as
``lost`` a row whose schedule has had no lease with that row's owner tag for
longer than ``ping_timeout + steal_delay``, measured on beat's monotonic clock
from the first look that found none. A run that is alive holds its lease
throughout (the worker records its start after the grant and its end before the
release), so the grace only gives an owner or a taker time to write first.

A run whose owner died holding its lease is ended by the worker that takes
the lease over (``stolen``) when beat dispatches the schedule again; a
schedule beat does not dispatch (paused, removed, blacked out) gets no
taker, and its row and lease would stay ``running``. So a look also frees,
by a taker's steal protocol (``reclaim``: a steal marked once the owner is
silent past ``ping_timeout``, the lease deleted ``steal_delay`` later), the
lease of a row whose owner went silent, and ends the row ``stolen``, as a
taker would. A resumed owner then finds no lease at its next ping and stops.

The run outcomes workers could not store (:mod:`celery_dgs.outcome_spool`)
are stored first, oldest first, at the start of a tick (before its round,
so a schedule whose outcome was kept is not dispatched again on its old
statistics): every second while none wait, at every tick while some do. No
look judges a row while any wait (the database refusing them, or more than
a tick stores), so an outcome kept in Redis ends its row, never ``lost``.
An entry the store refuses while it answers otherwise (a value it cannot
hold) is set aside in a list of its own, with an ERROR, so it cannot stop
the others.

Fenced like every run end: ``record_run_end`` stores a run whose token is no
longer the schedule's current one without touching the statistics of the newer
run (``StaleTokenError``, logged here). A late write by the owner is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from ..core.clock import Clock
from ..core.stats import DEFAULT_EWMA_ALPHA
from ..errors import MalformedDataError, StaleTokenError, UnknownRunError
from ..failures import log_failure
from ..leases.base import LeaseBackend
from ..leases.types import LeaseInfo, ReclaimStatus
from ..outcome_spool import OutcomeSpool, SpooledOutcome
from ..settings import DgsSettings
from ..store.base import ScheduleStore
from ..store.records import RunRecord

logger = logging.getLogger("celery_dgs.beat")

#: How often (seconds) beat looks for kept run outcomes while none wait.
KEPT_CHECK_INTERVAL_S = 1.0
#: Batches of ``dgs_reap_batch_size`` kept outcomes stored in one tick at most.
KEPT_BATCHES_PER_CALL = 4


class RunReaper:
    """Marks ``lost`` the running rows without their lease (see the module doc)."""

    def __init__(
        self,
        store: ScheduleStore,
        leases: LeaseBackend,
        clock: Clock,
        *,
        grace_s: float,
        ping_timeout_s: float,
        interval_s: float,
        batch_size: int,
        monotonic: Callable[[], float],
        spool: OutcomeSpool | None = None,
        alpha: float = DEFAULT_EWMA_ALPHA,
    ) -> None:
        self.store, self.leases, self.clock = store, leases, clock
        #: Outcomes workers could not store, stored here (``alpha``: the EWMA's).
        self.spool, self.alpha = spool, alpha
        #: Kept outcomes stored (or refused for good).
        self.spooled_total = 0
        #: Whether kept outcomes wait (no row is judged until none do).
        self.kept_waiting = spool is not None
        self._kept_checked = float("-inf")
        self.grace_s, self.interval_s, self.batch_size = grace_s, interval_s, batch_size
        self.ping_timeout_s = ping_timeout_s
        self.monotonic = monotonic
        self._last_look = monotonic()  # the first look waits an interval
        self._after_id = 0  # paging cursor (row id)
        #: run_id -> monotonic time of the first look that found no lease of its owner
        self._suspects: dict[str, float] = {}
        self._seen: set[str] = set()  # running rows seen during the current pass over all rows
        #: Runs ended by the looks (``lost``, and ``stolen`` from silent owners).
        self.reaped_total = 0
        #: Leases of silent owners freed (their rows ended ``stolen``).
        self.reclaimed_total = 0
        #: run_id -> why, for a freed lease whose row's end could not be written
        #: yet: ended ``stolen`` at a later look (not ``lost`` for its missing lease).
        self._freed: dict[str, str] = {}

    def maybe_reap(self) -> int:
        """One look if ``interval_s`` has passed since the last; returns how many
        runs it ended (marked lost, or stolen from a silent owner). Errors are
        logged, never raised (beat goes on)."""
        mono = self.monotonic()
        if mono - self._last_look < self.interval_s:
            return 0
        self._last_look = mono
        try:
            return self._look(mono)
        except Exception as exc:
            log_failure(logger, exc, "celery-dgs: reaping runs without a lease failed")
            return 0

    def store_kept(self) -> None:
        """Store the outcomes workers kept in Redis (see the module doc): at
        every call while some wait, else at most once a second. Errors are
        logged, never raised."""
        if self.spool is None:
            return
        mono = self.monotonic()
        if not self.kept_waiting and mono - self._kept_checked < KEPT_CHECK_INTERVAL_S:
            return
        self._kept_checked = mono
        try:
            self.kept_waiting = not self._store_spooled()
        except MalformedDataError as exc:  # unreadable data must not hold the reaper back
            self.kept_waiting = False
            logger.error("celery-dgs: the kept run outcomes cannot be read: %s", exc)
        except Exception as exc:
            self.kept_waiting = True
            log_failure(logger, exc, "celery-dgs: reading the kept run outcomes failed")

    def _look(self, mono: float) -> int:
        if self.kept_waiting:  # their rows end as they ran: judge none before
            return 0
        page: list[RunRecord] = self.store.running_runs_page(
            after_id=self._after_id, limit=self.batch_size
        )
        reaped = 0
        leases = self.leases.get_many([run.schedule for run in page])  # one round trip
        silent = self._silent_owners(page, leases)
        for run in page:
            self._seen.add(run.run_id)
            if self._has_lease(run, leases.get(run.schedule)):
                self._suspects.pop(run.run_id, None)
                if run.run_id in silent and self._reclaim(run, silent[run.run_id]):
                    reaped += 1
                continue
            if run.run_id in self._freed:  # its lease freed here: its end is stolen
                if self._end_stolen(run, self._freed[run.run_id]):
                    reaped += 1
                continue
            first = self._suspects.setdefault(run.run_id, mono)
            if mono - first > self.grace_s and self._mark_lost(run, mono - first):
                reaped += 1
        if len(page) < self.batch_size:  # a pass over every running row is complete
            self._after_id = 0
            self._suspects = {r: t for r, t in self._suspects.items() if r in self._seen}
            self._freed = {r: why for r, why in self._freed.items() if r in self._seen}
            self._seen = set()
        else:
            self._after_id = page[-1].id
        self.reaped_total += reaped
        return reaped

    def _store_spooled(self) -> bool:
        """Store the kept outcomes, a batch at a time, up to
        :data:`KEPT_BATCHES_PER_CALL` batches; True once none wait."""
        assert self.spool is not None
        for _ in range(KEPT_BATCHES_PER_CALL):
            batch = self.spool.oldest(self.batch_size)
            if not batch:
                return True
            for raw, entry in batch:
                if not self._store_one(raw, entry):
                    return False
        return not self.spool.count()

    def _store_one(self, raw: bytes, entry: SpooledOutcome | MalformedDataError) -> bool:
        """Store one kept outcome and remove it; False when the store refused
        it for now (the database away: it stays, first in line)."""
        assert self.spool is not None
        if isinstance(entry, MalformedDataError):
            logger.error("celery-dgs: dropped a kept run outcome: %s", entry)
            self.spool.remove(raw)
            return True
        try:
            self.store.record_run_end(
                run_id=entry.run_id,
                outcome=entry.outcome,
                ended_at=entry.ended_at,
                error=entry.error,
                progress=entry.progress,
                alpha=self.alpha,
                duration_s=entry.duration_s,
                eventful=entry.eventful,
                verdict=entry.verdict,
                items=entry.items,
            )
            logger.info(
                "celery-dgs: stored the outcome %s of run %s of %s, which its worker kept in Redis",
                entry.outcome,
                entry.run_id,
                entry.schedule,
            )
        except (StaleTokenError, UnknownRunError, ValueError) as exc:
            logger.warning(
                "celery-dgs: the kept outcome %s of run %s of %s: %s",
                entry.outcome,
                entry.run_id,
                entry.schedule,
                exc,
            )
        except Exception as exc:
            if not self._store_answers():
                log_failure(
                    logger,
                    exc,
                    "celery-dgs: storing the kept outcome of run %s of %s failed; retried "
                    "at the next tick",
                    entry.run_id,
                    entry.schedule,
                )
                return False
            self.spool.set_aside(raw)  # the store answers, but not for this entry
            log_failure(
                logger,
                exc,
                "celery-dgs: the store refused the kept outcome %s of run %s of %s while "
                "it answers otherwise; set aside in %s",
                entry.outcome,
                entry.run_id,
                entry.schedule,
                self.spool.refused_key,
            )
            self.spooled_total += 1
            return True
        self.spool.remove(raw)
        self.spooled_total += 1
        return True

    def _store_answers(self) -> bool:
        """Whether the store answers a read (a refusal is then the entry's)."""
        try:
            self.store.running_runs_page(after_id=0, limit=1)
        except Exception:
            return False
        return True

    def _silent_owners(
        self, page: list[RunRecord], leases: dict[str, LeaseInfo | MalformedDataError | None]
    ) -> dict[str, float]:
        """The rows of ``page`` whose own lease was last pinged more than
        ``ping_timeout`` ago, with that silence (seconds, Redis's clock: one
        read, only when there is such a lease)."""
        held = {
            run.run_id: lease.last_ping_at
            for run in page
            if run.owner_tag is not None
            and isinstance(lease := leases.get(run.schedule), LeaseInfo)
            and lease.owner_tag == run.owner_tag
        }
        if not held:
            return {}
        oldest = min(held.values())
        now = self.leases.now()
        if (now - oldest).total_seconds() <= self.ping_timeout_s:
            return {}
        silent = {r: (now - at).total_seconds() for r, at in held.items()}
        return {r: s for r, s in silent.items() if s > self.ping_timeout_s}

    def _reclaim(self, run: RunRecord, silent_s: float) -> bool:
        """Free the silent owner's lease (one step of the steal protocol a
        look); once freed, end the row ``stolen``. Whether it was ended."""
        assert run.owner_tag is not None
        if self.leases.reclaim(run.schedule, run.owner_tag) is not ReclaimStatus.RECLAIMED:
            return False
        why = (
            f"stolen: its owner {run.owner_name} was silent for {silent_s:.0f}s and no worker "
            "took the lease over (a paused, removed or blacked-out schedule is not "
            "dispatched); beat freed it"
        )
        self.reclaimed_total += 1
        self._freed[run.run_id] = why  # until its end is written (a database error: next look)
        if not self._end_stolen(run, why):
            return False
        logger.warning(
            "celery-dgs: run %s of %r (owner %s, token %s) ended stolen: its owner was "
            "silent for %.0fs and no worker took its lease over; beat freed it",
            run.run_id,
            run.schedule,
            run.owner_name,
            run.token,
            silent_s,
        )
        return True

    def _end_stolen(self, run: RunRecord, why: str) -> bool:
        """Write the freed lease's run's end, ``stolen``; whether it was
        ended (a database error raises: the look stops, the next one writes it)."""
        try:
            self.store.record_run_end(
                run_id=run.run_id, outcome="stolen", ended_at=self.clock.now(), error=why
            )
        except StaleTokenError:
            pass  # a newer run holds the schedule: its statistics are untouched
        except UnknownRunError:  # pruned meanwhile
            self._freed.pop(run.run_id, None)
            return False
        self._freed.pop(run.run_id, None)
        return True

    def _has_lease(self, run: RunRecord, lease: LeaseInfo | MalformedDataError | None) -> bool:
        if isinstance(lease, MalformedDataError):  # an operator must look: leave the run alone
            logger.error(
                "celery-dgs: run %s of %r left running: %s", run.run_id, run.schedule, lease
            )
            return True
        if lease is None:
            return False
        if run.owner_tag is None:  # a row written without an owner tag: match the token
            return bool(lease.token == run.token)
        return bool(lease.owner_tag == run.owner_tag)

    def _mark_lost(self, run: RunRecord, missing_s: float) -> bool:
        why = (
            f"lost: no lease held by owner tag {run.owner_tag!r} (token {run.token}) for "
            f"{missing_s:.0f}s; the owner and any taker left the run unrecorded"
        )
        self._suspects.pop(run.run_id, None)
        try:
            self.store.record_run_end(
                run_id=run.run_id, outcome="lost", ended_at=self.clock.now(), error=why
            )
        except StaleTokenError:
            logger.warning(
                "celery-dgs: run %s of %r (owner %s, token %s) marked lost; a newer run "
                "holds the schedule, its statistics are untouched",
                run.run_id,
                run.schedule,
                run.owner_name,
                run.token,
            )
            return True
        except UnknownRunError:  # pruned meanwhile
            return False
        logger.warning(
            "celery-dgs: run %s of %r (owner %s, token %s) marked lost: no lease of its "
            "owner for %.0fs",
            run.run_id,
            run.schedule,
            run.owner_name,
            run.token,
            missing_s,
        )
        return True


class HistoryPruner:
    """Hourly: deletes the run history older than ``dgs_run_retention`` and the
    ended deferred checks older than ``dgs_check_retention``."""

    def __init__(self, store: ScheduleStore, clock: Clock, settings: DgsSettings) -> None:
        self.store, self.clock, self.settings = store, clock, settings
        self._last_prune = float("-inf")

    def maybe_prune(self, mono: float) -> None:
        """Prune if an hour has passed since the last time (``mono``: beat's
        monotonic clock). Errors are logged, never raised."""
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


class TallyFolder:
    """Every ``interval_s`` (beat's monotonic clock): folds the steps the
    schedules' changes left into the kept counts by condition
    (:meth:`ScheduleStore.fold_condition_tally
    <celery_dgs.store.base.ScheduleStore.fold_condition_tally>`), so a read of
    the counts reads few of them. Errors are logged, never raised."""

    def __init__(self, store: ScheduleStore, clock: Clock, interval_s: float) -> None:
        self.store, self.clock, self.interval_s = store, clock, interval_s
        self._last_fold = float("-inf")

    def maybe_fold(self, mono: float) -> None:
        if mono - self._last_fold < self.interval_s:
            return
        self._last_fold = mono
        try:
            folded = self.store.fold_condition_tally(self.clock.now())
        except Exception as exc:
            log_failure(logger, exc, "celery-dgs: folding the condition tally failed")
            return
        if folded:
            logger.debug("celery-dgs: folded %d condition tally steps", folded)
