"""Beat's demand book, kept from the tracked schedules (the priority classes'
overload signal, the look-ahead's shares), and beat's side of the look-ahead
admission (``dgs_lookahead``): each round's admission built from the runs in
progress (:mod:`celery_dgs.core.lookahead` decides)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..core.index import DeadlineIndex
from ..core.lookahead import AdmissionRound, CapQueue, DemandBook
from ..core.overload import expected_seconds
from .types import Tracked


def note_demand(book: DemandBook, name: str, tracked: Tracked | None, held: bool) -> None:
    """A schedule was (re)loaded: its share counts while it is schedulable
    (a deferred check's never: :meth:`DemandBook.note_schedule`)."""
    if tracked is None or held:
        book.forget(name)
    else:
        book.note_schedule(name, tracked.spec, tracked.stats, expected_seconds(tracked))


class BeatLookahead:
    def __init__(self, book: DemandBook) -> None:
        #: beat's demand book (kept by :func:`note_demand`)
        self.book = book
        self.queue = CapQueue()

    def note(self, name: str, tracked: Tracked | None, held: bool) -> None:
        """A schedule was (re)loaded: one not schedulable leaves the cap's queue."""
        if tracked is None or held:
            self.queue.discard(name)

    def round(
        self, now: float, free: int, tracked: Mapping[str, Tracked], busy: Iterable[str]
    ) -> AdmissionRound:
        """The round's admission: ``free`` slots, and the schedules running or
        dispatched (each expected to end its expected run time, or the book's
        estimate of it, after its recorded start, or after ``now`` if its start
        is not recorded yet)."""
        names = list(busy)

        def runs() -> list[tuple[float, float]]:
            out = []
            for name in names:
                t = tracked.get(name)
                if t is None:
                    continue
                expected = self.book.expected_s(name, expected_seconds(t))
                start = t.stats.last_start_at
                end = t.stats.last_end_at
                started = (
                    now
                    if start is None or (end is not None and end >= start)
                    else start.timestamp()
                )
                out.append((started + expected, expected))
            return out

        return AdmissionRound(self.book, now, free + len(names), runs, self.queue)

    @staticmethod
    def hold(
        admission: AdmissionRound,
        index: DeadlineIndex,
        name: str,
        tracked: Tracked,
        should_start_by: float,
    ) -> bool:
        """Whether ``name``, chosen and due by its start times, is held back;
        then it is re-indexed, eligible again at the time to look again. A run
        requested by an operator is never held."""
        if tracked.run_requested_at is not None:
            return False
        wake = admission.hold_until(expected_seconds(tracked), should_start_by, name)
        if wake is None:
            return False
        index.upsert(name, wake, should_start_by)
        return True
