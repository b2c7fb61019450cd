"""The leading beat's dispatch pace, kept in Redis for ``status`` and the page.

The leader writes its :class:`~celery_dgs.core.pace.PaceFigures` as JSON at
``KeySpace.beat_pace()`` every few seconds; the value expires after three
writes' worth of silence, so a stopped beat leaves no pace behind.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import redis

from .core.elevator import ElevatorState
from .core.pace import PaceFigures, WindowFigures
from .keys import KeySpace

logger = logging.getLogger(__name__)

#: Seconds between two writes of the leader's pace.
PACE_WRITE_INTERVAL_S = 5.0


class PaceBoard:
    """Writes (the leader) and reads (``status``, the page) the pace on ``client``."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        *,
        every_s: float = PACE_WRITE_INTERVAL_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.key = keys.beat_pace()
        self.every_s = every_s
        self._monotonic = monotonic
        #: The first write comes ``every_s`` after start: a pace over a few seconds.
        self._written = monotonic()

    def maybe_write(self, figures: Callable[[], PaceFigures]) -> bool:
        """Write ``figures()`` if the last write is ``every_s`` old (failures
        are logged at DEBUG: the pace is advice, never worth a failed tick);
        whether it was time to."""
        now = self._monotonic()
        if now - self._written < self.every_s:
            return False
        self._written = now
        try:
            text = json.dumps(figures().to_dict())
            self.client.set(self.key, text, px=int(self.every_s * 3000))
        except redis.RedisError as exc:
            logger.debug("celery-dgs: writing beat's pace failed: %s", exc)
        return True

    def read(self) -> PaceFigures | None:
        """The leader's last pace, or ``None`` (none written lately, or unreadable)."""
        raw = self.client.get(self.key)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            return PaceFigures(
                window_s=float(data["window_s"]),
                rounds=int(data["rounds"]),
                dispatches=int(data["dispatches"]),
                busy_share=float(data["busy_share"]),
                capped_rounds=int(data["capped_rounds"]),
                window=_window_figures(data.get("window")),
                elevator=_elevator(data.get("elevator")),
            )
        except (ValueError, KeyError, TypeError):
            logger.warning("celery-dgs: beat's pace at %s is malformed: %.200r", self.key, raw)
            return None


def _window_figures(data: object) -> WindowFigures | None:
    """The window's figures of a written pace (``None``: beat holds every
    schedule, or a pace written before they were)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TypeError(f"window figures must be an object, got {data!r}")
    room = data["room"]
    return WindowFigures(
        held=int(data["held"]),
        size=int(data["size"]),
        full=bool(data["full"]),
        room=None if room is None else int(room),
    )


def _elevator(data: object) -> ElevatorState | None:
    """The pace's elevator state (absent from a beat that wrote none)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TypeError(f"'elevator' is not an object: {data!r}")
    return ElevatorState.from_dict(data)
