"""Celery signal hooks, installed by ``DGS(app)``.

- ``worker_init`` (main process, task modules imported): check that the worker
  can supervise (:mod:`~celery_dgs.worker.startup`), wrap the ``run`` of
  every scheduled task with :func:`~celery_dgs.worker.runs.supervised_run`,
  keep its retries with the scheduler (:mod:`~celery_dgs.worker.retries`) and
  warn about unsafe Celery settings (:mod:`~celery_dgs.celery_settings`) and
  about retry settings other than beat's (:mod:`~celery_dgs.worker.retry_settings`).
  Wrapping ``run`` rather than using ``task_prerun`` is what lets a run be
  skipped (lease held, stale dispatch) and its exception recorded. A worker
  that cannot do that refuses to start (exit status 78).
- ``worker_process_init`` (each prefork child): install the interrupt handler.
- ``worker_ready``: register the worker (node, queues, slots) in Redis and keep
  the registration fresh (not with ``dgs_worker_register = False``: beat's
  fixed-capacity mode); ``worker_shutdown``: deregister.
- ``worker_shutting_down`` (warm or cold): every live run yields at once, so
  another worker can take its schedule over without waiting for a steal.
- cold shutdown: Celery cancels the tasks *before* ``worker_shutting_down``;
  :func:`~celery_dgs.worker.shutdown.hook_cold_shutdown` (installed at
  ``worker_ready``) deregisters the worker and makes the runs yield first.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from celery import signals

from ..clock_offset import OffsetWatch, measured_offset, worker_offset_text
from ..core.schedule_names import split_schedule_name
from ..core.spec import ScheduleSpec
from ..errors import UnknownScheduleError
from ..failures import log_failure
from ..runtime import Runtime, runtime_for
from ..store.records import OWNER_DECLARED
from .discarded import give_back_revoked, give_back_unknown_task
from .lost_runs import PROCESS_ENDED, on_lost_task
from .retries import keep_retries_in_the_scheduler
from .retry_settings import check_at_start
from .runs import RunStoppedOnRequest, node_of, supervised_run
from .runtime_specs import skip_dispatch, stored_spec
from .shutdown import (
    SHUTDOWN_REASON,
    flag_worker_stopping,
    give_back_dispatches,
    hook_cold_shutdown,
    mark_cold_shutdown,
    mark_leaving,
)
from .start_advice import log_start_advice
from .startup import DgsPlugin, StartRefused, check_before_start, explain, refuse_to_start
from .supervisor import INTERRUPT_SIGNAL, install_interrupt_handler, live_supervisors

logger = logging.getLogger("celery_dgs.worker")

#: Registration: seconds before the first retry when Redis cannot be reached,
#: doubled after each failure up to the refresh interval (``dgs_worker_ttl / 3``).
REGISTER_RETRY_FIRST_S = 1.0


def wrap_scheduled_tasks(app: Any, dgs: DgsPlugin) -> list[str]:
    """Wrap the task of each declared schedule, and every other task of the
    app (runtime schedules, read from the store, may use any), once; returns
    the wrapped task names."""
    decl = dgs.all_declarations()
    by_task: dict[str, list[str]] = {}
    for name, spec in decl.specs.items():
        by_task.setdefault(spec.task, []).append(name)
    for name in decl.errors:  # beat may serve their last valid stored version
        task_name = split_schedule_name(name)[0]
        if task_name in app.tasks:
            by_task.setdefault(task_name, []).append(name)
    for task_name in app.tasks:  # any task may have runtime schedules (in the store)
        if not task_name.startswith("celery."):
            by_task.setdefault(task_name, [])
    declared_tasks = {task for task, names in by_task.items() if names}
    wrapped = []
    for task_name in by_task:
        task = app.tasks[task_name]
        if getattr(task.run, "_dgs_wrapped", False):
            continue
        original = task.run

        @functools.wraps(original)
        def run(*args: Any, __task: Any = task, __original: Any = original, **kwargs: Any) -> Any:
            request = __task.request
            if request.called_directly:
                return __original(*args, **kwargs)
            dispatched = getattr(request, "dgs_schedule", None)
            schedule = dispatched or __task.name
            spec = decl.specs.get(schedule)  # with the default cooldown, as beat has it
            if spec is None and not dispatched and __task.name not in declared_tasks:
                return __original(*args, **kwargs)  # a plain call of an unscheduled task
            rt = runtime_for(app, dgs.settings)
            if spec is None and schedule in decl.errors:
                spec = served_spec(rt, schedule)
            floor: int | None = None  # read with the lease unless the spec's row gave it
            if spec is None and dispatched:
                stored, skip = stored_spec(rt, schedule)
                if skip is not None:
                    skip_dispatch(rt, schedule, request, skip)
                    return None
                if stored is not None:
                    spec, floor = stored.spec, stored.token_floor
                    if stored.owner == OWNER_DECLARED:
                        warn_undeclared_once(schedule)
            if spec is None:
                dispatch_id = getattr(request, "dgs_dispatch_id", None)
                if dispatch_id:  # sent by beat: a scheduled run never runs outside its lease
                    raise UnknownScheduleError(
                        f"{__task.name}: beat dispatched schedule {schedule!r} (dispatch "
                        f"{dispatch_id}), which this worker does not declare and its store "
                        "does not hold; not run (give beat and the workers the same "
                        "declarations and database)"
                    )
                logger.warning(
                    "celery-dgs: %s has no schedule %r; running it unsupervised",
                    __task.name,
                    schedule,
                )
                return __original(*args, **kwargs)
            return supervised_run(rt, spec, request, __original, args, kwargs, token_floor=floor)

        run._dgs_wrapped = True  # type: ignore[attr-defined]
        task.run = run
        # A cancel or a shutdown's yield is logged by Celery at INFO, without a traceback.
        task.throws = (*tuple(task.throws or ()), RunStoppedOnRequest)
        keep_retries_in_the_scheduler(task)
        wrapped.append(task_name)
    return wrapped


@functools.lru_cache(maxsize=1024)
def warn_undeclared_once(schedule: str) -> None:
    """Say, once per schedule in this process, that beat dispatched a declared
    schedule this worker's code does not declare, which runs as beat stored it."""
    logger.warning(
        "celery-dgs: beat dispatched schedule %r, which this worker does not declare: it runs "
        "with the spec beat stored (beat and this worker run different code; give them the "
        "same declarations)",
        schedule,
    )


