"""``DeadlineScheduler``: the Celery beat scheduler class.

Use it as ``celery -A proj beat -S celery_dgs:DeadlineScheduler`` or with
``beat_scheduler = "celery_dgs:DeadlineScheduler"``. On start it syncs the
declared schedules into the store, loads them into the index, and from then
on each tick is one :meth:`BeatEngine.tick`.

Two or more beats may run: one holds the leader lease in Redis and dispatches,
the others stand by and take over when it stops renewing (docs/beat-ha.md).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

from celery.beat import Scheduler
from celery.utils.nodenames import worker_direct
from kombu.entity import Queue

from ..core.clock import SystemClock
from ..dgs import get_dgs
from ..leases.leader import RedisLeader
from ..runtime import runtime_for
from ..store.base import owned_by_api
from .engine import ANY_WORKER, BeatEngine, DispatchOrder
from .leader import BeatLeadership

logger = logging.getLogger("celery_dgs.beat")

#: Seconds to wait after an unexpected error in a tick before trying again.
TICK_ERROR_BACKOFF_S = 5.0
#: Workers whose direct queue (a kombu ``Queue``, ~25 µs to build) ``publish``
#: keeps; the least recently used is dropped beyond that (workers come and go).
DIRECT_QUEUE_CACHE_SIZE = 1024


class DeadlineScheduler(Scheduler):  # type: ignore[misc]
    """Dispatches the eligible schedule closest to its deadline whenever a worker
    slot is free (see docs/architecture.md)."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        self.dgs = get_dgs(app)
        self.engine: BeatEngine | None = None
        self.leadership: BeatLeadership | None = None
        #: The worker's own queue (``worker_direct``), built once per worker.
        self._direct: Callable[[str], Queue] = functools.lru_cache(
            maxsize=DIRECT_QUEUE_CACHE_SIZE
        )(worker_direct)
        super().__init__(app, *args, **kwargs)

    def setup_schedule(self) -> None:
        settings = self.dgs.settings
        decl = self.dgs.all_declarations()
        rt = runtime_for(self.app, settings)
        report = rt.store.sync(
            list(decl.specs.values()), SystemClock().now(), invalid=decl.invalid()
        )
        for name, err in decl.errors.items():
            if name in report.invalid:
                logger.error("celery-dgs: schedule %s keeps its last valid stored version "
                             "(status: declaration_invalid): %s", name, err)  # fmt: skip
            else:
                logger.error("celery-dgs: schedule %s skipped: %s", name, err)
        for name in report.refused:
            logger.error("celery-dgs: declaration ignored: %s", owned_by_api(name))
        logger.info("celery-dgs: synced declarations: %s", report)
        self.leadership = BeatLeadership(
            RedisLeader(rt.redis, rt.keys, timeout=settings.beat_leader_timeout),
            node=socket.gethostname(), pid=os.getpid(),
            store_poll_interval=settings.store_poll_interval,
        )  # fmt: skip
        self.engine = BeatEngine(
            store=rt.store, leases=rt.leases, registry=rt.registry, dispatches=rt.dispatches,
            publish=self.publish, settings=settings, clock=SystemClock(),
            default_queue=self.app.conf.task_default_queue or "celery",
            max_interval=float(self.max_interval), leadership=self.leadership,
        )  # fmt: skip
        self.engine.load()
        if settings.metrics_port is not None:
            from ..metrics import serve_metrics

            try:
                serve_metrics(
                    self.engine, rt.store, SystemClock(), settings.metrics_port,
                    settings.metrics_addr,
                )
            except OSError:
                logger.exception("celery-dgs: cannot serve metrics on port %s",
                                 settings.metrics_port)  # fmt: skip

    def publish(self, orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        failed: list[DispatchOrder] = []
        try:
            with self.app.producer_or_acquire() as producer:
                for order in orders:
                    queue = (
                        order.queue if order.worker == ANY_WORKER else self._direct(order.worker)
                    )
                    try:
                        self.app.send_task(
                            order.task, args=order.args, kwargs=order.kwargs,
                            task_id=order.dispatch_id, queue=queue, expires=order.expires_s,
                            headers={"dgs_schedule": order.schedule,
                                     "dgs_dispatch_id": order.dispatch_id},
                            producer=producer,
                        )  # fmt: skip
                    except Exception:
                        logger.exception("celery-dgs: publishing %s failed", order.schedule)
                        failed.append(order)
        except Exception:
            logger.exception("celery-dgs: no connection to the broker; will retry")
            done = {o.dispatch_id for o in failed}
            failed.extend(o for o in orders if o.dispatch_id not in done)
        return failed

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.engine is None:
            return float(self.max_interval)
        try:
            return self.engine.tick()
        except Exception:
            logger.exception(
                "celery-dgs: beat tick failed; retrying in %.0fs", TICK_ERROR_BACKOFF_S
            )
            backoff = min(TICK_ERROR_BACKOFF_S, float(self.max_interval))
            if self.leadership is not None:  # a leader must not miss its renewals
                backoff = min(backoff, self.leadership.renew_interval)
            return backoff

    @property
    def schedule(self) -> dict[str, Any]:
        return {}

    def sync(self) -> None:
        """Nothing to persist: the store is written as things happen."""

    def close(self) -> None:
        if self.leadership is not None:
            try:
                self.leadership.resign()
            except Exception:
                logger.exception("celery-dgs: resigning the beat leadership failed")
        runtime_for(self.app, self.dgs.settings).close()

    @property
    def info(self) -> str:
        count = len(self.engine.tracked) if self.engine else 0
        return f"celery-dgs deadline scheduler: {count} schedules"
