"""A stored schedule by its name, or an error naming the closest names."""

from __future__ import annotations

import difflib

from ..errors import UnknownScheduleError
from ..store.records import StoredSchedule
from .env import Env
from .errors import UnknownTarget


def resolve_schedule(env: Env, name: str) -> StoredSchedule:
    """The stored schedule called ``name``; :class:`UnknownTarget` naming the
    closest stored names otherwise."""
    store = env.runtime.store
    try:
        return store.get(name)
    except UnknownScheduleError:
        known = [s.name for s in store.list_schedules(include_inactive=True)]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        if not known:
            hint = " (the store has no schedules: run `celery dgs sync` or start beat)"
        raise UnknownTarget(f"no schedule named {name!r}{hint}") from None
