"""Beat's book of dispatches not started yet, kept against the dispatch records
in Redis: adopted on load and election, dropped once started, taken back
after ``dispatch_timeout``, or at once when the worker they were sent to is
no longer live (its message waits in that worker's own queue)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Set
from datetime import datetime

from ..dispatches import DispatchBackend
from ..settings import DgsSettings
from .ranking import BeatRanking
from .state import BeatState
from .types import ANY_WORKER, Pending

logger = logging.getLogger("celery_dgs.beat")


class PendingDispatches:
    def __init__(
        self,
        state: BeatState,
        ranking: BeatRanking,
        dispatches: DispatchBackend,
        settings: DgsSettings,
        monotonic: Callable[[], float],
    ) -> None:
        self.state, self.ranking, self.dispatches = state, ranking, dispatches
        self.settings, self.monotonic = settings, monotonic

    def adopt(self) -> None:
        """Park every schedule with a dispatch record in Redis (written by this or a
        previous leader) until it starts or is taken back after dispatch_timeout."""
        state = self.state
        state.pending.clear()
        mono = self.monotonic()
        names = self.dispatches.pending_names()
        for name in names:
            record = self.dispatches.current(name)
            if record is not None and name in state.tracked:
                self.ranking.park(name)
                state.pending[name] = Pending(record.dispatch_id, record.worker, mono)
        state.dispatch_index_exact = names == state.pending.keys()

    def expected_count(self) -> int | None:
        """The dispatch index's size when it is known to hold exactly ``pending``
        (then a round reads only its size), else ``None``."""
        return len(self.state.pending) if self.state.dispatch_index_exact else None

    def settle(self, still_pending: Set[str] | None, mono: float) -> None:
        """Drop the dispatches no longer in the dispatch index (started, or
        gone) and take back the expired ones. ``still_pending``: the index's
        names (``None``: it still holds exactly ``pending``)."""
        pending = self.state.pending
        if still_pending is not None:
            for name in [n for n in pending if n not in still_pending]:
                del pending[name]  # started (the worker consumed the record) or gone
        taken_back = self.take_back_expired(mono)
        if still_pending is not None:
            self.state.dispatch_index_exact = still_pending - taken_back == pending.keys()

    def take_back_expired(self, mono: float) -> set[str]:
        """Take back the dispatches not started within dispatch_timeout; returns the
        schedules whose record was removed. ``pending`` is in dispatch order (``since``
        never decreases), so the scan stops at the first one still in time."""
        timeout = self.settings.dispatch_timeout
        expired = []
        for name, pend in self.state.pending.items():
            if mono - pend.since <= timeout:
                break
            expired.append((name, pend))
        return self._take_back(expired, f"not started within {timeout:.0f}s")

    def note_instances(self, names: list[str], live: Mapping[str, datetime | None]) -> None:
        """Note, on the dispatches of ``names`` just booked, their worker's
        instance as the round that chose it read the workers (``live``)."""
        pending = self.state.pending
        for name in names:
            pend = pending.get(name)
            if pend is not None and pend.instance is None:
                pend.instance = live.get(pend.worker)

    def take_back_from_gone(self, live: Mapping[str, datetime | None]) -> set[str]:
        """Take back at once the dispatches sent to a worker not among the
        ``live`` ones (it left, or its registration expired, after the round
        that chose it read the workers), or to an earlier instance of one
        that registered again since (``live``: each worker's instance, its
        first registration; a worker killed and restarted under its name):
        its message waits in that worker's own queue, or died with the
        earlier process, and the schedule would wait ``dispatch_timeout``.
        Should the worker start it after all, the record is gone: a skip,
        never a second run. A dispatch's instance is the one the round that
        sent it read (:meth:`note_instances`; an adopted one's, the first
        round's after). Returns the schedules whose record was removed."""
        gone: list[tuple[str, Pending]] = []
        earlier: list[tuple[str, Pending]] = []
        for name, pend in self.state.pending.items():
            if pend.worker == ANY_WORKER:
                continue
            if pend.worker not in live:
                gone.append((name, pend))
                continue
            instance = live[pend.worker]
            if pend.instance is None:
                pend.instance = instance
            elif instance is not None and instance != pend.instance:
                earlier.append((name, pend))
        if not gone and not earlier:
            return set()
        taken_back = self._take_back(gone, "sent to a worker that is no longer live")
        taken_back |= self._take_back(
            earlier, "sent to an earlier instance of it (it registered again since: restarted)"
        )
        self.state.dispatch_index_exact = False  # the next round reads the index again
        return taken_back

    def _take_back(self, due: list[tuple[str, Pending]], why: str) -> set[str]:
        """Take back each of ``due``; returns the schedules whose record was removed."""
        state = self.state
        taken_back: set[str] = set()
        for name, pend in due:
            try:
                took = self.dispatches.take_back(name, pend.dispatch_id)
            except BaseException:  # Redis down: still pending, taken back next round
                state.dispatch_index_exact = False
                raise
            del state.pending[name]
            if took:
                taken_back.add(name)
                logger.warning(
                    "celery-dgs: dispatch %s of %r to %s %s; taken back",
                    pend.dispatch_id,
                    name,
                    pend.worker,
                    why,
                )
            else:  # started unseen, or replaced: the index is not known any more
                state.dispatch_index_exact = False
        return taken_back
