"""Single-instance leases: one per schedule, held by the run that executes it.

:class:`LeaseBackend` (:mod:`celery_dgs.leases.base`) is the interface;
:class:`RedisLeases` is the Redis implementation; the value types are in
:mod:`celery_dgs.leases.types`.
"""

from __future__ import annotations

from .base import BeatViewSource, LeaseBackend
from .redis import RedisLeases
from .types import (
    LEASE_FORMAT_VERSION,
    AcquireResult,
    AcquireStatus,
    BeatView,
    CancelResult,
    CancelStatus,
    LeaseInfo,
    LeaseScan,
    PingResult,
    PingStatus,
)

__all__ = [
    "LEASE_FORMAT_VERSION",
    "AcquireResult",
    "AcquireStatus",
    "BeatView",
    "BeatViewSource",
    "CancelResult",
    "CancelStatus",
    "LeaseBackend",
    "LeaseInfo",
    "LeaseScan",
    "PingResult",
    "PingStatus",
    "RedisLeases",
]
