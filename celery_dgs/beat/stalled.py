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
processes can take the stuck run over.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from ..registry import WorkerInfo

logger = logging.getLogger("celery_dgs.beat")


class StalledWorkers:
    """Remembers set-aside workers across rounds; :meth:`placeable` filters a round's workers."""

    def __init__(self) -> None:
        #: worker name -> the moment it must have refreshed its registration after.
        self._set_aside: dict[str, datetime] = {}

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
        live: set[str] = set()
        for w in workers:
            live.add(w.name)
            since = self._set_aside.get(w.name)
            last_ping = stale_owners.get(w.name)
            if last_ping is not None and (since is None or last_ping + ping_timeout > since):
                if since is None:
                    logger.warning(
                        "celery-dgs: worker %s owns a lease not pinged for over ping_timeout "
                        "(%.1fs) by the Redis server's clock (last ping %s): the worker is "
                        "paused, partitioned or dead, or the Redis host's clock was stepped "
                        "forward; no new dispatches to it until it refreshes its registration",
                        w.name,
                        ping_timeout.total_seconds(),
                        last_ping.isoformat(),
                    )
                since = self._set_aside[w.name] = last_ping + ping_timeout
            if since is not None:
                if w.expires_at is None or w.expires_at - worker_ttl <= since:
                    continue
                del self._set_aside[w.name]
                logger.info("celery-dgs: worker %s is heard from again; dispatching to it", w.name)
            out.append(w)
        for name in [n for n in self._set_aside if n not in live]:
            del self._set_aside[name]  # its registration expired: forgotten
        return out
