"""Selecting status rows: by condition, pool and name pattern; and telling
a deferred check's name from a schedule's."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Collection, Sequence

from ..core.schedule_names import CHECK_CONFIGURATION_PREFIX, split_schedule_name
from .row import StatusRow


def matches(
    row: StatusRow,
    *,
    conditions: Collection[str] = (),
    pools: Collection[str] = (),
    patterns: Sequence[str] = (),
) -> bool:
    """Whether a row passes the filters: any of ``conditions`` (level names,
    case-insensitive), any of ``pools``, a name matching any of ``patterns``
    (:func:`name_matches`). An empty filter accepts everything."""
    if conditions and row.condition not in {c.upper() for c in conditions}:
        return False
    if pools and row.pool not in pools:
        return False
    return not patterns or any(name_matches(row.name, p) for p in patterns)


_GLOB_CHARS = frozenset("*?[")


def name_matches(name: str, pattern: str) -> bool:
    """A pattern with a glob character (``*``, ``?``, ``[``) is a shell glob on
    the whole name; a plain word matches anywhere in it. Case-sensitive."""
    return name_matcher(pattern)(name)


def name_matcher(pattern: str) -> Callable[[str], bool]:
    """:func:`name_matches` for one pattern, compiled once (for many names)."""
    if _GLOB_CHARS.intersection(pattern):
        match = re.compile(fnmatch.translate(pattern)).match
        return lambda name: match(name) is not None
    return lambda name: pattern in name


def is_check_name(name: str) -> bool:
    """Whether ``name`` is a deferred check's (``task@check:key``)."""
    return split_schedule_name(name)[1].startswith(CHECK_CONFIGURATION_PREFIX)
