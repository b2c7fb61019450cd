"""Beat's book of dispatches not started yet, kept against the dispatch records
in Redis: adopted on load and election, dropped once started, taken back
after ``dispatch_timeout``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Set

from ..dispatches import DispatchBackend
from ..settings import DgsSettings
from .ranking import BeatRanking
from .state import BeatState
from .types import Pending

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
        state = self.state
        timeout = self.settings.dispatch_timeout
        expired = []
        for name, pend in state.pending.items():
            if mono - pend.since <= timeout:
                break
            expired.append((name, pend))
        taken_back: set[str] = set()
        for name, pend in expired:
            try:
                took = self.dispatches.take_back(name, pend.dispatch_id)
            except BaseException:  # Redis down: still pending, taken back next round
                state.dispatch_index_exact = False
                raise
            del state.pending[name]
            if took:
                taken_back.add(name)
                logger.warning(
                    "celery-dgs: dispatch %s of %r to %s not started within %.0fs; taken back",
                    pend.dispatch_id,
                    name,
                    pend.worker,
                    timeout,
                )
            else:  # started unseen, or replaced: the index is not known any more
                state.dispatch_index_exact = False
        return taken_back
