"""What one change poll of beat's brought: its rows counted by what they did
(the line beat logs after a poll that read any)."""

from __future__ import annotations

from dataclasses import dataclass

from ..store.records import StoredSchedule
from .types import Tracked


@dataclass
class PollChanges:
    """The rows of one change poll, counted by what they did: schedules
    ``added`` (active, not tracked before), ``removed`` (made inactive),
    ``changed`` (active and known before: a new spec, a pause or resume, a
    run request, a declaration error), ``runs`` (tracked, only their
    statistics new: a run started or ended), and deferred ``checks`` (added,
    moved or ended), of which ``check_runs`` changed by their runs (a
    check beat held whose statistics alone changed, or that had run)."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    runs: int = 0
    checks: int = 0
    check_runs: int = 0

    def note(self, row: StoredSchedule, *, known: bool, before: Tracked | None, held: bool) -> None:
        """Count ``row``; ``known``: beat knew its schedule before the poll,
        ``before`` as tracked (``held``: paused or disabled)."""
        if row.kind == "check":
            self.checks += 1
            # A run's effect: statistics alone (a start, a failed run), or
            # moved or ended by a verdict.
            ran = before is not None and (
                _statistics_only(before, row, held=held) or bool(row.check_count)
            )
            self.check_runs += ran
        elif not row.active:
            self.removed += 1
        elif not known:
            self.added += 1
        elif before is not None and _statistics_only(before, row, held=held):
            self.runs += 1
        else:
            self.changed += 1

    @property
    def worth_telling(self) -> bool:
        """Whether anything but runs' effects changed (an INFO line, else
        DEBUG): a busy beat logs no line per round for the runs it sent."""
        return bool(self.added or self.removed or self.changed or self.checks > self.check_runs)

    def __str__(self) -> str:
        ran = f" ({self.check_runs} that had run)" if self.check_runs else ""
        return (
            f"{self.added} added, {self.removed} removed, {self.changed} changed, "
            f"{self.runs} with a new run, {self.checks} deferred checks{ran}"
        )


def _statistics_only(before: Tracked, row: StoredSchedule, *, held: bool) -> bool:
    """Whether ``row`` differs from ``before`` in its statistics alone."""
    return (
        row.spec == before.spec
        and row.run_requested_at == before.run_requested_at
        and row.run_requested_priority == before.run_requested_priority
        and row.declaration_error == before.declaration_error
        and row.disabled_reason == before.disabled_reason
        and (row.paused or row.disabled_reason is not None) == held
    )
