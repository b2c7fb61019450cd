"""A fake upstream for the example's lister: a few web sources that change at
very different rates, and some that never change.

Each source's content is a version number that a pure function of the wall
clock gives, so the lister and every worker process agree on it without
sharing anything: a source with a change period ``p`` changes at every
multiple of ``p`` seconds since the epoch; a dead source (``None``) is at
version 0 for ever. ``last_modified`` is what an upstream API would report
(the time of the latest change), and only the sources with ``hints=True``
report it, as in a real fleet where some sites expose it and others do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


@dataclass(frozen=True)
class Source:
    """One upstream source: its name, how often it changes (seconds; ``None``:
    never) and whether its lister reports ``last_modified``."""

    name: str
    change_every_s: float | None
    hints: bool = False

    def version(self, now: float) -> int:
        """The content's version at ``now`` (epoch seconds)."""
        if self.change_every_s is None:
            return 0
        return math.floor(now / self.change_every_s)

    def last_modified(self, now: float) -> datetime | None:
        """When the content last changed (``None`` for a source that never did,
        or one that does not say)."""
        if not self.hints or self.change_every_s is None:
            return None
        changed = self.version(now) * self.change_every_s
        return datetime.fromtimestamp(changed, tz=timezone.utc)


#: The sources the lister discovers: two that change often, two that change
#: rarely, two dead ones (their visits find nothing and spread out).
SOURCES: tuple[Source, ...] = (
    Source("news.example.org", 12.0, hints=True),
    Source("blog.example.org", 20.0),
    Source("docs.example.org", 600.0, hints=True),
    Source("wiki.example.org", 900.0),
    Source("archive.example.org", None),
    Source("mirror.example.org", None),
)


def source(name: str) -> Source:
    """The source called ``name``; ``KeyError`` naming it when it is unknown."""
    for candidate in SOURCES:
        if candidate.name == name:
            return candidate
    raise KeyError(f"unknown upstream source {name!r}")


# -- the shop's orders (deferred checks) ---------------------------------------
#: How long after it is placed each kind of order ships: before its first
#: check, between its first check and its escalation, or never.
SHIP_AFTER_S = (10.0, 30.0, None)


def place_order(client: Any, order: str, now: float) -> None:
    """Record that ``order`` was placed at ``now`` (a Redis hash of orders)."""
    client.hset("example:orders", order, now)


def order_shipped(client: Any, order: str, now: float) -> bool:
    """Whether ``order`` has shipped by ``now``: orders ship after one of
    :data:`SHIP_AFTER_S`, chosen by the order's number (``"o7"``: 7 % 3)."""
    placed = client.hget("example:orders", order)
    if placed is None:
        return True  # unknown order: nothing to alert about
    digits = "".join(ch for ch in order if ch.isdigit()) or "0"
    after = SHIP_AFTER_S[int(digits) % len(SHIP_AFTER_S)]
    return after is not None and now >= float(placed) + after