def served_spec(rt: Runtime, schedule: str) -> ScheduleSpec | None:
    """The stored spec beat serves for a schedule whose declaration is invalid
    here (the last valid version), or None if none is stored or readable."""
    try:
        return rt.store.get(schedule).spec
    except UnknownScheduleError:
        return None
    except Exception:
        logger.exception("celery-dgs: reading the stored spec of %s failed", schedule)
        return None


class _WorkerPresence:
    """Keeps this worker's registration fresh until shutdown."""

    def __init__(self, app: Any, dgs: DgsPlugin) -> None:
        self.app, self.dgs = app, dgs
        self.info: Any = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        # A refresh in flight must not re-register a worker that has just left.
        self._lock = threading.Lock()
        self._left = False
        #: This host's clock against Redis's, measured at each registration.
        self.clock = OffsetWatch(logger)

    def register(self, consumer: Any) -> None:
        """Register now, and keep the registration fresh on a thread. Redis
        unreachable: one line per attempt, retried with a doubling back-off."""
        from ..registry import WorkerInfo

        pool = consumer.pool
        pool_name = type(pool).__module__.rsplit(".", 1)[-1]
        slots = _slots(consumer.controller, pool_name)
        self.info = WorkerInfo(
            name=consumer.hostname,
            node=node_of(consumer.hostname),
            queues=tuple(sorted(q.name for q in consumer.task_consumer.queues)),
            slots=slots,
            pool=pool_name,
            pid=os.getpid(),
            started_at=datetime.now(timezone.utc),
            store=_store_id(runtime_for(self.app, self.dgs.settings)),
            tasks=_task_names(consumer, self.app),
        )
        why = self._register_once()
        if why is None:
            logger.info(
                "celery-dgs: registered %s (%d slots, queues %s)",
                self.info.name,
                slots,
                ", ".join(self.info.queues),
            )
            runtime_for(self.app, self.dgs.settings).wake.notify()  # new slots: beat looks now
        self.thread = threading.Thread(
            target=self._keep_registered, args=(why,), name="dgs-registry", daemon=True
        )
        self.thread.start()

    def _register_once(self) -> str | None:
        """Register (or refresh) once: ``None``, or one line saying why it failed."""
        rt = runtime_for(self.app, self.dgs.settings)
        try:
            with self._lock:
                if not self._left:
                    before = time.time()
                    registered = rt.registry.register(self.info)
                    self._clock_measured(before, registered.expires_at, time.time())
            return None
        except Exception as exc:
            explained = explain(rt, exc)
            if explained is not None:
                return explained[0]
            logger.exception("celery-dgs: registering %s failed", self.info.name)
            return f"{type(exc).__name__}: {exc}"

    def _clock_measured(self, before: float, expires_at: datetime | None, after: float) -> None:
        """Measure the clock's offset from Redis's by a registration's expiry
        (Redis's time of the call plus ``dgs_worker_ttl``)."""
        if expires_at is None:
            return
        redis_now = expires_at - timedelta(seconds=self.dgs.settings.worker_ttl)
        offset = measured_offset(before, redis_now, after)
        timeout = self.dgs.settings.dispatch_timeout
        self.clock.measured(offset, worker_offset_text(offset, timeout), error=offset >= timeout)

    def _keep_registered(self, why: str | None) -> None:
        """Refresh every ``worker_ttl / 3``; after a failure, retry sooner (one
        line per attempt, the delay doubling up to that interval)."""
        interval = self.dgs.settings.worker_ttl / 3
        delay, attempt = min(REGISTER_RETRY_FIRST_S, interval), 1
        while True:
            if why is not None:
                logger.warning(
                    "celery-dgs: registering %s failed (attempt %d): %s; retrying in %.1fs",
                    self.info.name,
                    attempt,
                    why,
                    delay,
                )
            if self.stop.wait(interval if why is None else delay):
                return
            if why is not None:
                attempt, delay = attempt + 1, min(delay * 2, interval)
            was_failing, why = why is not None, self._register_once()
            if why is None and was_failing:
                logger.info("celery-dgs: registered %s at attempt %d", self.info.name, attempt)
            if why is None:
                delay, attempt = min(REGISTER_RETRY_FIRST_S, interval), 1

    def deregister(self) -> None:
        """Leave the registry (once), so beat dispatches nothing more here, and
        give back the dispatches still waiting in this worker's queue."""
        self.stop.set()
        if self.info is None or not self._lock.acquire(timeout=5):
            return
        try:
            if self._left:
                return
            self._left = True
            rt = runtime_for(self.app, self.dgs.settings)
            rt.registry.deregister(self.info.name)
            logger.info("celery-dgs: %s left the worker registry", self.info.name)
            give_back_dispatches(rt.dispatches, self.info.name)
        except Exception as exc:  # the registration expires after dgs_worker_ttl
            log_failure(logger, exc, "celery-dgs: deregistering %s failed", self.info.name)
        finally:
            self._lock.release()


