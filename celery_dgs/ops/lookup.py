"""A stored schedule by its name, or an error naming the closest names."""

from __future__ import annotations

import difflib

from ..errors import UnknownScheduleError
from ..store.records import StoredSchedule
from .env import Env
from .errors import UnknownTarget

#: The stored names read on each side of a misspelt one, in name order, for
#: the names it suggests (a bounded read, whatever the fleet's size).
NEAR_NAMES = 500


def resolve_schedule(env: Env, name: str) -> StoredSchedule:
    """The stored schedule called ``name``; :class:`UnknownTarget` naming the
    closest stored names otherwise."""
    store = env.runtime.store
    try:
        return store.get(name)
    except UnknownScheduleError:
        known = store.names_near(name, NEAR_NAMES)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        if not known:
            hint = " (the store has no schedules: run `celery dgs sync` or start beat)"
        raise UnknownTarget(f"no schedule named {name!r}{hint}") from None
