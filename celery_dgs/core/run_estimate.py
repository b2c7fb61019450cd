"""The expected run time of a schedule that has none yet (pure).

A schedule with no good run and no ``duration_override`` has no expected
run time (:func:`~celery_dgs.core.timing.expected_duration` is 0). Where a
decision needs one (the look-ahead admission: the first run of a new
schedule of a 12-hour task holds a slot for about 12 hours, and the cap must
be able to hold it back), :meth:`RunEstimates.expected_s` gives it the mean
expected run time of the other schedules of the same task, else of every
schedule that has one, else 0. The sums are kept as schedules are noted
(:class:`~celery_dgs.core.lookahead.DemandBook` notes each one on every
(re)index), so an estimate costs two dictionary look-ups, not a pass over
the fleet.
"""

from __future__ import annotations


class RunEstimates:
    """Expected run times summed per task and over every schedule that has
    one; ``note`` a schedule on every (re)index, ``forget`` it when it
    leaves."""

    def __init__(self) -> None:
        #: name -> (task, expected run time; 0: none yet)
        self._of: dict[str, tuple[str, float]] = {}
        #: task -> [sum of the expected run times, how many]
        self._by_task: dict[str, list[float]] = {}
        self._sum = 0.0
        self._count = 0

    def __len__(self) -> int:
        """Schedules that have an expected run time."""
        return self._count

    def note(self, name: str, task: str, expected_s: float) -> None:
        known = expected_s if expected_s > 0 else 0.0
        old = self._of.get(name)
        if old == (task, known):
            return
        if old is not None:
            self._drop(*old)
        self._of[name] = (task, known)
        if known:
            sums = self._by_task.setdefault(task, [0.0, 0.0])
            sums[0] += known
            sums[1] += 1
            self._sum += known
            self._count += 1

    def forget(self, name: str) -> None:
        old = self._of.pop(name, None)
        if old is not None:
            self._drop(*old)

    def expected_s(self, name: str, expected_s: float) -> float:
        """``expected_s`` when it is known (above 0), else the estimate for
        ``name`` (module docstring)."""
        if expected_s > 0:
            return expected_s
        noted = self._of.get(name)
        sums = self._by_task.get(noted[0]) if noted is not None else None
        if sums is not None and sums[1] > 0:
            return sums[0] / sums[1]
        return self._sum / self._count if self._count else 0.0

    def _drop(self, task: str, known: float) -> None:
        if not known:
            return
        sums = self._by_task[task]
        sums[0] -= known
        sums[1] -= 1
        if sums[1] <= 0:
            del self._by_task[task]
        self._sum -= known
        self._count -= 1
        if not self._count:
            self._sum = 0.0