def _log_unregistered(dgs: DgsPlugin, hostname: str) -> None:
    capacity = dgs.settings.capacity
    if capacity is None:
        logger.warning(
            "celery-dgs: %s does not register (dgs_worker_register = False) and "
            "dgs_capacity is not set: beat dispatches nothing unless some worker registers "
            "or dgs_capacity is set",
            hostname,
        )
        return
    logger.info(
        "celery-dgs: %s does not register (dgs_worker_register = False): with no worker "
        "registered, beat runs at most dgs_capacity = %d at a time, published to the "
        "pool queues",
        hostname,
        capacity,
    )


def _slots(controller: Any, pool_name: str) -> int:
    """The runs this worker takes at once: one on the solo pool; with
    ``--autoscale``, its maximum (the pool grows as runs arrive; Celery
    prefetches that many); else its concurrency (``-c``)."""
    if pool_name == "solo":
        return 1
    autoscaler = getattr(controller, "autoscaler", None)
    most = getattr(autoscaler, "max_concurrency", None) or getattr(
        controller, "max_concurrency", None
    )
    return int(most or controller.concurrency or 1)


def _task_names(consumer: Any, app: Any) -> frozenset[str]:
    """The tasks this worker runs: those its consumer has a strategy for (a
    message of any other is discarded as unregistered), else the app's."""
    strategies = getattr(consumer, "strategies", None)
    return frozenset(strategies if strategies else app.tasks.keys())


def _store_id(rt: Runtime) -> str | None:
    """The store's id for the registration, so a beat serving another store
    never places runs here; ``None`` (the worker registers without it) when
    the store cannot be read now."""
    try:
        return rt.store.store_id()
    except Exception as exc:
        explained = explain(rt, exc)
        if explained is None:
            log_failure(logger, exc, "celery-dgs: reading the store's id failed")
        else:
            logger.error(
                "celery-dgs: the schedule store cannot be read at start: %s; the "
                "scheduled runs sent to this worker fail until it can be",
                explained[0],
            )
        return None


