"""A stored schedule by its name, or an error naming the closest names."""

from __future__ import annotations

import difflib
from collections.abc import Collection

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
        raise UnknownTarget(f"no schedule named {name!r}{closest_names_hint(env, name)}") from None


def closest_names_hint(env: Env, name: str, *, besides: Collection[str] = ()) -> str:
    """``; did you mean a, b?`` naming the stored names closest to ``name``
    (a bounded read) other than ``besides``, a note when the store has none,
    or nothing."""
    if _declared_here(env, name):
        return (
            " in the store: this app declares it, but it is not stored yet (beat stores "
            "the declarations at its start; or run `celery dgs sync`)"
        )
    known = env.runtime.store.names_near(name, NEAR_NAMES)
    if not known:
        return " (the store has no schedules: run `celery dgs sync` or start beat)"
    others = [n for n in known if n not in besides]
    close = close_names(name, others)
    return f"; did you mean {', '.join(close)}?" if close else ""


def _declared_here(env: Env, name: str) -> bool:
    """Whether the app declares ``name`` (validly or not). Never raises: a
    declaration that fails to load leaves the hint to the stored names."""
    try:
        declared = env.dgs.all_declarations()
    except Exception:
        return False
    return name in declared.specs or name in declared.errors


def close_names(name: str, known: Collection[str], limit: int = 3) -> list[str]:
    """The names of ``known`` closest to ``name``, at most ``limit``: among
    the schedules of the same task (``task@configuration``), the closest
    configurations (a shared task name alone makes no two names close);
    else the closest whole names."""
    task, at, configuration = name.rpartition("@")
    if at:
        siblings = {n.rpartition("@")[2]: n for n in known if n.rpartition("@")[0] == task}
        if siblings:
            near = difflib.get_close_matches(configuration, list(siblings), n=limit, cutoff=0.6)
            return [siblings[c] for c in near]
    return difflib.get_close_matches(name, list(known), n=limit, cutoff=0.6)
