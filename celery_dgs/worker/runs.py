"""Running one scheduled task under its lease, and recording what happened.

``supervised_run`` wraps the task's own ``run``: acquire the lease (or record a
skip), record the start, run under a :class:`RunSupervisor`, record the outcome
(one store transaction with the stats), release the lease. Bookkeeping errors
are logged and never change the task's own result, except where the design
says to stop the run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from ..core.checks import CheckInfo
from ..core.spec import CheckSpec, ScheduleSpec
from ..errors import DgsError, StaleTokenError, UnknownRunError, UnknownScheduleError
from ..failures import log_failure
from ..leases.types import AcquireResult, AcquireStatus, PingResult, PingStatus
from ..runtime import Runtime
from .shutdown import SHUTDOWN_REASON, pool_process_terminating, wait_unless_leaving
from .supervisor import RunSupervisor, RunTerminated

logger = logging.getLogger("celery_dgs.worker")

STORE_WRITE_ATTEMPTS = 5
#: Acquires retried after waiting out a Redis restart grace (another restart
#: during the wait starts a new grace).
GRACE_WAITS = 3
#: Seconds past the grace's end before asking again (Redis times are in ms).
GRACE_MARGIN = 0.05


class RunInterrupted(DgsError, RuntimeError):
    """What Celery sees when celery-dgs stopped a run (stolen, cancelled,
    terminated or yielded); the message says which and why."""


class RunStoppedOnRequest(RunInterrupted):
    """The run was cancelled by an operator or yielded at the worker's shutdown:
    expected outcomes, not errors. Every scheduled task lists this class in its
    ``throws``, so Celery logs it at INFO without a traceback."""


#: Interruptions somebody asked for (:class:`RunStoppedOnRequest`).
REQUESTED_STOPS = frozenset({"cancelled", "yielded"})


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


def node_of(hostname: str) -> str:
    """``celery@scraper-3`` → ``scraper-3`` (the node of ``dont_run_on_nodes``)."""
    return hostname.split("@", 1)[1] if "@" in hostname else hostname


def _retry(
    what: str,
    fn: Callable[[], Any],
    attempts: int = STORE_WRITE_ATTEMPTS,
    give_up_at: float | None = None,
) -> Any:
    """``fn()``, retried with a doubling back-off; no retry would start after
    the monotonic time ``give_up_at`` (the last error is raised instead)."""
    delay = 0.2
    for attempt in range(1, attempts + 1):
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
            time.sleep(delay)
            delay *= 2
    return None


def supervised_run(
    rt: Runtime,
    spec: ScheduleSpec,
    request: Any,
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    schedule = spec.name
    dispatch_id = getattr(request, "dgs_dispatch_id", None)
    owner_name = str(getattr(request, "hostname", None) or socket.gethostname())
    node = node_of(owner_name)
    run_id = uuid.uuid4().hex
    leases, store = rt.leases, rt.store

    if node in spec.dont_run_on_nodes or owner_name in spec.dont_run_on_nodes:
        if dispatch_id:
            try:
                rt.dispatches.take_back(schedule, dispatch_id)
            except Exception as exc:  # beat re-sends it after dispatch_timeout anyway
                log_failure(
                    logger,
                    exc,
                    "celery-dgs: could not take back dispatch %s of %s",
                    dispatch_id,
                    schedule,
                )
        _skip(rt, spec, run_id, dispatch_id, node, owner_name, f"node {node} is excluded")
        return None
    # The durable floor: a token above every token the store recorded, even if
    # Redis lost its counter (restart without persistence, failover).
    floor = _token_floor(rt, spec)
    asked_mono = time.monotonic()  # the grant (and its first "ping") is no earlier

    def ask() -> AcquireResult:
        return leases.acquire(
            schedule,
            owner_node=node,
            owner_name=owner_name,
            owner_tag=run_id,
            dispatch_id=dispatch_id,
            min_token=floor,
        )

    try:
        result = ask()
        if result.status is AcquireStatus.RECOVERING:
            # Wait out the Redis restart grace with the dispatch (its record is
            # kept, beat counts it pending) rather than skip it: a skipped dispatch
            # would only be re-sent after dispatch_timeout.
            for _ in range(GRACE_WAITS):
                if result.status is not AcquireStatus.RECOVERING or not _wait_out_grace(result):
                    break
                asked_mono = time.monotonic()
                result = ask()
    except Exception as exc:
        # Redis failed (or its reply was lost): a grant may exist that nobody
        # pings; it expires after ping_timeout + steal_delay. Never run unleased.
        log_failure(logger, exc, "celery-dgs: acquiring the lease of %s failed", schedule)
        _skip(
            rt,
            spec,
            run_id,
            dispatch_id,
            node,
            owner_name,
            f"acquiring the lease failed: {_describe(exc)}",
        )
        return None
    status = result.status.name
    if not result.granted or result.token is None or result.started_at is None:
        holder = getattr(result, "holder", None)
        reason = status.lower() + (f" (held by {holder.owner_name})" if holder else "")
        if result.status is AcquireStatus.STALE_DISPATCH:
            reason += (
                f" (dispatch {dispatch_id} already started, taken back or replaced: "
                "a redelivered or superseded message)"
            )
        if result.grace_ends_at is not None:
            until = result.grace_ends_at.isoformat()
            reason += (
                " (Redis restarted or lost data, including this schedule's last "
                f"grant: no new lease until {until})"
            )
        _skip(rt, spec, run_id, dispatch_id, node, owner_name, reason)
        return None
    token, started_at = result.token, result.started_at
    settings = rt.settings
    # Past this (monotonic, from the grant) the lease may already be taken
    # over: the body must not start (it would overlap the next owner).
    fence_at = asked_mono + settings.fence_after
    if result.took_over_from is not None:
        old = result.took_over_from
        logger.warning(
            "celery-dgs: %s took over %s from %s (run %s, no ping since %s)",
            owner_name,
            schedule,
            old.owner_name,
            old.owner_tag,
            old.last_ping_at,
        )
        try:
            # "stolen", not "lost": a paused or partitioned owner looks exactly like
            # a dead one from here, and neither may count as the task failing.
            _retry(
                f"recording run {old.owner_tag} of {schedule} as stolen",
                lambda: store.record_run_end(
                    run_id=old.owner_tag,
                    outcome="stolen",
                    ended_at=started_at,
                    error=f"owner {old.owner_name} stopped pinging; lease taken over",
                ),
                give_up_at=asked_mono + settings.fence_after / 2,
            )
        except (StaleTokenError, UnknownRunError) as exc:  # already ended, or never recorded
            logger.info(
                "celery-dgs: run %s of %s not recorded as stolen: %s", old.owner_tag, schedule, exc
            )
        except Exception:
            logger.exception(
                "celery-dgs: could not record run %s of %s as stolen", old.owner_tag, schedule
            )
    try:
        _retry(
            f"recording the start of {schedule}",
            lambda: store.record_run_start(
                schedule=schedule,
                run_id=run_id,
                dispatch_id=dispatch_id,
                owner_node=node,
                owner_name=owner_name,
                owner_tag=run_id,
                token=token,
                started_at=started_at,
            ),
            give_up_at=fence_at,
        )
    except StaleTokenError as exc:
        # Another grant with a token at least as high is already recorded: this
        # lease came from a Redis that lost data. Never run the body with it.
        logger.warning("celery-dgs: run %s of %s refused: %s", run_id, schedule, exc)
        _release_quietly(rt, schedule, run_id)
        return None
    except Exception:
        _release_quietly(rt, schedule, run_id)
        raise
    clock = RunClock(started_at, asked_mono)
    elapsed = clock.elapsed()
    if elapsed >= settings.fence_after:
        # Recording the start took so long that the lease may be someone
        # else's by now (no ping was sent meanwhile): fence before the body.
        reason = (
            f"recording the start took {elapsed:.1f}s since the grant (limit "
            f"{settings.fence_after:g}s): the lease may be taken over; the body "
            "did not run"
        )
        logger.warning(
            "celery-dgs: run %s of %s self-fenced before its body: %s", run_id, schedule, reason
        )
        _finish(
            rt,
            spec,
            run_id,
            "self_fenced",
            reason,
            clock=clock,
            ended_at=started_at + timedelta(seconds=elapsed),
        )
        return None

    def on_unresponsive(stop: RunTerminated) -> None:
        if stop.outcome == "self_fenced":
            # The process must be gone before a steal is possible: record the
            # outcome if the store answers in time, then exit regardless.
            writer = threading.Thread(
                target=_finish,
                args=(rt, spec, run_id, stop.outcome, stop.reason),
                kwargs={"attempts": 1, "ended_at": supervisor.estimated_now(), "clock": clock},
                daemon=True,
            )
            writer.start()
            writer.join(timeout=max(supervisor.kill_deadline_left(), 0.05))
        else:
            _finish(rt, spec, run_id, stop.outcome, stop.reason, clock=clock)
        os._exit(70)  # the run ignored its interruption: end its process (seed 000)

    supervisor = RunSupervisor(
        schedule=schedule,
        run_id=run_id,
        spec=spec,
        token=token,
        ping=lambda progress: _ping_status(leases.ping(schedule, run_id, progress=progress)),
        now=leases.now,
        ping_interval=settings.ping_interval,
        termination_grace=settings.termination_grace,
        on_unresponsive=on_unresponsive,
        fence_after=settings.fence_after,
        kill_after=settings.ping_timeout,
        granted_mono=asked_mono,
        started_at=started_at,
    )
    logger.info(
        "celery-dgs: run %s of %s started on %s (token %s)", run_id, schedule, owner_name, token
    )
    if isinstance(spec, CheckSpec):
        supervisor.check = _check_info(rt, spec)
    supervisor.start()
    outcome, error, verdict = "success", None, None
    try:
        result = fun(*args, **kwargs)
        if isinstance(spec, CheckSpec):
            verdict = result
            return celery_result_of_verdict(result)
        return result
    except RunTerminated as raised:
        stop = supervisor.interruption or raised  # an async exception carries no reason
        outcome, error = stop.outcome, stop.reason
        raised_as = RunStoppedOnRequest if stop.outcome in REQUESTED_STOPS else RunInterrupted
        raise raised_as(f"run {run_id} of {schedule} {stop.outcome}: {stop.reason}") from None
    except BaseException as exc:
        if supervisor.interruption is not None:  # interrupted, then the task raised its own error
            outcome, error = supervisor.interruption.outcome, supervisor.interruption.reason
        elif pool_process_terminating(exc):  # a cold shutdown cancelled the run (prefork)
            outcome = "yielded"
            error = f"{SHUTDOWN_REASON} (cold shutdown: Celery ended the pool process)"
        else:
            outcome = "failure"
            error = _describe(exc)
        raise
    finally:
        try:
            _stop_heartbeat(supervisor)
        finally:  # recorded even if an interruption surfaced in the heartbeat's stop
            if supervisor.interruption is not None and outcome == "success":
                outcome, error = supervisor.interruption.outcome, supervisor.interruption.reason
            _finish(
                rt,
                spec,
                run_id,
                outcome,
                error,
                progress=supervisor.progress,
                clock=clock,
                ended_at=supervisor.estimated_now() if outcome == "self_fenced" else None,
                eventful=supervisor.eventful,
                verdict=verdict,
            )


def _check_info(rt: Runtime, spec: CheckSpec) -> CheckInfo | None:
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


def celery_result_of_verdict(verdict: object) -> object:
    """What Celery gets as a check task's result: its verdict, a ``timedelta``
    as seconds (Celery's JSON serializer has no timedelta)."""
    return verdict.total_seconds() if isinstance(verdict, timedelta) else verdict


def _stop_heartbeat(supervisor: RunSupervisor) -> None:
    """``supervisor.finish()``, even when an interruption delivered just as the
    body returned surfaces in it (it is recorded as the outcome, not raised:
    the body has already ended)."""
    for _ in range(3):
        try:
            supervisor.finish()
            return
        except RunTerminated:
            logger.info(
                "celery-dgs: run %s of %s ended as it was interrupted",
                supervisor.run_id,
                supervisor.schedule,
            )
    supervisor.finish()


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _redis_now_or_local(rt: Runtime) -> datetime:
    """Redis time, the clock of every lease; the local clock when Redis is unreachable."""
    try:
        return rt.leases.now()
    except Exception:
        return datetime.now(timezone.utc)


def _release_quietly(rt: Runtime, schedule: str, run_id: str) -> None:
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


def _wait_out_grace(result: AcquireResult) -> bool:
    """Sleep until the restart grace of a RECOVERING acquire ends; False (at
    once) when the worker starts shutting down or the reply names no end."""
    if result.grace_ends_at is None:
        return False
    left = (result.grace_ends_at - result.now).total_seconds() + GRACE_MARGIN
    logger.info(
        "celery-dgs: Redis restarted; waiting %.1fs for its grace to end (%s)",
        left,
        result.grace_ends_at.isoformat(),
    )
    return not wait_unless_leaving(left)


def _store_declared(rt: Runtime, spec: ScheduleSpec) -> None:
    """The schedule is declared in this app but not stored: beat has not synced
    since it was added (or ``task.delay()`` came first). Store it as the next
    sync would (``insert_if_missing``: never touches a stored row), so the run
    and its record happen as usual."""
    now = rt.leases.now()
    if _retry(f"storing {spec.name}", lambda: rt.store.insert_if_missing(spec, now)):
        logger.warning(
            "celery-dgs: schedule %s was not in the store (beat has not synced the "
            "declarations since it was added; `celery dgs sync` does it): stored it from "
            "this worker's declarations",
            spec.name,
        )


def _token_floor(rt: Runtime, spec: ScheduleSpec) -> int:
    schedule = spec.name
    try:
        return int(
            _retry(f"reading the token floor of {schedule}", lambda: rt.store.token_floor(schedule))
        )
    except UnknownScheduleError:
        _store_declared(rt, spec)
    return int(
        _retry(f"reading the token floor of {schedule}", lambda: rt.store.token_floor(schedule))
    )


def _ping_status(result: PingResult) -> str:
    """The supervisor's view of a ping: GONE when the lease no longer exists."""
    if result.status is PingStatus.NOT_OWNER and result.holder_tag is None:
        return "GONE"
    return result.status.name


def _finish(
    rt: Runtime,
    spec: ScheduleSpec,
    run_id: str,
    outcome: str,
    error: str | None,
    progress: float | None = None,
    attempts: int = STORE_WRITE_ATTEMPTS,
    ended_at: datetime | None = None,
    clock: RunClock | None = None,
    eventful: bool | None = None,
    verdict: object = None,
) -> None:
    """Record the run's end and release its lease. ``ended_at``: the end as
    estimated by the caller (a self-fenced run passes the grant's Redis time
    plus the monotonic time since: Redis is presumed unreachable and the local
    wall clock may have jumped); otherwise Redis's clock, or the local one.

    ``clock``: the run's duration is measured on it (monotonic), not as the
    difference of two wall-clock readings; an end read before the start (the
    clock stepped back) is replaced by the start plus that duration."""
    schedule = spec.name
    # A self-fenced owner presumes Redis unreachable: the lease is left to
    # expire (a release could hang until the socket timeout and would only
    # free the lease a little earlier).
    duration = clock.elapsed() if clock is not None else None
    if ended_at is None:
        ended_at = _redis_now_or_local(rt)
    if clock is not None and duration is not None and ended_at < clock.started_at:
        ended_at = clock.started_at + timedelta(seconds=duration)
    try:
        _retry(
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
            ),
            attempts=attempts,
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
    except Exception as exc:
        log_failure(
            logger,
            exc,
            "celery-dgs: the outcome %s of run %s of %s could not be stored",
            outcome,
            run_id,
            schedule,
        )
    try:
        if outcome not in ("stolen", "self_fenced"):
            rt.leases.release(schedule, run_id)
    except Exception as exc:
        log_failure(logger, exc, "celery-dgs: releasing the lease of %s failed", schedule)
    logger.info(
        "celery-dgs: run %s of %s ended: %s%s",
        run_id,
        schedule,
        outcome,
        f" ({error})" if error else "",
    )


def _skip(
    rt: Runtime,
    spec: ScheduleSpec,
    run_id: str,
    dispatch_id: str | None,
    node: str,
    owner: str,
    reason: str,
) -> None:
    record_skipped(
        rt,
        spec.name,
        run_id=run_id,
        dispatch_id=dispatch_id,
        node=node,
        owner=owner,
        reason=reason,
        declared=spec,
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
        at = _redis_now_or_local(rt)
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