def install_worker_hooks(app: Any, dgs: DgsPlugin) -> None:
    presence = _WorkerPresence(app, dgs)

    def ours(sender_app: Any) -> bool:
        return sender_app is None or sender_app is app

    def on_worker_init(sender: Any = None, **_: Any) -> None:
        if not ours(getattr(sender, "app", None)):
            return
        try:
            check_before_start(app, dgs)
            names = wrap_scheduled_tasks(app, dgs)
        except StartRefused as exc:
            refuse_to_start(str(exc))
        except Exception as exc:
            # Unexpected (a bug, a task module that fails to import): the
            # traceback helps, and the tasks still must not run unwrapped.
            logger.critical("celery-dgs: installing the worker hooks failed", exc_info=True)
            refuse_to_start(f"installing the worker hooks failed: {type(exc).__name__}: {exc}")
        install_interrupt_handler()
        log_start_advice(app, dgs)
        check_at_start(dgs.settings)
        logger.info("celery-dgs: supervising %d task(s): %s", len(names), ", ".join(names))

    def on_process_init(**_: Any) -> None:
        install_interrupt_handler()

    def on_ready(sender: Any = None, **_: Any) -> None:
        if not ours(getattr(sender, "app", None)):
            return
        # Also unregistered: a cold shutdown's runs yield (leaving is then a no-op).
        hook_cold_shutdown(sender, leave=presence.deregister, stop_runs=stop_runs)
        if not dgs.settings.worker_register:
            _log_unregistered(dgs, getattr(sender, "hostname", "this worker"))
            return
        try:
            presence.register(sender)
        except Exception:  # not Redis (retried by the registration thread): a bug
            logger.exception("celery-dgs: registering the worker failed; beat will not see it")

    def stop_runs() -> None:
        for sup in live_supervisors():
            sup.interrupt("yielded", SHUTDOWN_REASON)

    def on_shutting_down(how: str = "Warm", exitcode: int = 0, **_: Any) -> None:
        # Runs in the worker's main process: leave the registry first (beat
        # must not send the freed schedule back here), then signal prefork
        # children to yield their runs and yield the runs in this process
        # (solo/threads pools; on solo this raises in the task, so it is last).
        if how == "Cold":
            mark_cold_shutdown()
        mark_leaving()
        presence.deregister()
        try:
            import billiard.process

            for child in billiard.process.active_children():
                if child.pid:
                    os.kill(child.pid, INTERRUPT_SIGNAL)
        except Exception:
            logger.exception("celery-dgs: signalling pool processes to yield failed")
        flag_worker_stopping(how, exitcode)
        stop_runs()

    def on_shutdown(sender: Any = None, **_: Any) -> None:
        presence.deregister()

    def on_unknown_task(sender: Any = None, message: Any = None, name: str = "", **_: Any) -> None:
        if ours(getattr(sender, "app", None)):
            give_back_unknown_task(app, dgs, sender, message, name)

    def on_task_revoked(
        sender: Any = None,
        request: Any = None,
        terminated: bool = False,
        expired: bool = False,
        **_: Any,
    ) -> None:
        # Sent in the main process; a message discarded before it ran (revoked
        # by id or expired) leaves its dispatch record to be given back.
        if not terminated and ours(getattr(sender, "app", None)):
            give_back_revoked(
                app, dgs, request, expired=bool(expired), clock_offset=presence.clock.notable()
            )

    def on_task_failure(sender: Any = None, exception: Any = None, **_: Any) -> None:
        # Sent in the main process when a pool process died running the task,
        # or before Celery ends it past the task's hard time limit.
        if isinstance(exception, PROCESS_ENDED) and ours(getattr(sender, "app", None)):
            on_lost_task(runtime_for(app, dgs.settings), sender, exception)

    signals.worker_init.connect(on_worker_init, weak=False)
    signals.worker_process_init.connect(on_process_init, weak=False)
    signals.worker_ready.connect(on_ready, weak=False)
    signals.worker_shutting_down.connect(on_shutting_down, weak=False)
    signals.worker_shutdown.connect(on_shutdown, weak=False)
    signals.task_unknown.connect(on_unknown_task, weak=False)
    signals.task_failure.connect(on_task_failure, weak=False)
    signals.task_revoked.connect(on_task_revoked, weak=False)
