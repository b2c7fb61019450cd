"""A busy pool's eligible backlog with a window of schedules: at most a
bound of it waits for a slot in beat's memory.

The window's eligible part reads on past a busy pool's backlog to find the
other pools' work, and a plan hands what it looked past to
:attr:`BeatRanking.waiting <celery_dgs.beat.ranking.BeatRanking.waiting>`.
:class:`BusyBacklog` gives the ranking its :class:`WaitingBound
<celery_dgs.beat.ranking.WaitingBound>` (the window's size, at least
:data:`~celery_dgs.core.slot_wait.WAIT_BOUND_MIN`, past the window's own
range), lets go of what the bound takes out, and starts the eligible part
again once a trimmed class's wait runs low, so those are read again, most
urgent first. The simulator does the same (``sim/deadline_policy.py``).
"""

from __future__ import annotations

import logging

from ..core.slot_wait import wait_bound
from .ranking import BeatRanking, WaitingBound
from .schedule_window import ScheduleWindow

logger = logging.getLogger("celery_dgs.beat")


class BusyBacklog:
    def __init__(self, window: ScheduleWindow, ranking: BeatRanking) -> None:
        self.window, self.ranking = window, ranking
        #: How many schedules of a class may wait for a slot.
        self.size = wait_bound(window.bounds.size)

    def bound(self) -> WaitingBound:
        """The ranking's bound on the schedules waiting for a slot."""
        return WaitingBound(self.size, self.window.held.past_end, self.let_go)

    def let_go(self, names: list[str]) -> None:
        """Forget schedules the bound took out of the wait: the eligible part
        has passed over them, and reads them again once their class's wait
        runs low (:meth:`refill`)."""
        for name in names:
            self.window.forget(name)
            self.ranking.note_demand(name)
        logger.debug(
            "celery-dgs beat: schedule window: let go of %d schedules waiting for a busy "
            "pool's slot",
            len(names),
        )

    def refill(self) -> None:
        """After a round released schedules waiting for a slot: if a class
        whose backlog was let go of is running low, the eligible part starts
        again, so the schedules it passed over are read again."""
        waiting = self.ranking.waiting
        if waiting.trimmed and waiting.wants_refill(self.size):
            self.window.bounds.part.clear()
