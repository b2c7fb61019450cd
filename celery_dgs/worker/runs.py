"""Running one scheduled task under its lease, and recording what happened.

``supervised_run`` wraps the task's own ``run`` in the phases of a
:class:`SupervisedRun`: skip on an excluded node, acquire the lease (or record
a skip), record a take-over's previous run as stolen, record the start, fence
before the body when that took too long, run under a :class:`RunSupervisor`,
record the outcome (a returned run whose failed share of reported items is
above its threshold as ``partial_failure``; one store transaction with the stats; see
:mod:`celery_dgs.worker.run_records`) and release the lease. Bookkeeping errors
are logged and never change the task's own result, except where the design
says to stop the run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import traceback
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ..core.items import outcome_with_items
from ..core.spec import CheckSpec, ScheduleSpec
from ..errors import DgsError, RetryRefused, StaleTokenError, UnknownRunError
from ..failures import log_failure
from ..leases.types import AcquireResult, PingResult, PingStatus
from ..runtime import Runtime
from .lease_grant import Grant, acquire_through_grace, refusal_reason
from .run_records import (
    STORE_WRITE_ATTEMPTS,
    RunClock,
    check_info,
    finish_run,
    record_skipped,
    release_quietly,
    retried,
    token_floor,
)
from .shutdown import SHUTDOWN_REASON, pool_process_terminating
from .supervisor import RunSupervisor, RunTerminated

logger = logging.getLogger("celery_dgs.worker")


class RunInterrupted(DgsError, RuntimeError):
    """What Celery sees when celery-dgs stopped a run (stolen, cancelled,
    terminated or yielded); the message says which and why."""


class RunStoppedOnRequest(RunInterrupted):
    """The run was cancelled by an operator or yielded at the worker's shutdown:
    expected outcomes, not errors. Every scheduled task lists this class in its
    ``throws``, so Celery logs it at INFO without a traceback."""


#: Interruptions somebody asked for (:class:`RunStoppedOnRequest`).
REQUESTED_STOPS = frozenset({"cancelled", "yielded"})
#: Added to the recorded error of a run that asked for a refused broker retry.
RETRY_REFUSED_NOTE = "retry() refused: the scheduler retries it after dgs_retry_backoff"


def node_of(hostname: str) -> str:
    """``celery@scraper-3`` → ``scraper-3`` (the node of ``dont_run_on_nodes``)."""
    return hostname.split("@", 1)[1] if "@" in hostname else hostname


def supervised_run(
    rt: Runtime,
    spec: ScheduleSpec,
    request: Any,
    fun: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    token_floor: int | None = None,
) -> Any:
    """``fun(*args, **kwargs)`` as one run of ``spec``: under its lease, with its
    start and outcome recorded; ``None`` when the body did not run (a skip, a
    refused start, a fence before the body). ``token_floor``: the schedule's
    stored token, when the caller read its row just before (else read here)."""
    run = SupervisedRun(rt, spec, request)
    if run.on_excluded_node():
        return None
    grant = run.acquire(token_floor)
    if grant is None:
        return None
    run.record_takeover(grant)
    clock = run.record_start(grant)
    if clock is None or run.fenced_before_body(clock):
        return None
    return run.execute(grant, clock, fun, args, kwargs)


class SupervisedRun:
    """One delivery of a scheduled task to this worker, from its lease to its
    recorded outcome; each method is one phase of :func:`supervised_run`."""

    def __init__(self, rt: Runtime, spec: ScheduleSpec, request: Any) -> None:
        self.rt = rt
        self.spec = spec
        self.schedule = spec.name
        self.dispatch_id: str | None = getattr(request, "dgs_dispatch_id", None)
        self.owner_name = str(getattr(request, "hostname", None) or socket.gethostname())
        self.node = node_of(self.owner_name)
        self.run_id = uuid.uuid4().hex
        self.settings = rt.settings
        #: A returned run whose failed share of reported items is above this
        #: has failed (``partial_failure``, :mod:`celery_dgs.core.items`).
        self.partial_failure_threshold = (
            spec.partial_failure_threshold
            if spec.partial_failure_threshold is not None
            else rt.settings.partial_failure_threshold
        )

    def skip(self, reason: str) -> None:
        """Record this delivery as skipped (the body does not run)."""
        record_skipped(
            self.rt,
            self.schedule,
            run_id=self.run_id,
            dispatch_id=self.dispatch_id,
            node=self.node,
            owner=self.owner_name,
            reason=reason,
            declared=self.spec,
        )

    def on_excluded_node(self) -> bool:
        """True (the dispatch given back, the skip recorded) when this worker's
        node is in the schedule's ``dont_run_on_nodes``."""
        excluded = self.spec.dont_run_on_nodes
        if self.node not in excluded and self.owner_name not in excluded:
            return False
        if self.dispatch_id:
            try:
                self.rt.dispatches.take_back(self.schedule, self.dispatch_id)
            except Exception as exc:  # beat re-sends it after dispatch_timeout anyway
                log_failure(
                    logger,
                    exc,
                    "celery-dgs: could not take back dispatch %s of %s",
                    self.dispatch_id,
                    self.schedule,
                )
        self.skip(f"node {self.node} is excluded")
        return True

    def acquire(self, floor: int | None = None) -> Grant | None:
        """The lease, or ``None`` with the skip recorded. A Redis restart grace is
        waited out rather than skipped (:func:`acquire_through_grace`).
        ``floor``: the schedule's stored token, if the caller has just read it."""
        # The durable floor: a token above every token the store recorded, even if
        # Redis lost its counter (restart without persistence, failover).
        if floor is None:
            floor = token_floor(self.rt, self.spec)
        try:
            result, asked_mono = acquire_through_grace(lambda: self._ask(floor))
        except Exception as exc:
            # Redis failed (or its reply was lost): a grant may exist that nobody
            # pings; it expires after ping_timeout + steal_delay. Never run unleased.
            log_failure(logger, exc, "celery-dgs: acquiring the lease of %s failed", self.schedule)
            self.skip(f"acquiring the lease failed: {_describe(exc)}")
            return None
        if not result.granted or result.token is None or result.started_at is None:
            self.skip(refusal_reason(result, self.dispatch_id))
            return None
        return Grant(result.token, result.started_at, asked_mono, result.took_over_from)

    def _ask(self, floor: int) -> AcquireResult:
        return self.rt.leases.acquire(
            self.schedule,
            owner_node=self.node,
            owner_name=self.owner_name,
            owner_tag=self.run_id,
            dispatch_id=self.dispatch_id,
            min_token=floor,
        )

    def record_takeover(self, grant: Grant) -> None:
        """Record the run whose lease this grant took over as ``stolen`` (within
        half of ``fence_after``; a failure is logged)."""
        old = grant.took_over_from
        if old is None:
            return
        schedule, store = self.schedule, self.rt.store
        logger.warning(
            "celery-dgs: %s took over %s from %s (run %s, no ping since %s)",
            self.owner_name,
            schedule,
            old.owner_name,
            old.owner_tag,
            old.last_ping_at,
        )
        try:
            # "stolen", not "lost": a paused or partitioned owner looks exactly like
            # a dead one from here, and neither may count as the task failing.
            retried(
                f"recording run {old.owner_tag} of {schedule} as stolen",
                lambda: store.record_run_end(
                    run_id=old.owner_tag,
                    outcome="stolen",
                    ended_at=grant.started_at,
                    error=f"owner {old.owner_name} stopped pinging; lease taken over",
                ),
                give_up_at=grant.asked_mono + self.settings.fence_after / 2,
            )
        except (StaleTokenError, UnknownRunError) as exc:  # already ended, or never recorded
            logger.info(
                "celery-dgs: run %s of %s not recorded as stolen: %s", old.owner_tag, schedule, exc
            )
        except Exception:
            logger.exception(
                "celery-dgs: could not record run %s of %s as stolen", old.owner_tag, schedule
            )

    def record_start(self, grant: Grant) -> RunClock | None:
        """Record the start (retried until ``fence_after`` from the grant) and
        return the run's clock; ``None`` (the lease released) when the store
        holds a newer token. Any other failure releases the lease and is raised."""
        schedule, run_id = self.schedule, self.run_id
        try:
            retried(
                f"recording the start of {schedule}",
                lambda: self.rt.store.record_run_start(
                    schedule=schedule,
                    run_id=run_id,
                    dispatch_id=self.dispatch_id,
                    owner_node=self.node,
                    owner_name=self.owner_name,
                    owner_tag=run_id,
                    token=grant.token,
                    started_at=grant.started_at,
                ),
                # Past this (monotonic, from the grant) the lease may already be taken
                # over: the body must not start (it would overlap the next owner).
                give_up_at=grant.asked_mono + self.settings.fence_after,
            )
        except StaleTokenError as exc:
            # Another grant with a token at least as high is already recorded: this
            # lease came from a Redis that lost data. Never run the body with it.
            logger.warning("celery-dgs: run %s of %s refused: %s", run_id, schedule, exc)
            release_quietly(self.rt, schedule, run_id)
            return None
        except Exception:
            release_quietly(self.rt, schedule, run_id)
            raise
        return RunClock(grant.started_at, grant.asked_mono)

    def fenced_before_body(self, clock: RunClock) -> bool:
        """True (recorded as ``self_fenced``) when recording the start took
        ``fence_after`` or more since the grant."""
        fence_after = self.settings.fence_after
        elapsed = clock.elapsed()
        if elapsed < fence_after:
            return False
        # Recording the start took so long that the lease may be someone
        # else's by now (no ping was sent meanwhile): fence before the body.
        reason = (
            f"recording the start took {elapsed:.1f}s since the grant (limit "
            f"{fence_after:g}s): the lease may be taken over; the body "
            "did not run"
        )
        logger.warning(
            "celery-dgs: run %s of %s self-fenced before its body: %s",
            self.run_id,
            self.schedule,
            reason,
        )
        finish_run(
            self.rt,
            self.schedule,
            self.run_id,
            "self_fenced",
            reason,
            clock=clock,
            ended_at=clock.started_at + timedelta(seconds=elapsed),
        )
        return True

    def supervisor(self, grant: Grant, clock: RunClock) -> RunSupervisor:
        """The run's heartbeat, not yet started: pings, interruptions,
        self-fencing, and the end of a process that ignores its interruption."""
        rt, spec, schedule, run_id = self.rt, self.spec, self.schedule, self.run_id
        settings, leases = self.settings, rt.leases

        def on_unresponsive(stop: RunTerminated) -> None:
            if stop.outcome == "self_fenced":
                # The process must be gone before a steal is possible: record the
                # outcome if the store answers in time, then exit regardless.
                writer = threading.Thread(
                    target=finish_run,
                    args=(rt, spec.name, run_id, stop.outcome, stop.reason),
                    kwargs={"attempts": 1, "ended_at": supervisor.estimated_now(), "clock": clock},
                    daemon=True,
                )
                writer.start()
                writer.join(timeout=max(supervisor.kill_deadline_left(), 0.05))
            else:
                finish_run(rt, spec.name, run_id, stop.outcome, stop.reason, clock=clock)
            os._exit(70)  # the run ignored its interruption: end its process (seed 000)

        supervisor = RunSupervisor(
            schedule=schedule,
            run_id=run_id,
            spec=spec,
            token=grant.token,
            ping=lambda progress: _ping_status(leases.ping(schedule, run_id, progress=progress)),
            now=leases.now,
            ping_interval=settings.ping_interval,
            termination_grace=settings.termination_grace,
            on_unresponsive=on_unresponsive,
            fence_after=settings.fence_after,
            kill_after=settings.ping_timeout,
            granted_mono=grant.asked_mono,
            started_at=grant.started_at,
        )
        logger.info(
            "celery-dgs: run %s of %s started on %s (token %s)",
            run_id,
            schedule,
            self.owner_name,
            grant.token,
        )
        if isinstance(spec, CheckSpec):
            supervisor.check = check_info(rt, spec)
        return supervisor

    def _pool_process_ended(self) -> tuple[str, str]:
        """The outcome of a run whose pool process got ``SIGTERM``: a cold
        shutdown cancelling it (the worker left the registry first:
        ``yielded``), or, while the worker is still registered, ``celery
        control revoke --terminate``, a pool restart, or a signal sent to the
        process (systemd's ``KillMode=control-group`` signals the pool
        processes with the worker): ``cancelled``, as ``celery dgs cancel``
        records. One read of the worker index."""
        try:
            leaving = not self.rt.registry.is_registered(self.owner_name)
        except Exception as exc:
            log_failure(
                logger, exc, "celery-dgs: reading whether %s is leaving failed", self.owner_name
            )
            leaving = True
        if leaving:
            return "yielded", f"{SHUTDOWN_REASON}: a cold shutdown, Celery ended the pool process"
        return "cancelled", (
            f"its pool process got SIGTERM while {self.owner_name} was still registered: "
            "celery control revoke --terminate, a pool restart, or a signal sent to the process"
        )

    def execute(
        self,
        grant: Grant,
        clock: RunClock,
        fun: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run the body under its supervisor; its outcome is stored (and the lease
        released) before the result or the exception reaches Celery."""
        supervisor = self.supervisor(grant, clock)
        spec, schedule, run_id = self.spec, self.schedule, self.run_id
        outcome, error, verdict = "success", None, None
        try:
            # Started inside the ``try``: its first check may interrupt the run at
            # once (a blackout already open), before the body is entered.
            supervisor.start()
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
            if supervisor.interruption is not None:  # interrupted, then the task raised its own
                outcome, error = supervisor.interruption.outcome, supervisor.interruption.reason
            elif pool_process_terminating(exc):  # SIGTERM from the worker (prefork)
                outcome, error = self._pool_process_ended()
            else:
                outcome = "failure"
                error = _describe(exc)
                if supervisor.retry_refused and not isinstance(exc, RetryRefused):
                    error += f" ({RETRY_REFUSED_NOTE})"
            raise
        finally:
            try:
                _stop_heartbeat(supervisor)
            finally:  # recorded even if an interruption surfaced in the heartbeat's stop
                if supervisor.interruption is not None and outcome == "success":
                    outcome, error = supervisor.interruption.outcome, supervisor.interruption.reason
                outcome, error = outcome_with_items(
                    outcome, error, supervisor.items, self.partial_failure_threshold
                )
                finish_run(
                    self.rt,
                    spec.name,
                    run_id,
                    outcome,
                    error,
                    progress=supervisor.progress,
                    # The body has returned: the outcome may wait for the store
                    # (the lease is pinged meanwhile); a self-fenced one may not.
                    attempts=STORE_WRITE_ATTEMPTS if outcome == "self_fenced" else None,
                    clock=clock,
                    ended_at=supervisor.estimated_now() if outcome == "self_fenced" else None,
                    eventful=supervisor.eventful,
                    verdict=verdict,
                    items=supervisor.items,
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


def _ping_status(result: PingResult) -> str:
    """The supervisor's view of a ping: GONE when the lease no longer exists."""
    if result.status is PingStatus.NOT_OWNER and result.holder_tag is None:
        return "GONE"
    return result.status.name
