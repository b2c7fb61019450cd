"""Workers beat does not place new dispatches on: those that stopped pinging.

A worker that owns a lease whose last ping is older than ``ping_timeout``
(steal pending or takeable) is paused (SIGSTOP), partitioned or dead: its
registration stays live for up to ``worker_ttl``, and a dispatch placed on it
would wait ``dispatch_timeout`` before being taken back. Beat leaves such a
worker out of placement from the round it sees the stale lease until the
worker proves it is running again by refreshing its registration (a later
``expires_at`` than the one seen when it was set aside). So a worker stays
set aside after another worker has taken its lease over, and a worker whose
pool child is stuck but whose main process still heartbeats is back as soon
as it has no stale lease.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime

from ..registry import WorkerInfo

logger = logging.getLogger("celery_dgs.beat")


class StalledWorkers:
    """Remembers set-aside workers across rounds; :meth:`placeable` filters a round's workers."""

    def __init__(self) -> None:
        #: worker name -> its registration's expires_at when last seen stale.
        self._set_aside: dict[str, datetime | None] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._set_aside

    def __len__(self) -> int:
        return len(self._set_aside)

    def placeable(
        self, workers: Sequence[WorkerInfo], stale_owners: Collection[str]
    ) -> list[WorkerInfo]:
        """The live ``workers`` that may take new dispatches this round.

        ``stale_owners``: owner names of the leases not pinged within ping_timeout.
        """
        out: list[WorkerInfo] = []
        live: set[str] = set()
        for w in workers:
            live.add(w.name)
            if w.name in stale_owners:
                if w.name not in self._set_aside:
                    logger.warning(
                        "celery-dgs: worker %s owns a lease it stopped pinging (paused, "
                        "partitioned or dead); no new dispatches to it until it is heard from",
                        w.name,
                    )
                self._set_aside[w.name] = w.expires_at
                continue
            if w.name in self._set_aside:
                seen = self._set_aside[w.name]
                if seen is None or w.expires_at is None or w.expires_at <= seen:
                    continue
                del self._set_aside[w.name]
                logger.info("celery-dgs: worker %s is heard from again; dispatching to it", w.name)
            out.append(w)
        for name in [n for n in self._set_aside if n not in live]:
            del self._set_aside[name]  # its registration expired: forgotten
        return out
