"""The app's declarations as ``status`` reads them.

Beat stores every valid declaration at its start; an invalid one it has
stored before keeps its last valid version (``status`` lists it in ERROR
``declaration_invalid``), but an invalid *new* one is skipped: the store
never holds it, so the store's counts cannot show it. :func:`unstored_invalid`
finds those from the app's declarations, for a line of their own (and an
exit status of 1) under ``status``' table.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..declarations import Declarations
from ..errors import UnknownScheduleError
from ..store.base import ScheduleStore

#: Invalid declarations looked up in the store (one read each); past this
#: many the rest are counted as not stored unread.
LOOKED_UP_MAX = 100


@dataclass(frozen=True)
class UnstoredInvalid:
    """An invalid declaration the store does not hold: its schedule, the
    field at fault, and why."""

    name: str
    field: str
    message: str


def unstored_invalid(decl: Declarations, store: ScheduleStore) -> list[UnstoredInvalid]:
    """The invalid declarations of ``decl`` that ``store`` does not hold, by name."""
    found = []
    for i, name in enumerate(sorted(decl.errors)):
        if i < LOOKED_UP_MAX:
            try:
                store.get(name)
                continue  # stored: listed in ERROR declaration_invalid
            except UnknownScheduleError:
                pass
        err = decl.errors[name]
        found.append(UnstoredInvalid(name, err.field, err.message))
    return found


def unstored_invalid_text(invalid: list[UnstoredInvalid], *, shown: int = 3) -> str | None:
    """One line on them (``None``: none): how many, the first few with their
    field, and where the rest are listed."""
    if not invalid:
        return None
    count = len(invalid)
    named = ", ".join(f"{i.name} ({i.field}: {i.message})" for i in invalid[:shown])
    more = f" and {count - shown} more" if count > shown else ""
    noun = "declaration is" if count == 1 else "declarations are"
    return (
        f"{count} {noun} invalid and not stored (beat skips them): {named}{more}; "
        "celery dgs check lists every one"
    )
