"""How beat sends what a round chose: dispatch records first (fenced by the
leader token), then the messages, then the bookkeeping.

Every path puts each chosen schedule back in the index or in
``pending``/``parked``.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable

from ..dispatches import DispatchBackend, DispatchRecord
from ..errors import NotLeaderError
from ..failures import log_failure
from ..settings import DgsSettings
from ..store.base import ScheduleStore
from .leader import BeatLeadership
from .state import BeatState
from .types import DispatchOrder, Pending, Publisher

logger = logging.getLogger("celery_dgs.beat")


class DispatchSender:
    """Sends a round's chosen schedules and books them in the state."""

    def __init__(
        self,
        *,
        state: BeatState,
        requeue: Callable[[str], None],
        dispatches: DispatchBackend,
        publish: Publisher,
        store: ScheduleStore,
        settings: DgsSettings,
        leadership: BeatLeadership | None,
        monotonic: Callable[[], float],
    ) -> None:
        self.state, self.requeue = state, requeue
        self.dispatches, self.publish, self.store = dispatches, publish, store
        self.settings, self.leadership, self.monotonic = settings, leadership, monotonic
        self._on_dispatch: Callable[[float], None] | None = None
        self._on_check_dispatch: Callable[[float], None] | None = None

    def observe(
        self,
        on_dispatch: Callable[[float], None],
        on_check_dispatch: Callable[[float], None] | None = None,
    ) -> None:
        """Call ``on_dispatch`` with each dispatch's lateness (seconds past its
        should_start_by), and ``on_check_dispatch`` with each deferred check's
        start lateness (seconds past its check time, ``next_target_at``)."""
        self._on_dispatch, self._on_check_dispatch = on_dispatch, on_check_dispatch

    def order(self, name: str, worker: str, should_start_by: float) -> DispatchOrder:
        """The order for a chosen schedule (no longer in the index: the caller
        passes the ``should_start_by`` it was confirmed due with)."""
        spec = self.state.tracked[name].spec
        return DispatchOrder(
            schedule=name,
            task=spec.task,
            args=tuple(spec.args),
            kwargs=dict(spec.kwargs),
            dispatch_id=uuid.uuid4().hex,
            worker=worker,
            queue=spec.pool,
            expires_s=self.settings.dispatch_timeout,
            should_start_by=should_start_by,
        )

    def send(self, orders: list[DispatchOrder], now: float) -> None:
        """Write the dispatch records, publish, then book the published orders.

        The orders' schedules have left the index (``choose_dispatches``): every
        path puts each one back in the index or in ``pending``/``parked``. An error
        writing the records (Redis down, a malformed record) re-indexes them all
        and re-raises (beat's scheduler logs it and ticks again).
        """
        mono = self.monotonic()
        fence = self.leadership.fence if self.leadership is not None else None
        try:
            self.dispatches.add_many(
                [
                    DispatchRecord(
                        schedule=o.schedule,
                        dispatch_id=o.dispatch_id,
                        worker=o.worker,
                        dispatched_at=None,
                        expires_at=None,
                    )
                    for o in orders
                ],
                ttl=self.settings.dispatch_timeout,
                fence=fence,
            )
        except NotLeaderError as exc:
            self.state.dispatch_index_exact = False  # earlier chunks may have been written
            for order in orders:  # nothing was published; the new leader decides
                self.requeue(order.schedule)
            if self.leadership is not None:
                self.leadership.lost(f"{exc}; {len(orders)} dispatches not sent")
            return
        except BaseException:
            self.state.dispatch_index_exact = False  # earlier chunks may have been written
            for order in orders:  # nothing was published: schedulable again
                self.requeue(order.schedule)
            raise
        try:
            failed = {o.dispatch_id for o in self.publish(orders)}
        except Exception:
            logger.exception("celery-dgs: publishing %d dispatches failed", len(orders))
            failed = {o.dispatch_id for o in orders}
        # Book every order first (nothing here calls Redis or the store), then the
        # fallible calls, each contained: an error there cannot lose a schedule.
        published = [o for o in orders if o.dispatch_id not in failed]
        unsent = [o for o in orders if o.dispatch_id in failed]
        for order in unsent:
            self.requeue(order.schedule)
        for order in published:
            self.state.book_dispatch(order.schedule, Pending(order.dispatch_id, order.worker, mono))
        for order in unsent:
            self._take_back_unsent(order)
        for order in published:
            self._clear_run_request(order.schedule)
            lateness = now - order.should_start_by
            if self._on_dispatch is not None:
                self._on_dispatch(lateness)
            if self._on_check_dispatch is not None and order.schedule in self.state.checks:
                check = self.state.tracked.get(order.schedule)
                if check is not None and check.stats.next_target_at is not None:
                    self._on_check_dispatch(now - check.stats.next_target_at.timestamp())
            logger.info(
                "celery-dgs: dispatched %s to %s (dispatch %s, should_start_by lateness %+.1fs)",
                order.schedule,
                order.worker,
                order.dispatch_id,
                lateness,
            )

    def _take_back_unsent(self, order: DispatchOrder) -> None:
        """Remove the record of an order that was not published (it would expire)."""
        try:
            if self.dispatches.take_back(order.schedule, order.dispatch_id):
                return
        except Exception as exc:
            log_failure(
                logger,
                exc,
                "celery-dgs: taking back unpublished dispatch %s of %r failed; it "
                "expires after dispatch_timeout",
                order.dispatch_id,
                order.schedule,
            )
        self.state.dispatch_index_exact = False

    def _clear_run_request(self, name: str) -> None:
        """Clear a served ``celery dgs run`` request, in the state (a new
        :class:`~celery_dgs.beat.types.Tracked`) and in the store (logged on error: the request then
        stays stored and is served again after a beat restart)."""
        tracked = self.state.tracked.get(name)
        if tracked is None or tracked.run_requested_at is None:
            return
        requested_at = tracked.run_requested_at
        self.state.tracked[name] = dataclasses.replace(tracked, run_requested_at=None)
        try:
            self.store.clear_run_request(name, requested_at=requested_at)
        except Exception as exc:
            log_failure(logger, exc, "celery-dgs: clearing the run request of %r failed", name)
