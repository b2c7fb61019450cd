"""What the leading beat's ``fewest_errors`` order is giving up, kept in Redis
for ``status`` and the page.

While ``dgs_overload = "fewest_errors"`` and some pool's demand exceeds the
live slots that serve it, the order makes the schedules in ERROR whose runs buy the least
fresh time wait (:mod:`~celery_dgs.core.fewest_errors`). The leader writes
which, as an :class:`OverloadReport` in JSON at ``KeySpace.beat_overload()``,
each time it writes its pace; the value expires like the pace, so a stopped
beat leaves no report behind.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import redis

from .core.fewest_errors import Waiting
from .keys import KeySpace

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OverloadReport:
    """The leader's ``fewest_errors`` order now: whether some pool's demand
    exceeds the live slots that serve it, how many schedules in ERROR it makes
    wait, the lowest-value of them (``floor_at``: Unix seconds, infinite when
    never), and the pools over their slots
    (:func:`~celery_dgs.core.pool_slots.overloaded_pools`; ``()`` from a beat
    that wrote none)."""

    overloaded: bool
    waiting_count: int
    waiting: tuple[Waiting, ...] = ()
    pools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "overloaded": self.overloaded,
            "waiting_count": self.waiting_count,
            "waiting": [
                {
                    "name": w.name,
                    "value": round(w.value, 3),
                    "served_by": None if math.isinf(w.floor_at) else _iso(w.floor_at),
                }
                for w in self.waiting
            ],
            "pools": list(self.pools),
        }


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


class OverloadBoard:
    """Writes (the leader) and reads (``status``, the page) the report on ``client``."""

    def __init__(self, client: redis.Redis, keys: KeySpace, *, ttl_s: float = 15.0) -> None:
        self.client, self.key, self.ttl_s = client, keys.beat_overload(), ttl_s

    def write(self, report: OverloadReport) -> None:
        """Store ``report`` (failures are logged at DEBUG: advice, never worth a
        failed tick)."""
        try:
            self.client.set(self.key, json.dumps(report.to_dict()), px=int(self.ttl_s * 1000))
        except redis.RedisError as exc:
            logger.debug("celery-dgs: writing beat's overload report failed: %s", exc)

    def read(self) -> OverloadReport | None:
        """The leader's last report, or ``None`` (none lately, or unreadable)."""
        raw = self.client.get(self.key)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            waiting = tuple(
                Waiting(
                    str(w["name"]),
                    float(w["value"]),
                    math.inf
                    if w["served_by"] is None
                    else datetime.fromisoformat(w["served_by"]).timestamp(),
                )
                for w in data["waiting"]
            )
            pools = tuple(str(pool) for pool in data.get("pools", ()))
            return OverloadReport(
                bool(data["overloaded"]), int(data["waiting_count"]), waiting, pools
            )
        except (ValueError, KeyError, TypeError):
            logger.warning(
                "celery-dgs: beat's overload report at %s is malformed: %.200r", self.key, raw
            )
            return None
