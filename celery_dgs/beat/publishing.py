"""How beat's orders become Celery messages.

:class:`CeleryPublisher` is beat's :class:`~celery_dgs.beat.types.Publisher`:
each order is one ``app.send_task`` (the message Celery builds: its headers,
routing, priority, expiry, and the ``before_task_publish`` /
``after_task_publish`` signals), to the worker's own queue (``worker_direct``)
or, without a worker (``dgs_capacity``), to the schedule's pool queue.

Where the broker's transport batches publishes (kombu's ``Producer.batch``:
kombu 5.7 or later on its Redis transport and the Sentinel one, unless the
connection retries its commands), a round's messages are buffered and sent
in pipelines of :data:`PUBLISH_CHUNK` messages: one broker round trip each.
Elsewhere (AMQP, ``memory://``, older kombu) each message is published on its
own, as ``send_task`` does.

What comes back is what was not published, or whose outcome is unknown (a
pipeline that failed may have run in part): beat takes back those orders'
dispatch records, so a message of theirs that did arrive is refused by the
worker's lease acquire (``STALE_DISPATCH``) and the schedule is dispatched
again.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from celery.utils.nodenames import worker_direct
from kombu.entity import Queue

from ..failures import connection_failure, failure_summary, redact_url
from .types import ANY_WORKER, DispatchOrder

logger = logging.getLogger("celery_dgs.beat")

#: Messages per broker pipeline on a transport that batches publishes (a
#: round of ``dgs_max_dispatches_per_tick`` = 5000 is five round trips).
PUBLISH_CHUNK = 1000
#: kombu flushes a batch by itself once it holds this many commands; the
#: publisher flushes every chunk before that, so it knows which messages each
#: pipeline carried (a message is one ``LPUSH``, plus a ``PEXPIRE`` per
#: priority step on a queue with an expiry).
_BATCH_MAX_COMMANDS = 1 << 30
#: Workers whose direct queue (a kombu ``Queue``, ~25 µs to build) the
#: publisher keeps; the least recently used is dropped beyond that (workers
#: come and go).
DIRECT_QUEUE_CACHE_SIZE = 1024


def broker_unreachable(exc: BaseException) -> bool:
    """kombu's connection error (it wraps the transport's), or one of Redis
    (also as the cause of kombu's ``BatchPublishError``)."""
    from kombu.exceptions import OperationalError

    return isinstance(exc, OperationalError) or connection_failure(exc) is not None


def batches_publishes(producer: Any) -> bool:
    """Whether ``producer``'s transport buffers the publishes of a
    ``Producer.batch`` (kombu < 5.7 has no such property: no)."""
    return bool(getattr(producer, "supports_batch_publish", False))


class _PublishOutcome:
    """The outcome of one publish call: orders in the broker, orders refused on
    their own (not a broker failure: logged, the others go on), and orders
    buffered in the pipeline not sent yet."""

    def __init__(self) -> None:
        self.sent: list[DispatchOrder] = []
        self.refused: list[DispatchOrder] = []
        self.buffered: list[DispatchOrder] = []

    def flushed(self) -> None:
        """The buffered orders' pipeline ran: they are in the broker."""
        self.sent += self.buffered
        self.buffered = []

    def not_published(self, orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        """The refused orders, then those neither sent nor refused, in order."""
        done = {o.dispatch_id for o in self.sent} | {o.dispatch_id for o in self.refused}
        return self.refused + [o for o in orders if o.dispatch_id not in done]


class CeleryPublisher:
    """Publishes a round's orders on a Celery app's broker; returns the orders
    not published (see the module doc)."""

    def __init__(self, app: Any, *, chunk_size: int = PUBLISH_CHUNK, batched: bool = True) -> None:
        """``batched=False``: one publish per message on every transport."""
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, not {chunk_size}")
        self.app, self.chunk_size, self.batched = app, chunk_size, batched
        #: The worker's own queue (``worker_direct``), built once per worker.
        self.direct_queue: Callable[[str], Queue] = functools.lru_cache(
            maxsize=DIRECT_QUEUE_CACHE_SIZE
        )(worker_direct)

    def __call__(self, orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        outcome = _PublishOutcome()
        try:
            with self.app.producer_or_acquire() as producer:
                if self.batched and batches_publishes(producer):
                    self._publish_batched(producer, orders, outcome)
                else:
                    for order in orders:
                        self._send(producer, order, outcome.sent, outcome.refused)
        except Exception as exc:
            self._log_stopped(exc, len(orders) - len(outcome.sent) - len(outcome.refused))
        return outcome.not_published(orders)

    def _publish_batched(
        self, producer: Any, orders: Sequence[DispatchOrder], outcome: _PublishOutcome
    ) -> None:
        """Buffer the messages and flush every :attr:`chunk_size` of them. An
        error leaving the batch (a failed flush, the broker unreachable) makes
        kombu discard what is still buffered, after the messages buffered
        before a failed ``send_task`` were flushed if the broker allows."""
        from kombu.exceptions import BatchPublishError

        # kombu refuses a batch whose producer got a new channel (its connection
        # was revived by a retry) or whose pipeline failed: the round stops.
        batch_over = (RuntimeError, BatchPublishError)
        with producer.batch(max_size=_BATCH_MAX_COMMANDS) as batch:
            for order in orders:
                try:
                    self._send(producer, order, outcome.buffered, outcome.refused, batch_over)
                except Exception:
                    batch.flush()  # what was buffered before it may still go
                    outcome.flushed()
                    raise
                if len(outcome.buffered) >= self.chunk_size:
                    batch.flush()
                    outcome.flushed()
            batch.flush()
            outcome.flushed()

    def _send(
        self,
        producer: Any,
        order: DispatchOrder,
        published: list[DispatchOrder],
        refused: list[DispatchOrder],
        stop_on: tuple[type[Exception], ...] = (),
    ) -> None:
        """``send_task`` of one order, appended to ``published`` (buffered, with a
        batch), or to ``refused`` if it failed on its own; raises when the broker
        is unreachable (every other order would wait out the same retries) or
        the error is one of ``stop_on``."""
        queue = order.queue if order.worker == ANY_WORKER else self.direct_queue(order.worker)
        try:
            self.app.send_task(
                order.task,
                args=order.args,
                kwargs=order.kwargs,
                task_id=order.dispatch_id,
                queue=queue,
                expires=order.expires_s,
                headers={"dgs_schedule": order.schedule, "dgs_dispatch_id": order.dispatch_id},
                producer=producer,
            )
        except Exception as exc:
            if isinstance(exc, stop_on) or broker_unreachable(exc):
                raise
            logger.exception("celery-dgs: publishing %s failed", order.schedule)
            refused.append(order)
            return
        published.append(order)

    def _log_stopped(self, exc: Exception, left: int) -> None:
        """One line when the broker is unreachable (not a traceback per order and
        tick); a traceback otherwise."""
        if broker_unreachable(exc):
            logger.warning(
                "celery-dgs: the broker at %s is unreachable (%s): %d dispatch(es) not "
                "published; beat retries them",
                redact_url(str(self.app.conf.broker_url)),
                failure_summary(exc),
                left,
            )
        else:
            logger.exception(
                "celery-dgs: publishing stopped; %d dispatch(es) not published (or not "
                "known to be); beat retries them",
                left,
            )
