"""Schedules: kept start times and condition moments.

``next_can_start_at`` and ``should_start_by`` (the start times), the
condition while no moment has passed (``kept_level``, ``kept_reason``), the
moments after which it is WARNING and ERROR (``warning_at``, ``error_at``)
with their reasons, and the spec's ``pool``. Every write that changes what
they depend on keeps them (``celery_dgs.core.kept_condition``); ``status``
counts, filters and pages the fleet with them: the partial indexes (active
schedules, not the deferred checks) cover each condition's count and order.
Existing rows are filled in here.

Revision ID: 0010_kept_times
Revises: 0009_run_items
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision: str = "0010_kept_times"
down_revision: str | None = "0009_run_items"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ACTIVE_SCHEDULE = sa.text("kind <> 'check' AND active")
_MOMENTS = ("next_can_start_at", "should_start_by", "warning_at", "error_at")
_REASONS = ("kept_reason", "warning_reason", "error_reason")
#: The kept columns this revision adds, in the order it writes them.
_KEPT = (
    "next_can_start_at",
    "should_start_by",
    "kept_level",
    "kept_reason",
    "warning_at",
    "warning_reason",
    "error_at",
    "error_reason",
    "pool",
)
#: Index name -> its columns.
_INDEXES = {
    "ix_dgs_schedules_can_start": ["next_can_start_at"],
    "ix_dgs_schedules_kept_level": ["kept_level", "kept_reason", "error_at", "warning_at"],
    "ix_dgs_schedules_error_at": ["error_at", "kept_level", "error_reason"],
    "ix_dgs_schedules_warning_at": ["warning_at", "error_at", "kept_level", "warning_reason"],
    "ix_dgs_schedules_should_start": [
        "should_start_by",
        "name",
        "kept_level",
        "error_at",
        "warning_at",
    ],
}


def upgrade() -> None:
    from celery_dgs.store.sql_kept import backfill_kept

    for column in ("next_can_start_at", "should_start_by"):
        op.add_column("dgs_schedules", sa.Column(column, sa.DateTime(timezone=True)))
    op.add_column("dgs_schedules", sa.Column("kept_level", sa.Integer()))
    op.add_column("dgs_schedules", sa.Column("kept_reason", sa.String(32)))
    op.add_column("dgs_schedules", sa.Column("warning_at", sa.DateTime(timezone=True)))
    op.add_column("dgs_schedules", sa.Column("warning_reason", sa.String(32)))
    op.add_column("dgs_schedules", sa.Column("error_at", sa.DateTime(timezone=True)))
    op.add_column("dgs_schedules", sa.Column("error_reason", sa.String(32)))
    op.add_column("dgs_schedules", sa.Column("pool", sa.String(255)))
    backfill_kept(op.get_bind(), datetime.now(timezone.utc), _KEPT)
    for name, columns in _INDEXES.items():
        op.create_index(
            name,
            "dgs_schedules",
            columns,
            postgresql_where=_ACTIVE_SCHEDULE,
            sqlite_where=_ACTIVE_SCHEDULE,
        )


def downgrade() -> None:
    for name in _INDEXES:
        op.drop_index(name, table_name="dgs_schedules")
    with op.batch_alter_table("dgs_schedules") as batch:
        for column in ("pool", *_REASONS, *_MOMENTS, "kept_level"):
            batch.drop_column(column)
