"""The values the store's deferred-check methods take and return
(:class:`~celery_dgs.store.base.ScheduleStore`: ``add_checks``, ``cancel_checks``,
``due_checks``, ``pending_checks``, ``check_summary``, ``check_history``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..core.checks import ON_EXISTS_CHOICES, CheckEnded
from ..core.spec import CheckSpec

#: The owner of every deferred check's row: only the check API changes it.
OWNER_CHECK = "check"


@dataclass(frozen=True, slots=True)
class NewCheck:
    """A check to add: its spec and its first check time (already on its slot).
    ``spec_text``: the spec's canonical JSON text (``spec_json``) when the
    caller built it already (``DeferredChecks`` does, once per template);
    ``None``: the store builds it."""

    spec: CheckSpec
    at: datetime
    spec_text: str | None = field(default=None, compare=False)


@dataclass(frozen=True, kw_only=True)
class CheckAddReport:
    """What ``add_checks`` did, by check name: ``added`` (new, or an ended check
    added again), ``kept`` (pending, left as it was), ``moved`` (pending, given
    the new time and arguments)."""

    added: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class CheckHistoryRecord:
    """An ended check: its counts, its times, and how it ended
    (``outcome``: one of :data:`celery_dgs.core.checks.CHECK_END_OUTCOMES`)."""

    name: str
    task: str
    key: str
    outcome: str
    reason: str | None
    check_count: int
    failure_count: int
    added_at: datetime | None
    first_check_at: datetime | None
    last_check_at: datetime | None
    ended_at: datetime


@dataclass(frozen=True, kw_only=True)
class CheckSummary:
    """Pending checks per task, how many of them are overdue (due before the
    ``now`` asked about), and the earliest due time among them."""

    pending: dict[str, int] = field(default_factory=dict)
    overdue: dict[str, int] = field(default_factory=dict)
    oldest_due: dict[str, datetime] = field(default_factory=dict)

    @property
    def total_pending(self) -> int:
        return sum(self.pending.values())

    @property
    def total_overdue(self) -> int:
        return sum(self.overdue.values())


def check_on_exists(on_exists: str) -> str:
    """``on_exists`` if it is one of :data:`ON_EXISTS_CHOICES`; ValueError otherwise."""
    if on_exists not in ON_EXISTS_CHOICES:
        raise ValueError(
            f"on_exists must be one of {', '.join(ON_EXISTS_CHOICES)}, got {on_exists!r}"
        )
    return on_exists


def history_record(
    spec: CheckSpec,
    ended: CheckEnded,
    *,
    failure_count: int | None,
    added_at: datetime | None,
    first_check_at: datetime | None,
    last_check_at: datetime | None,
    ended_at: datetime,
) -> CheckHistoryRecord:
    """The history record of ``spec``'s check, ended as ``ended`` says."""
    return CheckHistoryRecord(
        name=spec.name,
        task=spec.task,
        key=spec.key,
        outcome=ended.outcome,
        reason=ended.reason,
        check_count=ended.check_count,
        failure_count=failure_count or 0,
        added_at=added_at,
        first_check_at=first_check_at,
        last_check_at=last_check_at,
        ended_at=ended_at,
    )
