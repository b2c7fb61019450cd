"""A supervised run's bookkeeping: the token floor it reads, the end it
records (then the release of its lease), the skips, and a check's stored state.

Store calls are retried with a doubling back-off (:func:`retried`); an end is
dated by Redis time, else the local clock, and its duration is read on the
run's monotonic :class:`RunClock`. Failures of the end and of a skip are
logged, never raised: they do not change the task's own result. After a
failing end, the worker's retry settings are compared with beat's
(:func:`~celery_dgs.worker.retry_settings.check_after_failure`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from ..core.checks import CheckInfo
from ..core.items import ItemCounts
from ..core.run_end import FAILURE_OUTCOMES
from ..core.spec import CheckSpec, ScheduleSpec
from ..errors import DgsError, MalformedDataError, StaleTokenError, UnknownScheduleError
from ..failures import failure_summary, log_failure
from ..outcome_spool import SpooledOutcome
from ..runtime import Runtime
from .retry_settings import check_after_failure

logger = logging.getLogger("celery_dgs.worker")

STORE_WRITE_ATTEMPTS = 5
#: The longest wait between two attempts at writing a run's outcome.
OUTCOME_RETRY_MAX_DELAY_S = 5.0


class RunClock:
    """A run's start: the grant's Redis time and this worker's monotonic clock
    then. Durations are read on the monotonic clock, which wall-clock steps
    (on the worker or on the Redis server) do not move."""

    def __init__(
        self,
        started_at: datetime,
        started_mono: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.started_at = started_at
        self.started_mono = started_mono
        self._monotonic = monotonic

    def elapsed(self) -> float:
        """Seconds since the start (never negative)."""
        return max(self._monotonic() - self.started_mono, 0.0)


def retried(
    what: str,
    fn: Callable[[], Any],
    attempts: int | None = STORE_WRITE_ATTEMPTS,
    give_up_at: float | None = None,
    *,
    max_delay: float = float("inf"),
    between: Callable[[], None] | None = None,
) -> Any:
    """``fn()``, retried with a doubling back-off (at most ``max_delay``
    between attempts; ``between()`` is called before each wait); no retry
    would start after the monotonic time ``give_up_at`` (the last error is
    raised instead). ``attempts``: at most that many (``None``: until
    ``give_up_at``)."""
    delay = 0.2
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except DgsError:
            raise  # a definite answer (unknown schedule, stale token): retrying cannot help
        except Exception as exc:
            late = give_up_at is not None and time.monotonic() + delay >= give_up_at
            if attempt == attempts or late:
                log_failure(logger, exc, "celery-dgs: %s failed after %d attempts", what, attempt)
                raise
            logger.warning("celery-dgs: %s failed (attempt %d); retrying", what, attempt)
            if between is not None:
                between()
            time.sleep(delay)
            delay = min(delay * 2, max_delay)


def token_floor(rt: Runtime, spec: ScheduleSpec) -> int:
    schedule = spec.name
    try:
        return int(
            retried(
                f"reading the token floor of {schedule}", lambda: rt.store.token_floor(schedule)
            )
        )
    except UnknownScheduleError:
        _store_declared(rt, spec)
    return int(
        retried(f"reading the token floor of {schedule}", lambda: rt.store.token_floor(schedule))
    )


def _store_declared(rt: Runtime, spec: ScheduleSpec) -> None:
    """The schedule is declared in this app but not stored: beat has not synced
    since it was added (or ``task.delay()`` came first). Store it as the next
    sync would (``insert_if_missing``: never touches a stored row), so the run
    and its record happen as usual."""
    now = rt.leases.now()
    if retried(f"storing {spec.name}", lambda: rt.store.insert_if_missing(spec, now)):
        logger.warning(
            "celery-dgs: schedule %s was not in the store (beat has not synced the "
            "declarations since it was added; `celery dgs sync` does it): stored it from "
            "this worker's declarations",
            spec.name,
        )


def check_info(rt: Runtime, spec: CheckSpec) -> CheckInfo | None:
    """The running check's stored state, for :func:`celery_dgs.current_check`
    (None, logged, if the store cannot be read: the check still runs)."""
    try:
        row = rt.store.get(spec.name)
    except Exception as exc:
        log_failure(logger, exc, "celery-dgs: reading the state of check %s failed", spec.name)
        return None
    return CheckInfo(
        task=spec.task,
        key=spec.key,
        first_check_at=row.first_check_at,
        check_count=row.check_count or 0,
        due_at=row.stats.next_target_at,
    )


def redis_now_or_local(rt: Runtime) -> datetime:
    """Redis time, the clock of every lease; the local clock when Redis is unreachable."""
    try:
        return rt.leases.now()
    except Exception:
        return datetime.now(timezone.utc)


def release_quietly(rt: Runtime, schedule: str, run_id: str) -> None:
    """Release the lease; a Redis error is logged (the lease then expires)."""
    try:
        rt.leases.release(schedule, run_id)
    except Exception as exc:
        log_failure(
            logger,
            exc,
            "celery-dgs: releasing the lease of %s failed; it expires after ping_timeout",
            schedule,
        )


def finish_run(
    rt: Runtime,
    schedule: str,
    run_id: str,
    outcome: str,
    error: str | None,
    progress: float | None = None,
    attempts: int | None = STORE_WRITE_ATTEMPTS,
    ended_at: datetime | None = None,
    clock: RunClock | None = None,
    eventful: bool | None = None,
    verdict: object = None,
    items: ItemCounts | None = None,
) -> None:
    """Record the run's end and release its lease. The outcome's write is
    tried ``attempts`` times; ``None`` (a body that has returned): retried
    for up to ``dgs_ping_timeout`` (a database restarting), the lease pinged
    meanwhile so that it stays this run's and its slot busy. ``ended_at``:
    the end as estimated by the caller (a self-fenced run passes the grant's Redis time
    plus the monotonic time since: Redis is presumed unreachable and the local
    wall clock may have jumped); otherwise Redis's clock, or the local one.

    ``clock``: the run's duration is measured on it (monotonic), not as the
    difference of two wall-clock readings; an end read before the start (the
    clock stepped back) is replaced by the start plus that duration."""
    # A self-fenced owner presumes Redis unreachable: the lease is left to
    # expire (a release could hang until the socket timeout and would only
    # free the lease a little earlier).
    duration = clock.elapsed() if clock is not None else None
    if ended_at is None:
        ended_at = redis_now_or_local(rt)
    if clock is not None and duration is not None and ended_at < clock.started_at:
        ended_at = clock.started_at + timedelta(seconds=duration)
    give_up_at = None if attempts is not None else time.monotonic() + rt.settings.ping_timeout
    try:
        retried(
            f"recording the end of {schedule}",
            lambda: rt.store.record_run_end(
                run_id=run_id,
                outcome=outcome,
                ended_at=ended_at,
                error=error,
                progress=progress,
                alpha=rt.settings.ewma_alpha,
                duration_s=duration,
                eventful=eventful,
                verdict=verdict,
                items=items,
            ),
            attempts=attempts,
            give_up_at=give_up_at,
            max_delay=min(OUTCOME_RETRY_MAX_DELAY_S, rt.settings.ping_interval),
            between=None if attempts is not None else _pinger(rt, schedule, run_id),
        )
    except StaleTokenError as exc:
        # A newer run holds the schedule: this late write is kept in the run
        # history (flagged fenced) but refused for the statistics.
        logger.warning(
            "celery-dgs: late outcome %s of run %s refused for the statistics: %s",
            outcome,
            run_id,
            exc,
        )
    except DgsError as exc:  # a definite refusal (an unknown run): no retry helps
        log_failure(
            logger,
            exc,
            "celery-dgs: the outcome %s of run %s of %s could not be stored",
            outcome,
            run_id,
            schedule,
        )
    except Exception as exc:
        _spool(
            rt,
            SpooledOutcome(
                schedule=schedule,
                run_id=run_id,
                outcome=outcome,
                ended_at=ended_at,
                error=error,
                progress=progress,
                duration_s=duration,
                eventful=eventful,
                verdict=verdict,
                items=items,
            ),
            exc,
        )
    if outcome == "stolen":  # the lease is the new owner's; this slot is free
        rt.wake.notify()
    elif outcome != "self_fenced":
        release_lease(rt, schedule, run_id)
    _log_end(run_id, schedule, outcome, error, items)
    if outcome in FAILURE_OUTCOMES:  # its kept next start waits this worker's retry step
        check_after_failure(rt)


#: Attempts at releasing a run's lease (waits 0.2, 0.4, 0.8, 1.6 s): a Redis
#: fail-over's few seconds, after which the lease would be left to expire and
#: its schedule to wait ``ping_timeout + steal_delay``.
RELEASE_ATTEMPTS = 5


def release_lease(rt: Runtime, schedule: str, run_id: str) -> None:
    """Release the run's lease (and signal the leading beat), retried while
    Redis does not answer (:data:`RELEASE_ATTEMPTS`); logged, never raised."""
    delay = 0.2
    for attempt in range(1, RELEASE_ATTEMPTS + 1):
        try:
            rt.leases.release(schedule, run_id)
            return
        except MalformedDataError as exc:  # foreign data: retrying cannot help
            log_failure(logger, exc, "celery-dgs: releasing the lease of %s failed", schedule)
            return
        except Exception as exc:
            if attempt == RELEASE_ATTEMPTS:
                log_failure(
                    logger,
                    exc,
                    "celery-dgs: releasing the lease of %s failed after %d attempts; it "
                    "expires after dgs_ping_timeout + dgs_steal_delay",
                    schedule,
                    attempt,
                )
                return
            logger.warning(
                "celery-dgs: releasing the lease of %s failed (attempt %d); retrying",
                schedule,
                attempt,
            )
            time.sleep(delay)
            delay *= 2


def _spool(rt: Runtime, entry: SpooledOutcome, exc: Exception) -> None:
    """Keep an outcome the store did not take in Redis for the leading beat
    to store; logged, and an ERROR only if Redis does not take it either."""
    try:
        waiting = rt.outcome_spool.put(entry)
    except Exception as spool_exc:
        log_failure(
            logger,
            exc,
            "celery-dgs: the outcome %s of run %s of %s could not be stored, nor kept in "
            "Redis (%s): it is lost",
            entry.outcome,
            entry.run_id,
            entry.schedule,
            spool_exc,
        )
        return
    logger.warning(
        "celery-dgs: the outcome %s of run %s of %s could not be stored (%s); kept in "
        "Redis (%s, %d waiting) for the leading beat to store once the database answers",
        entry.outcome,
        entry.run_id,
        entry.schedule,
        failure_summary(exc),
        rt.outcome_spool.key,
        waiting,
    )


def _pinger(rt: Runtime, schedule: str, run_id: str) -> Callable[[], None]:
    """Pings the run's lease (at most once every half ``dgs_ping_interval``,
    when called between attempts) while its outcome waits for the store: the
    lease stays the run's, its slot busy.
    A failed ping is logged, never raised."""
    last = time.monotonic()

    def ping() -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < rt.settings.ping_interval / 2:
            return
        last = now
        try:
            rt.leases.ping(schedule, run_id)
        except Exception as exc:
            log_failure(logger, exc, "celery-dgs: pinging the lease of %s failed", schedule)

    return ping


def _log_end(
    run_id: str, schedule: str, outcome: str, error: str | None, items: ItemCounts | None
) -> None:
    """The INFO line of a run's end: its outcome, error and item counts."""
    logger.info(
        "celery-dgs: run %s of %s ended: %s%s%s",
        run_id,
        schedule,
        outcome,
        f" ({error})" if error else "",
        f" [{items.ok} ok, {items.failed} failed]" if items is not None else "",
    )


def record_skipped(
    rt: Runtime,
    schedule: str,
    *,
    run_id: str,
    dispatch_id: str | None,
    node: str,
    owner: str,
    reason: str,
    declared: ScheduleSpec | None = None,
) -> None:
    """Record a delivery of ``schedule`` that did not run (a skip row, dated by
    Redis time, else the local clock). With ``declared``, a schedule not stored
    yet is stored first from this worker's declaration, as ``sync`` would.
    Failures are logged in one line, never raised."""
    logger.info("celery-dgs: skipped %s on %s: %s", schedule, owner, reason)

    def record() -> None:
        at = redis_now_or_local(rt)
        rt.store.record_skip(
            schedule=schedule,
            run_id=run_id,
            dispatch_id=dispatch_id,
            owner_node=node,
            owner_name=owner,
            reason=reason,
            at=at,
        )

    try:
        try:
            record()
        except UnknownScheduleError:
            if declared is None:
                raise
            _store_declared(rt, declared)
            record()
    except Exception as exc:
        log_failure(logger, exc, "celery-dgs: could not record the skip of %s", schedule)
