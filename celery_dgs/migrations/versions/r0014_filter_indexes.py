"""Schedules: each condition's indexes again with the pool, and with the task, leading.

The status page's filters by pool and by a word of the task (and ``status
--pool``) count and page each condition's parts as the unfiltered reads do
(``ix_dgs_schedules_kept_level``, ``_error_at``, ``_warning_at``,
``_should_start``), within one pool or one task at a time: a range of these
partial indexes (active schedules, not the deferred checks) whose first
column is the pool (NULL: a spec without one) or the task. The task indexes
also give the distinct task names, one index probe each.

Revision ID: 0014_filter_indexes
Revises: 0013_ended_checks_index
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_filter_indexes"
down_revision: str | None = "0013_ended_checks_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ACTIVE_SCHEDULE = sa.text("kind <> 'check' AND active")
#: Index name's part -> the columns after the leading one.
_CONDITION_COLUMNS = {
    "kept_level": ["kept_level", "kept_reason", "error_at", "warning_at"],
    "error_at": ["error_at", "kept_level", "error_reason"],
    "warning_at": ["warning_at", "error_at", "kept_level", "warning_reason"],
    "should_start": ["should_start_by", "name", "kept_level", "error_at", "warning_at"],
}
_KEYS = ("pool", "task")


def upgrade() -> None:
    for key in _KEYS:
        for part, columns in _CONDITION_COLUMNS.items():
            op.create_index(
                f"ix_dgs_schedules_{key}_{part}",
                "dgs_schedules",
                [key, *columns],
                postgresql_where=_ACTIVE_SCHEDULE,
                sqlite_where=_ACTIVE_SCHEDULE,
            )


def downgrade() -> None:
    for key in _KEYS:
        for part in _CONDITION_COLUMNS:
            op.drop_index(f"ix_dgs_schedules_{key}_{part}", table_name="dgs_schedules")
