"""Partial failures: the item counts a run reported, on the run and on its schedule.

``dgs_runs.items_ok`` / ``items_failed`` are what the run reported with
``celery_dgs.report_items`` (NULL: nothing). ``dgs_schedules.last_items_ok`` /
``last_items_failed`` are the counts of the schedule's last good or partially
failed run, which its condition names (NULL: none).

Revision ID: 0009_run_items
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_run_items"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dgs_runs", sa.Column("items_ok", sa.Integer(), nullable=True))
    op.add_column("dgs_runs", sa.Column("items_failed", sa.Integer(), nullable=True))
    op.add_column("dgs_schedules", sa.Column("last_items_ok", sa.Integer(), nullable=True))
    op.add_column("dgs_schedules", sa.Column("last_items_failed", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dgs_schedules") as batch:
        batch.drop_column("last_items_failed")
        batch.drop_column("last_items_ok")
    with op.batch_alter_table("dgs_runs") as batch:
        batch.drop_column("items_failed")
        batch.drop_column("items_ok")
