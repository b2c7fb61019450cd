"""``DeadlineScheduler``: the Celery beat scheduler class.

Use it as ``celery -A proj beat -S celery_dgs:DeadlineScheduler`` or with
``beat_scheduler = "celery_dgs:DeadlineScheduler"``. On start it syncs the
declared schedules into the store, loads them into the index, and from then
on each tick is one :meth:`BeatEngine.tick`.

Two or more beats may run: one holds the leader lease in Redis and dispatches,
the others stand by and take over when it stops renewing (docs/beat-ha.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, NoReturn

from celery.beat import Scheduler

from ..beat_pace import PaceBoard
from ..beat_schedule_entries import beat_schedule_warning
from ..core.clock import SystemClock
from ..declarations import Declarations
from ..dgs import get_dgs
from ..errors import SchemaTooNewError, SettingsError, StoreClaimedError
from ..failures import explain_failure
from ..leases.leader import RedisLeader
from ..overload_board import OverloadBoard, OverloadReport
from ..runtime import Runtime, runtime_for
from ..sentinel import log_min_replicas_warning
from ..store.engine import masked_url
from ..store.ownership import owned_by_api
from ..task_routing import routing_warnings
from ..wake import BeatWake
from .engine import BeatEngine
from .leader import BeatLeadership
from .publishing import CeleryPublisher

logger = logging.getLogger("celery_dgs.beat")

#: Seconds to wait after an unexpected error in a tick before trying again.
TICK_ERROR_BACKOFF_S = 5.0
#: Start-up with Redis or the database unreachable: seconds before the first
#: retry, doubled after each failed attempt up to the maximum.
STARTUP_RETRY_FIRST_S = 1.0
STARTUP_RETRY_MAX_S = 30.0
#: Exit status of a beat that refuses to start on a configuration error
#: (``EX_CONFIG`` of sysexits.h).
EX_CONFIG = 78


@contextlib.contextmanager
def _signals_end_the_wait() -> Iterator[None]:
    """While beat waits to start: SIGTERM/SIGINT end the process at once.

    Celery's own handler saves the schedule through ``service.scheduler``, the
    very scheduler still being built here (it would build a second one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    previous = {sig: signal.signal(sig, leave) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class DeadlineScheduler(Scheduler):  # type: ignore[misc]
    """Dispatches the eligible schedule closest to its deadline whenever a worker
    slot is free (see docs/architecture.md)."""

    #: Set by :meth:`close`: a tick then does nothing.
    closed = False

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        self.dgs = get_dgs(app)
        self._synced = False  # the declarations are synced once, not at every attempt
        self.engine: BeatEngine | None = None
        #: The workers' freed-slot signal the leader waits on between rounds.
        self.wake: BeatWake | None = None
        #: Where the leader keeps its dispatch pace for ``status`` and the page.
        self.pace: PaceBoard | None = None
        #: Where it keeps what the ``fewest_errors`` order makes wait.
        self.overload: OverloadBoard | None = None
        self.leadership: BeatLeadership | None = None
        #: Publishes a round's orders on the app's broker (in pipelines on Redis).
        self.publish = CeleryPublisher(app)
        super().__init__(app, *args, **kwargs)

    def setup_schedule(self) -> None:
        """Sync the declarations into the store and load the engine.

        Redis or the database unreachable: one line per attempt and a retry
        with a doubling back-off (:data:`STARTUP_RETRY_FIRST_S` up to
        :data:`STARTUP_RETRY_MAX_S`) until both answer. An invalid setting or
        refused credentials cannot fix themselves: one line naming the setting,
        and beat exits with status :data:`EX_CONFIG`."""
        try:
            settings = self.dgs.settings
            rt = runtime_for(self.app, settings)
        except SettingsError as exc:
            self._refuse(f"invalid setting: {exc}")
        decl = self.dgs.all_declarations()
        delay, attempt = STARTUP_RETRY_FIRST_S, 1
        with _signals_end_the_wait():
            while True:
                try:
                    self._set_up(rt, decl)
                    break
                except (StoreClaimedError, SchemaTooNewError) as exc:
                    self._refuse(str(exc), rt)
                except SettingsError as exc:  # e.g. dgs_redis_cluster on a plain server
                    self._refuse(f"invalid setting: {exc}", rt)
                except Exception as exc:
                    explained = self._explain(exc)
                    if explained is None:
                        raise
                    line, refused = explained
                    if refused:
                        self._refuse(line, rt)
                    logger.warning(
                        "celery-dgs beat: cannot start (attempt %d): %s; retrying in %.0fs",
                        attempt,
                        line,
                        delay,
                    )
                    time.sleep(delay)
                    delay, attempt = min(delay * 2, STARTUP_RETRY_MAX_S), attempt + 1
        if attempt > 1:
            logger.info("celery-dgs beat: started at attempt %d", attempt)
        log_min_replicas_warning(rt.redis, settings.redis_master_name, logger)
        if settings.metrics_port is not None:
            from .endpoint import serve_metrics

            assert self.engine is not None
            try:
                serve_metrics(
                    self.engine,
                    rt.store,
                    SystemClock(),
                    settings.metrics_port,
                    settings.metrics_addr,
                )
            except OSError as exc:  # the port in use (another beat on this host): one line
                logger.error(
                    "celery-dgs: cannot serve metrics on %s:%s (%s); beat runs without them "
                    "(give each beat on a host its own dgs_metrics_port)",
                    settings.metrics_addr,
                    settings.metrics_port,
                    exc.strerror or exc,
                )

    def _set_up(self, rt: Runtime, decl: Declarations) -> None:
        """One start-up attempt: sync the store and have it adopt the retry
        settings (once: their kept start times rewritten if they changed),
        then load the engine. A stored schedule whose declaration is invalid
        keeps its stored version (``declaration_invalid``); a new invalid one
        is skipped."""
        settings = rt.settings
        if not self._synced:
            claimed_by = rt.store.claim_declarations(settings.key_prefix)
            if claimed_by is not None:
                raise StoreClaimedError(
                    masked_url(settings.database_url), settings.key_prefix, claimed_by
                )
            report = rt.store.sync(
                list(decl.specs.values()), SystemClock().now(), invalid=decl.invalid()
            )
            for name, err in decl.errors.items():
                if name in report.invalid:
                    logger.error(
                        "celery-dgs: schedule %s keeps its last valid stored version "
                        "(status: declaration_invalid): %s",
                        name,
                        err,
                    )
                else:
                    logger.error("celery-dgs: schedule %s skipped: %s", name, err)
            for name in report.refused:
                logger.error("celery-dgs: declaration ignored: %s", owned_by_api(name))
            for task, err in self.dgs.check_template_errors.items():
                logger.error(
                    "celery-dgs: task %s: invalid @dgs.deferred declaration (no new "
                    "checks of it until fixed; stored ones are still dispatched): field %r: %s",
                    task,
                    err.field,
                    err.message,
                )
            logger.info("celery-dgs: synced declarations: %s", report)
            legacy = beat_schedule_warning(self.app.conf, {s.task for s in decl.specs.values()})
            if legacy is not None:
                logger.warning("celery-dgs: %s", legacy)
            for astray in routing_warnings(self.app, decl.specs):
                logger.warning("celery-dgs: %s", astray)
            adopted = rt.store.adopt_retry_ladder(settings.retry_ladder)
            # A new store's first settings re-time nothing: not worth an INFO line.
            news = adopted.rewritten or (adopted.changed and adopted.previous is not None)
            logger.log(logging.INFO if news else logging.DEBUG, "celery-dgs: %s", adopted)
            self._synced = True
        leadership = BeatLeadership(
            RedisLeader(rt.redis, rt.keys, timeout=settings.beat_leader_timeout),
            node=socket.gethostname(),
            pid=os.getpid(),
            store_poll_interval=settings.store_poll_interval,
            store=rt.store.store_id(),
            prefix=settings.key_prefix,
            wall=time.time,
        )
        engine = BeatEngine(
            store=rt.store,
            leases=rt.leases,
            registry=rt.registry,
            dispatches=rt.dispatches,
            publish=self.publish,
            settings=settings,
            clock=SystemClock(),
            default_queue=self.app.conf.task_default_queue or "celery",
            max_interval=float(self.max_interval),
            leadership=leadership,
            wake=lambda: rt.wake.notify() if leadership.leading else None,
            outcome_spool=rt.outcome_spool,
        )
        engine.load()
        self.leadership, self.engine, self.wake = leadership, engine, rt.wake
        self.pace = PaceBoard(rt.redis, rt.keys)
        self.overload = OverloadBoard(rt.redis, rt.keys)

    def _write_overload(self, engine: BeatEngine) -> None:
        """With the ``fewest_errors`` order, what it makes wait (with the pace)."""
        waiting = engine.ranking.waiting_in_error()
        if waiting is None or self.overload is None:
            return
        count, lowest = waiting
        pools = engine.ranking.overloaded_pools()
        report = OverloadReport(bool(pools), count, tuple(lowest), pools)
        self.overload.write(report)

    def _explain(self, exc: BaseException) -> tuple[str, bool] | None:
        """One line for a failure to reach Redis or the database (see
        :func:`~celery_dgs.failures.explain_failure`), or ``None``."""
        settings = self.dgs.settings
        return explain_failure(
            exc,
            redis_url=settings.resolved_redis_url(self.app.conf.broker_url),
            redis_setting=settings.redis_url_setting,
            database_url=settings.database_url,
        )

    def _closed_under_tick(self) -> bool:
        """Whether :meth:`close` ran while the current tick was running (a
        method: :meth:`tick` tested ``closed`` before the tick, and a second
        test there would read to the type checker as always false)."""
        return self.closed

    @staticmethod
    def _exit_after_close() -> SystemExit:
        """What a tick after :meth:`close` raises. Celery's SIGTERM and SIGINT
        handlers close the scheduler, then raise ``SystemExit``: its beat loop
        ends only on that exception (closing sets no flag it reads). One raised
        while a finalizer runs is lost, and the loop ticks again at once:
        raising it again ends the process as the signal meant (exit code 0)."""
        return SystemExit(0)

    def _refuse(self, line: str, rt: Runtime | None = None) -> NoReturn:
        logger.critical("celery-dgs beat: cannot start: %s", line)
        if rt is not None:
            rt.close()
        raise SystemExit(EX_CONFIG)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.closed:
            raise self._exit_after_close()
        if self.engine is None:
            return float(self.max_interval)
        try:
            sleep = self.engine.tick()
        except Exception as exc:
            if self._closed_under_tick():
                # Its clients are gone, so the failure is the close's, not an error.
                raise self._exit_after_close() from None
            backoff = min(TICK_ERROR_BACKOFF_S, float(self.max_interval))
            if self.leadership is not None:  # a leader must not miss its renewals
                backoff = min(backoff, self.leadership.renew_interval)
            try:
                explained = self._explain(exc)
            except Exception:  # describing the error must not fail the tick's recovery
                explained = None
            if explained is not None:  # Redis or the database went away: one line
                logger.warning(
                    "celery-dgs: beat tick failed: %s; retrying in %.1fs", explained[0], backoff
                )
            else:
                logger.exception("celery-dgs: beat tick failed; retrying in %.1fs", backoff)
            return backoff
        if self.wake is None or self.leadership is None or not self.leadership.leading:
            return sleep
        if self.pace is not None:
            engine = self.engine
            if self.pace.maybe_write(engine.pace_figures):
                self._write_overload(engine)
        # The leader spends its sleep waiting for a worker's freed-slot signal:
        # the next round starts as soon as a run ends (Celery's loop then
        # calls tick again at once).
        self.wake.wait(sleep)
        return 0.0

    @property
    def schedule(self) -> dict[str, Any]:
        return {}

    def sync(self) -> None:
        """Nothing to persist: the store is written as things happen."""

    def close(self) -> None:
        """Resign the leadership and close the clients. Celery's SIGTERM and
        SIGINT handlers call this, then raise ``SystemExit``: one that runs
        while beat waits for a freed slot leaves the clients open (the wait
        holds a connection, and closing it under the wait would replace the
        exit with an error); the process ends with them. A tick after the
        close raises ``SystemExit`` (:meth:`_exit_after_close`)."""
        self.closed = True
        if self.leadership is not None:
            try:
                self.leadership.resign()
            except Exception:
                logger.exception("celery-dgs: resigning the beat leadership failed")
        if self.wake is not None and self.wake.waiting:
            return
        runtime_for(self.app, self.dgs.settings).close()

    @property
    def info(self) -> str:
        """The scheduler's line in Celery's beat banner. Celery prints the
        banner from a scheduler it builds without setting it up (``lazy``),
        before the one that runs has loaded anything: that line says the count
        follows in the log at INFO (``celery-dgs beat: loaded N schedules
        ...``), which beat's default level (WARNING) leaves out."""
        if self.engine is None:
            return (
                "celery-dgs deadline scheduler: loads the stored schedules after this "
                "banner and logs how many at INFO (-l info)"
            )
        state = self.engine.state
        checks = len(state.checks)
        return (
            f"celery-dgs deadline scheduler: {len(state.tracked) - checks} schedules and "
            f"{checks} deferred checks loaded"
        )
