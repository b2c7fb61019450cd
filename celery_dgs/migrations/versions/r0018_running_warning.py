"""Schedules: the rows whose warning comes from a run in progress, by ``warning_at``.

``ix_dgs_schedules_running_warning`` (and the same with the pool, and with
the task, leading): the active schedules (not the deferred checks) whose
``warning_reason`` is not ``likely_late`` (a run in progress warns
``likely_late_running`` or ``over_expected_duration``): few rows, the runs
in progress. An idle schedule's warning is read from
``ix_dgs_schedules_warning_at`` within the largest margin of ``now``
(``celery_dgs.store.sql_status_parts``); a run's warning may have begun at
any time, and is read from these.

Revision ID: 0018_running_warning
Revises: 0017_condition_tally
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_running_warning"
down_revision: str | None = "0017_condition_tally"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUNNING_WARNING = sa.text("kind <> 'check' AND active AND warning_reason <> 'likely_late'")
_COLUMNS = ["warning_at", "error_at", "kept_level", "warning_reason"]
#: Index name's key part -> the leading columns.
_KEYS: dict[str, list[str]] = {"": [], "pool_": ["pool"], "task_": ["task"]}


def upgrade() -> None:
    for key, leading in _KEYS.items():
        op.create_index(
            f"ix_dgs_schedules_{key}running_warning",
            "dgs_schedules",
            [*leading, *_COLUMNS],
            postgresql_where=_RUNNING_WARNING,
            sqlite_where=_RUNNING_WARNING,
        )


def downgrade() -> None:
    for key in _KEYS:
        op.drop_index(f"ix_dgs_schedules_{key}running_warning", table_name="dgs_schedules")
