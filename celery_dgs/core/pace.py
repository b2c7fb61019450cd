"""The leading beat's dispatch pace over the last minute (pure).

Beat notes each dispatch round: when it started and ended (monotonic
seconds), how many runs it dispatched, and whether it stopped at
``dgs_max_dispatches_per_tick`` with more due. From that window come the
figures an operator needs to tell who limits the runs per second: the slots
(beat is mostly idle, waiting for a slot to free) or beat itself (its rounds
fill most of its time, or keep hitting the per-round cap).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .elevator import ElevatorState

#: Seconds of rounds the figures cover.
PACE_WINDOW_S = 60.0
#: Beat counts as the limit when its rounds take at least this share of the
#: window, or when this share of its rounds stopped at the per-round cap.
BEAT_LIMITED_SHARE = 0.5
#: Seconds of rounds needed before the figures judge who limits (a beat that
#: just started has a few rounds and nothing in between to weigh them by).
MIN_JUDGED_WINDOW_S = 10.0


@dataclass(frozen=True)
class WindowFigures:
    """Beat's window of schedules (``dgs_schedule_window_size``) as the pace
    was written: ``held`` schedules (deferred checks aside) of a window of
    ``size``; ``full``: more can start within its horizon than it holds;
    ``room``: the most it holds while reading on for the certainty rule
    (``None``: as far as the rule needs)."""

    held: int
    size: int
    full: bool
    room: int | None

    @property
    def at_room(self) -> bool:
        """Whether it reached its room: the picks past it are the held ones'."""
        return self.full and self.room is not None and self.held >= self.room

    def to_dict(self) -> dict[str, int | bool | None]:
        return {"held": self.held, "size": self.size, "full": self.full, "room": self.room}


@dataclass(frozen=True)
class PaceFigures:
    """The last ``window_s`` seconds of dispatch rounds."""

    window_s: float
    rounds: int
    dispatches: int
    #: Seconds spent in rounds over the window's seconds.
    busy_share: float
    #: Rounds that stopped at the per-round dispatch cap with more due.
    capped_rounds: int
    #: Beat's window of schedules (``None``: beat holds every schedule).
    window: WindowFigures | None = None
    #: Where beat's priority classes stood as the pace was written.
    elevator: ElevatorState | None = None

    @property
    def dispatches_per_s(self) -> float:
        return self.dispatches / self.window_s if self.window_s > 0 else 0.0

    @property
    def beat_limited(self) -> bool:
        """Whether beat, not the slots, limits the runs per second."""
        if self.rounds == 0 or self.window_s < MIN_JUDGED_WINDOW_S:
            return False
        return (
            self.busy_share >= BEAT_LIMITED_SHARE
            or self.capped_rounds / self.rounds >= BEAT_LIMITED_SHARE
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "window_s": self.window_s,
            "rounds": self.rounds,
            "dispatches": self.dispatches,
            "dispatches_per_s": round(self.dispatches_per_s, 3),
            "busy_share": round(self.busy_share, 4),
            "capped_rounds": self.capped_rounds,
            "beat_limited": self.beat_limited,
            "window": None if self.window is None else self.window.to_dict(),
            "elevator": None if self.elevator is None else self.elevator.to_dict(),
        }


class RoundPace:
    """The rounds of the last ``window_s`` seconds (monotonic times)."""

    def __init__(self, window_s: float = PACE_WINDOW_S) -> None:
        if not window_s > 0:
            raise ValueError(f"pace window must be > 0 seconds, got {window_s!r}")
        self.window_s = window_s
        #: (started, ended, dispatched, capped), oldest first
        self._rounds: deque[tuple[float, float, int, bool]] = deque()
        self._first: float | None = None

    def note(self, started: float, ended: float, dispatched: int, capped: bool) -> None:
        if self._first is None:
            self._first = started
        self._rounds.append((started, max(started, ended), dispatched, capped))

    def figures(self, now: float) -> PaceFigures:
        """The figures of the rounds that ended within ``window_s`` of ``now``
        (a window not yet full counts from the first round)."""
        start = now - self.window_s
        rounds = self._rounds
        while rounds and rounds[0][1] < start:
            rounds.popleft()
        span = min(self.window_s, now - self._first) if self._first is not None else 0.0
        busy = sum(ended - max(started, start) for started, ended, _, _ in rounds)
        return PaceFigures(
            window_s=span,
            rounds=len(rounds),
            dispatches=sum(r[2] for r in rounds),
            busy_share=min(1.0, busy / span) if span > 0 else 0.0,
            capped_rounds=sum(1 for r in rounds if r[3]),
        )
