"""How far a host's wall clock is from Redis's.

Leases, registrations and the run records' times are read from Redis's
``TIME``; beat judges deadlines by its own clock, and Celery discards a
message past its ``expires`` (beat's send time plus ``dgs_dispatch_timeout``,
by beat's clock) by the worker's clock. A host whose clock is seconds off is
told so in its log, with what the gap does. Beat and the worker measure at
no extra cost: a call they make anyway returns Redis's time.
"""

from __future__ import annotations

import logging
from datetime import datetime

from .core.durations import format_duration

#: An offset from Redis's clock at least this large (seconds) is logged.
NOTABLE_OFFSET_S = 1.0


def format_seconds(seconds: float) -> str:
    """``seconds`` to a tenth, as durations are written: ``412.3s`` -> ``6m52.3s``."""
    return format_duration(round(seconds, 1))


def measured_offset(local_before: float, redis_now: datetime, local_after: float) -> float:
    """This host's clock minus Redis's (seconds; positive: ahead), from a call
    made between two readings of ``time.time()`` that returned Redis's time."""
    return (local_before + local_after) / 2 - redis_now.timestamp()


def worker_offset_text(offset: float, dispatch_timeout: float) -> str:
    """What a worker's clock ``offset`` from Redis's does to its dispatches."""
    gap = f"{format_seconds(abs(offset))} {'ahead of' if offset > 0 else 'behind'}"
    head = f"this worker's clock is {gap} Redis's (TIME, the clock of leases and run records)"
    if offset <= 0:
        return (
            f"{head}: Celery keeps dispatches past their expiry (dgs_dispatch_timeout) "
            "that much longer; run NTP on this host"
        )
    every = (
        "so it discards every dispatch as expired on arrival"
        if offset >= dispatch_timeout
        else f"{format_seconds(dispatch_timeout - offset)} after beat sent them, not "
        f"{format_seconds(dispatch_timeout)}"
    )
    return (
        f"{head}: Celery discards beat's dispatches as expired by this clock "
        f"(dgs_dispatch_timeout {format_seconds(dispatch_timeout)} after beat sent them, by "
        f"beat's clock), {every}; run NTP on this host"
    )


def beat_offset_text(offset: float) -> str:
    """What beat's clock ``offset`` from Redis's does to its deadlines."""
    gap = f"{format_seconds(abs(offset))} {'ahead of' if offset > 0 else 'behind'}"
    return (
        f"beat's clock is {gap} Redis's (TIME, the clock of leases and run records): it "
        f"judges deadlines that much {'early' if offset > 0 else 'late'}, and its dispatches "
        "expire that much off at workers whose clocks are right; run NTP on this host"
    )


class OffsetWatch:
    """Logs a notable offset once, and again when it has moved a second or
    more or has come back within :data:`NOTABLE_OFFSET_S`."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        #: The last offset measured (seconds; ``None``: none yet).
        self.offset: float | None = None
        self._logged: float | None = None

    def notable(self) -> float | None:
        """The last offset if it is notable, else ``None``."""
        off = self.offset
        return off if off is not None and abs(off) >= NOTABLE_OFFSET_S else None

    def measured(self, offset: float, text: str, *, error: bool = False) -> None:
        """Record ``offset``; log ``text`` (what it does) when it is news."""
        self.offset = offset
        if abs(offset) < NOTABLE_OFFSET_S:
            if self._logged is not None:
                self.logger.info("celery-dgs: the clock is within 1s of Redis's again")
            self._logged = None
            return
        if self._logged is not None and abs(offset - self._logged) < NOTABLE_OFFSET_S:
            return
        self._logged = offset
        self.logger.log(logging.ERROR if error else logging.WARNING, "celery-dgs: %s", text)
