"""Workers beat does not place new dispatches on: those that stopped pinging.

A worker owning a lease whose last ping is older than ``ping_timeout`` (steal
pending or takeable) is paused (SIGSTOP), partitioned, dead, or only one of
its pool processes is stuck. Lease ages are read by the Redis server's clock,
so a forward step of that clock makes a worker that pings normally look the
same until its next ping (the warning says so); its next registration
refresh, dated by the stepped clock too, brings it back. Its registration may stay live for up to
``worker_ttl``, and a dispatch placed on a stopped worker waits
``dispatch_timeout`` before beat takes it back. So beat sets such a worker
aside while it has not refreshed its registration since the lease went stale
(``last_ping_at + ping_timeout``): a stopped or cut-off worker refreshes
nothing and stays aside, also after another worker took its lease over; a
worker whose main process still heartbeats (one pool child stuck) is back
within one registration heartbeat (``worker_ttl / 3``), so its other pool
processes can take the stuck run over. Once back, the leases that went stale
before that refresh do not set it aside again (only a lease that goes stale
later does), until they are taken over.

A worker restarted under the same name is a new instance (a new
``registered_at``): a lease last pinged before the instance registered is an
earlier instance's, and is taken over as any dead owner's (after
``ping_timeout + steal_delay``); it never sets the new instance aside
(:func:`own_stale_ping`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from ..registry import WorkerInfo

logger = logging.getLogger("celery_dgs.beat")


def own_stale_ping(worker: WorkerInfo, last_ping: datetime | None) -> datetime | None:
    """``last_ping`` (the latest ping of ``worker``'s stale leases) when those
    leases may be this instance's; ``None`` when it is older than the
    instance's first registration: an earlier instance under the same name
    owned them (a worker registers before it takes any lease)."""
    if last_ping is None or worker.registered_at is None:
        return last_ping
    return last_ping if last_ping >= worker.registered_at else None


class StalledWorkers:
    """Remembers set-aside workers across rounds; :meth:`placeable` filters a round's workers."""

    def __init__(self) -> None:
        #: worker name -> the moment it must have refreshed its registration after.
        self._set_aside: dict[str, datetime] = {}
        #: worker name -> the stale moment it was heard from after: leases stale
        #: by then do not set it aside again.
        self._answered: dict[str, datetime] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._set_aside

    def __len__(self) -> int:
        return len(self._set_aside)

    def placeable(
        self,
        workers: Sequence[WorkerInfo],
        stale_owners: Mapping[str, datetime],
        *,
        ping_timeout: timedelta,
        worker_ttl: timedelta,
    ) -> list[WorkerInfo]:
        """The live ``workers`` that may take new dispatches this round.

        ``stale_owners``: owner name -> latest ``last_ping_at`` of its leases not
        pinged within ping_timeout. A registration was last refreshed at
        ``expires_at - worker_ttl``.
        """
        out: list[WorkerInfo] = []
        for w in workers:
            self._forget_earlier_instance(w, ping_timeout)
            last_ping = own_stale_ping(w, stale_owners.get(w.name))
            if last_ping is None:
                self._answered.pop(w.name, None)
            else:
                self._note_stale(w.name, last_ping + ping_timeout, ping_timeout)
            since = self._set_aside.get(w.name)
            if since is not None:
                if w.expires_at is None or w.expires_at - worker_ttl <= since:
                    continue
                del self._set_aside[w.name]
                self._answered[w.name] = since
                logger.info("celery-dgs: worker %s is heard from again; dispatching to it", w.name)
            out.append(w)
        live = {w.name for w in workers}
        for known in (self._set_aside, self._answered):
            for name in [n for n in known if n not in live]:
                del known[name]  # its registration expired: forgotten
        return out

    def _forget_earlier_instance(self, w: WorkerInfo, ping_timeout: timedelta) -> None:
        """A worker set aside for a lease pinged before its current instance
        registered is back at once: that lease was an earlier instance's."""
        since = self._set_aside.get(w.name)
        if since is None or own_stale_ping(w, since - ping_timeout) is not None:
            return
        del self._set_aside[w.name]
        logger.info(
            "celery-dgs: worker %s registered again as a new instance (pid %d); the leases "
            "of its earlier instance are taken over as a dead owner's; dispatching to it",
            w.name,
            w.pid,
        )

    def _note_stale(self, name: str, stale_at: datetime, ping_timeout: timedelta) -> None:
        """Set ``name`` aside for a lease stale since ``stale_at``, unless it was
        heard from after that moment already."""
        answered = self._answered.get(name)
        if answered is not None and stale_at <= answered:
            return
        since = self._set_aside.get(name)
        if since is not None and stale_at <= since:
            return
        if since is None:
            logger.warning(
                "celery-dgs: worker %s owns a lease not pinged for over ping_timeout "
                "(%.1fs) by the Redis server's clock (last ping %s): the worker is "
                "paused, partitioned or dead, or the Redis host's clock was stepped "
                "forward; no new dispatches to it until it refreshes its registration",
                name,
                ping_timeout.total_seconds(),
                (stale_at - ping_timeout).isoformat(),
            )
        self._set_aside[name] = stale_at
