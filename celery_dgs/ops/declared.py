"""The app's declarations as ``status`` reads them.

Beat stores every valid declaration at its start; an invalid one it has
stored before keeps its last valid version (``status`` lists it in ERROR
``declaration_invalid``), but an invalid *new* one is skipped: the store
never holds it (nor, active, one deactivated before), so the store's
counts cannot show it. :func:`unstored_invalid`
finds those from the app's declarations, for a line of their own (and an
exit status of 1) under ``status``' table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..declarations import Declarations
from ..store.base import ScheduleStore
from ..store.selection import Selection


@dataclass(frozen=True)
class UnstoredInvalid:
    """An invalid declaration the store does not hold: its schedule, the
    field at fault, and why."""

    name: str
    field: str
    message: str


def unstored_invalid(
    decl: Declarations, store: ScheduleStore, now: datetime
) -> list[UnstoredInvalid]:
    """The invalid declarations of ``decl`` whose schedule ``store`` does not
    hold active (one read of those names), by name."""
    if not decl.errors:
        return []
    names = tuple(sorted(decl.errors))
    active = {row.name for row in store.status_rows(now, Selection(names=names))}
    return [
        UnstoredInvalid(name, decl.errors[name].field, decl.errors[name].message)
        for name in names
        if name not in active
    ]


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
