"""Schedules: the rows in WARNING while no moment passed, by ``should_start_by``.

``ix_dgs_schedules_kept_warning`` (and the same with the pool, and with the
task, leading): the active schedules (not the deferred checks) whose
``kept_level`` is 1 (the last run failed), by ``should_start_by``, name,
``error_at``, ``warning_at`` and ``kept_reason``. A page of WARNING rows
reads them in its order and stops at the page
(``celery_dgs.store.sql_status_parts``), where ``ix_dgs_schedules_kept_level``
gave every such row to sort; their count reads the same entries.

Revision ID: 0019_kept_warning
Revises: 0018_running_warning
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_kept_warning"
down_revision: str | None = "0018_running_warning"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEPT_WARNING = sa.text("kind <> 'check' AND active AND kept_level = 1")
_COLUMNS = ["should_start_by", "name", "error_at", "warning_at", "kept_reason"]
#: Index name's key part -> the leading columns.
_KEYS: dict[str, list[str]] = {"": [], "pool_": ["pool"], "task_": ["task"]}


def upgrade() -> None:
    for key, leading in _KEYS.items():
        op.create_index(
            f"ix_dgs_schedules_{key}kept_warning",
            "dgs_schedules",
            [*leading, *_COLUMNS],
            postgresql_where=_KEPT_WARNING,
            sqlite_where=_KEPT_WARNING,
        )


def downgrade() -> None:
    for key in _KEYS:
        op.drop_index(f"ix_dgs_schedules_{key}kept_warning", table_name="dgs_schedules")
