"""Deferred checks: their state on the schedule row, their window index, their history.

A deferred check is a schedule row of kind ``check``. ``first_check_at`` and
``check_count`` are its counts; its next check time is ``next_target_at``;
``earliest_check_at`` is the earliest next check time the row has had (beat's
change poll reads only checks that were ever due within its window).
``ix_dgs_schedules_check_due`` orders the pending checks by time (beat reads
its window with it); ``ix_dgs_schedules_schedule_names`` the other rows by
name (listing the schedules skips the checks). ``dgs_check_history`` keeps one row per ended check.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PENDING_CHECK = sa.text("kind = 'check' AND active")
_NOT_CHECK = sa.text("kind <> 'check'")


def upgrade() -> None:
    op.add_column("dgs_schedules", sa.Column("first_check_at", sa.DateTime(timezone=True)))
    op.add_column("dgs_schedules", sa.Column("check_count", sa.Integer()))
    op.add_column("dgs_schedules", sa.Column("earliest_check_at", sa.DateTime(timezone=True)))
    op.create_index(
        "ix_dgs_schedules_check_due",
        "dgs_schedules",
        ["next_target_at", "name"],
        postgresql_where=_PENDING_CHECK,
        sqlite_where=_PENDING_CHECK,
    )
    # Schedules by name without the checks: list_schedules (status, the status
    # page) reads them without scanning a million checks.
    op.create_index(
        "ix_dgs_schedules_schedule_names",
        "dgs_schedules",
        ["name"],
        postgresql_where=_NOT_CHECK,
        sqlite_where=_NOT_CHECK,
    )
    op.create_table(
        "dgs_check_history",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("task", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("check_count", sa.Integer(), nullable=False),
        sa.Column("failure_count", sa.Integer(), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True)),
        sa.Column("first_check_at", sa.DateTime(timezone=True)),
        sa.Column("last_check_at", sa.DateTime(timezone=True)),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_dgs_check_history_name", "dgs_check_history", ["name", "ended_at"])
    op.create_index("ix_dgs_check_history_ended_at", "dgs_check_history", ["ended_at"])


def downgrade() -> None:
    op.drop_table("dgs_check_history")
    op.drop_index("ix_dgs_schedules_schedule_names", table_name="dgs_schedules")
    op.drop_index("ix_dgs_schedules_check_due", table_name="dgs_schedules")
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("earliest_check_at")
        batch.drop_column("check_count")
        batch.drop_column("first_check_at")
