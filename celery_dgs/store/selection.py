"""Which schedules a status read selects (:class:`Selection`), and its name
patterns as SQL: shell globs turned into ``GLOB`` (SQLite), ``LIKE`` or a
regular expression (PostgreSQL), with every other character escaped.

A pattern with a glob character (``*``, ``?``, ``[``) matches the whole name;
a plain word matches anywhere in it. Case-sensitive, as
:func:`celery_dgs.status.name_matches` (which the memory store uses).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

#: The characters that make a pattern a glob.
GLOB_CHARS = frozenset("*?[")
#: The escape character of the ``LIKE`` patterns built here.
LIKE_ESCAPE = "\\"


@dataclass(frozen=True)
class Selection:
    """The active schedules (deferred checks excluded) a status read covers:
    any of ``patterns`` (none: every name), in any of ``conditions`` (level
    names, case-insensitive; none: all), in any of ``pools`` (none: all; a
    spec without a pool is in ``default_pool``), whose task name contains
    ``task_word`` (empty: any), and among ``names`` when given."""

    patterns: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()
    default_pool: str = "celery"
    names: tuple[str, ...] | None = None
    task_word: str = ""

    @property
    def levels(self) -> tuple[str, ...]:
        """The condition names, upper case."""
        return tuple(sorted({c.upper() for c in self.conditions}))


def _tokens(pattern: str) -> Iterator[tuple[str, str]]:
    """``(kind, text)`` of a glob as :mod:`fnmatch` reads it: ``("*", "")``,
    ``("?", "")``, ``("class", body)`` (``!`` negation kept first), or
    ``("char", c)``. A ``[`` without its ``]`` is a plain character."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c in "*?":
            yield c, ""
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                yield "char", "["
            else:
                yield "class", pattern[i:j]
                i = j + 1
        else:
            yield "char", c


def is_glob(pattern: str) -> bool:
    return bool(GLOB_CHARS.intersection(pattern))


def _whole(pattern: str) -> str:
    """The glob a plain word means: anywhere in the name."""
    return pattern if is_glob(pattern) else f"*{pattern}*"


def sqlite_glob(pattern: str) -> str:
    """``pattern`` as an SQLite ``GLOB`` operand (case-sensitive, whole name)."""
    out = []
    for kind, body in _tokens(_whole(pattern) if is_glob(pattern) else pattern):
        if kind in "*?":
            out.append(kind)
        elif kind == "class":
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
        else:
            out.append(f"[{body}]" if body in "*?[]" else body)
    text = "".join(out)
    return text if is_glob(pattern) else f"*{text}*"


def like_pattern(pattern: str) -> str | None:
    """``pattern`` as a ``LIKE`` operand escaped with :data:`LIKE_ESCAPE`, or
    ``None`` when it has a character class (:func:`regex_pattern` then)."""
    out = []
    for kind, body in _tokens(pattern if is_glob(pattern) else ""):
        if kind == "class":
            return None
        if kind == "*":
            out.append("%")
        elif kind == "?":
            out.append("_")
        else:
            out.append(_like_escaped(body))
    if not is_glob(pattern):
        return f"%{_like_escaped(pattern)}%"
    return "".join(out)


def _like_escaped(text: str) -> str:
    return "".join(LIKE_ESCAPE + c if c in "%_\\" else c for c in text)


def regex_pattern(pattern: str) -> str:
    """``pattern`` as an anchored POSIX regular expression (PostgreSQL ``~``)."""
    out = ["^"]
    for kind, body in _tokens(_whole(pattern) if is_glob(pattern) else f"*{pattern}*"):
        if kind == "*":
            out.append(".*")
        elif kind == "?":
            out.append(".")
        elif kind == "class":
            negated = body.startswith("!")
            inner = (body[1:] if negated else body).replace("\\", "\\\\")
            out.append("[" + ("^" if negated else "") + inner + "]")
        else:
            out.append(re.escape(body))
    out.append("$")
    return "".join(out)
