"""The live runs' leases, as Redis holds them now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..leases.types import LeaseInfo
from .env import Env


@dataclass(frozen=True)
class LiveLeases:
    """Every readable lease (the oldest run first), Redis' ``now``, and what
    could not be read (one sentence each)."""

    leases: list[LeaseInfo]
    now: datetime
    malformed: list[str]


def read_leases(env: Env) -> LiveLeases:
    leases = env.runtime.leases
    scan = leases.scan()
    now = leases.now()
    ordered = sorted(scan.leases, key=lambda lease: (lease.started_at, lease.schedule))
    return LiveLeases(ordered, now, [str(exc) for exc in scan.malformed])
